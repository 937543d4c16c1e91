// Input checks shared by the ops in ops.h, so every op words its errors the same way:
// "<op>: <tensor> <what is wrong>, got <the view>".
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "flashport/error.h"
#include "flashport/ops.h"
#include "flashport/tensor.h"

namespace flashport::ops_detail {

// A view with data, 1 to 4 dimensions (or exactly `ndim` when given) and no negative sizes: all that
// dense attention, whose kernels take any strides, asks of a view.
inline void check_sizes(const char* op, const char* name, const TensorView& t, int ndim = 0) {
    FP_CHECK(t.data != nullptr, op, ": ", name, " has no data (null pointer)");
    if (ndim)
        FP_CHECK(t.ndim == ndim, op, ": ", name, " must have ", ndim, " dimensions, got ", t.describe());
    else
        FP_CHECK(t.ndim >= 1 && t.ndim <= MAX_DIMS, op, ": ", name, " must have 1 to ", MAX_DIMS, " dimensions, got ",
                 t.describe());
    for (int d = 0; d < t.ndim; ++d)
        FP_CHECK(t.shape[size_t(d)] >= 0, op, ": ", name, " has a negative dimension: ", t.describe());
}

// check_sizes, and no negative strides and a unit inner stride (unless the innermost size is 1,
// where the stride is never used).
inline void check_view(const char* op, const char* name, const TensorView& t, int ndim = 0) {
    check_sizes(op, name, t, ndim);
    for (int d = 0; d < t.ndim; ++d)
        FP_CHECK(t.stride[size_t(d)] >= 0, op, ": ", name, " has a negative stride: ", t.describe());
    const int last = t.ndim - 1;
    FP_CHECK(t.stride[size_t(last)] == 1 || t.shape[size_t(last)] <= 1, op, ": ", name,
             " must have a unit stride in its last dimension (the kernels stream rows), got ", t.describe());
}

// The exact shape a tensor must have, checked dimension by dimension so the message names the
// culprit: "<op>: <name> must be <layout> = [a, b, c, d], got <the view>".
inline void check_shape(const char* op, const char* name, const char* layout, const TensorView& t,
                        std::initializer_list<int64_t> want) {
    int d = 0;
    for (int64_t w : want) {
        if (t.shape[size_t(d)] != w) {
            std::string dims;
            for (int64_t x : want) dims += (dims.empty() ? "" : ", ") + std::to_string(x);
            fail(op, ": ", name, " must be ", layout, " = [", dims, "], got ", t.describe());
        }
        ++d;
    }
}

// The CPU attention kernels' head-dim limit (dense and paged).
constexpr int64_t CPU_MAX_HEAD_DIM = 256;

inline bool same_shape(const TensorView& a, const TensorView& b) {
    if (a.ndim != b.ndim) return false;
    for (int d = 0; d < a.ndim; ++d)
        if (a.shape[size_t(d)] != b.shape[size_t(d)]) return false;
    return true;
}

inline void check_same_shape(const char* op, const char* name, const TensorView& t, const char* ref_name,
                             const TensorView& ref) {
    FP_CHECK(same_shape(t, ref), op, ": ", name, " must have the shape of ", ref_name, " (", ref.describe(), "), got ",
             t.describe());
}

// All views on one device. Returns true when that device is a GPU, which only a GPU build (CUDA or
// HIP, FLASHPORT_GPU) serves; a CPU-only build rejects it here, so no op reaches a backend it lacks.
inline bool check_device(const char* op, const TensorView& first, std::initializer_list<const TensorView*> rest) {
    for (const TensorView* t : rest)
        FP_CHECK(t->device == first.device, op, ": all tensors must be on one device, got ", first.device.name(),
                 " and ", t->device.name());
    if (first.device.is_cpu()) return false;
#ifndef FLASHPORT_GPU
    fail(op, " on ", first.device.name(), " needs a GPU build; configure with --preset cuda or --preset hip");
#endif
    return true;
}

inline void check_indices(const char* op, const char* name, const IndexView& ix, Device device) {
    FP_CHECK(ix.data != nullptr || ix.size == 0, op, ": ", name, " has no data (null pointer)");
    FP_CHECK(ix.size >= 0, op, ": ", name, " has a negative length ", ix.size);
    FP_CHECK(ix.device == device, op, ": ", name, " must be on ", device.name(), ", got ", ix.device.name());
}

// The number of rows of a [..., n] view: the product of all but its last dimension.
inline int64_t leading_rows(const TensorView& t) {
    int64_t rows = 1;
    for (int d = 0; d + 1 < t.ndim; ++d) rows *= t.shape[size_t(d)];
    return rows;
}

// ---- Whole-op checks, shared with the fused ops that contain those ops --------------------------
// Each names `op` in its messages, so a fused op's errors read like the plain op's with its own name.

// rope's views as its kernels take them: [tokens..., n_heads, head_dim], packed heads split and a lone
// head given its own dimension (no data moves).
struct RopeViews {
    TensorView out, x;
    bool gpu = false;  // the views (and the positions) are on a GPU
};
// Every check of rope (ops/rope.cpp) except the positions' values: the views (called out_name and
// x_name in messages), theta, params.head_dim, the head_dim and the positions' count and device.
RopeViews check_rope(const char* op, const char* out_name, const TensorView& out, const char* x_name,
                     const TensorView& x, const IndexView& positions, const RopeParams& params);
// The positions' values, on the host (CPU positions): each in [0, 2^24).
void check_rope_positions(const char* op, const IndexView& positions);

// Every check of paged_cache_write (ops/paged_cache.cpp): shapes, one dtype, one device, the slots'
// count, and on the CPU the slots' values (none past the cache). On a GPU the slots are device memory
// and the kernel skips a slot past the cache.
void check_paged_cache_write(const char* op, const TensorView& k_cache, const TensorView& v_cache,
                             const TensorView& k, const TensorView& v, const IndexView& slots);

// Every check of rope_qk_cache_write (ops/rope_cache.cpp), the positions' and slots' values included
// on the CPU: what `linear` runs before its product when RoPE and the cache write follow it. Returns
// rope's views of q and k.
struct RopeCacheViews {
    RopeViews q, k;
};
RopeCacheViews check_rope_qk_cache_write(const char* op, const TensorView& q, const TensorView& k, const TensorView& v,
                                         const IndexView& positions, const RopeParams& params,
                                         const TensorView& k_cache, const TensorView& v_cache, const IndexView& slots);

}  // namespace flashport::ops_detail
