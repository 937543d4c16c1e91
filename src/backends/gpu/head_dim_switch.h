// The head dims the GPU kernels are instantiated for, written once, and the switch that turns a run-time
// head_dim into the compile-time D of a kernel template (the idea of FlashAttention's static_switch.h:
// a generic lambda called with std::integral_constant<int, D>). The same lists answer the host's
// "which head dims does the GPU support" checks and error messages, so the instances, the dispatch
// and the checks cannot disagree.
//
//   return dispatch_head_dim<FlashHeadDims>(head_dim, "flash attention (portable)",
//                                           [&](auto d) { return launch<DT, d>(args, stream); });
//
// Host code only (launchers and planners); it includes nothing vendor-specific.
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

#include "flashport/error.h"

namespace flashport::gpu {

template <int... Ds>
struct HeadDims {
    static constexpr int values[] = {Ds...};
    static constexpr size_t count = sizeof...(Ds);
    static constexpr bool contains(long long d) { return ((d == Ds) || ...); }
    // The smallest instance at or above d (0: none). The list is ascending.
    static constexpr int at_least(long long d) {
        int best = 0;
        ((best = best == 0 && Ds >= d ? Ds : best), ...);
        return best;
    }
    // "64, 128 and 256": the list as error messages spell it.
    static std::string text() {
        std::string s;
        for (size_t i = 0; i < count; ++i)
            s += (i == 0 ? "" : i + 1 == count ? " and " : ", ") + std::to_string(values[i]);
        return s;
    }
};

// Flash forward (dense, varlen, paged prefill), both variants: 40, 80 and 160 (Stable Diffusion's) are
// not padded to a power of two; 16 and 32 serve small models (the engine's test fixtures).
using FlashHeadDims = HeadDims<16, 32, 40, 64, 80, 96, 128, 160, 256>;
// Flash forward on Hopper's wgmma (attention_flash_wgmma.cu): Stable Diffusion's 40, 80 and 160 run
// whole k16 slabs and O accumulators as wide as the head dim (wgmma's N), not a padded 64/128/256 tile.
using WgmmaHeadDims = HeadDims<40, 64, 80, 128, 160, 256>;
// Paged decode (split kernels, both variants, and the combine kernel).
using DecodeHeadDims = HeadDims<64, 128, 256>;

namespace detail {
template <int D0, int... Ds>
constexpr int first_head_dim(HeadDims<D0, Ds...>) {
    return D0;
}
template <class F, int... Ds>
bool call_head_dim(HeadDims<Ds...>, int head_dim, F& f) {
    return ((head_dim == Ds ? (f(std::integral_constant<int, Ds>{}), true) : false) || ...);
}
}  // namespace detail

// f(std::integral_constant<int, D>{}) for the D of Dims equal to head_dim, returning what f returns;
// a head_dim outside Dims fails with "<what>: head_dim <n> has no instance". The instances of f's
// template are exactly the list's.
template <class Dims, class F>
auto dispatch_head_dim(int head_dim, const char* what, F&& f) {
    using R = decltype(f(std::integral_constant<int, detail::first_head_dim(Dims{})>{}));
    if constexpr (std::is_void_v<R>) {
        if (!detail::call_head_dim(Dims{}, head_dim, f)) fail(what, ": head_dim ", head_dim, " has no instance");
    } else {
        R result{};
        auto store = [&](auto d) { result = f(d); };
        if (!detail::call_head_dim(Dims{}, head_dim, store)) fail(what, ": head_dim ", head_dim, " has no instance");
        return result;
    }
}

// As dispatch_head_dim, with head_dim rounded up to the smallest D of Dims at or above it: for kernels
// that zero-fill the columns past AttentionArgs::head_dim on load and store only those below it. A
// head_dim that is no multiple of 8 or above the largest D fails.
template <class Dims, class F>
auto dispatch_head_dim_up(int head_dim, const char* what, F&& f) {
    const int d = head_dim > 0 && head_dim % 8 == 0 ? Dims::at_least(head_dim) : 0;
    if (d == 0) fail(what, ": head_dim ", head_dim, " must be a multiple of 8 up to ", Dims::values[Dims::count - 1]);
    return dispatch_head_dim<Dims>(d, what, std::forward<F>(f));
}

}  // namespace flashport::gpu
