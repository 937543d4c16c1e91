// linear with rope_cache (flashport/linear.h: a qkv projection with RoPE and the KV-cache write after
// it), the cases the CPU test (test_linear.cpp) and the GPU test (tests/gpu/test_linear_gpu.cpp) run.
//
// Reference: the op is defined as the same bits as linear without rope_cache followed by
// rope_qk_cache_write on out's q, k and v heads, so that composition, run on the same device, is the
// reference, byte for byte: out, both caches (NaN-poisoned: slots nobody writes stay NaN) and every
// padding byte. Tolerance: none. Each part is checked against float64 by its own cases
// (linear_case.h, cache_write_case.h); on a GPU one 16-bit token runs the fused GEMV, whose rotation
// pair rows, cos/sin and cache addressing this comparison pins down.
//
// Grid: tokens 1 and 7, head_dim 16, 40, 64 and 128, GQA 1, 2 and 7, with and without the norm and the
// bias, int32 and int64 indices; every 5th token at a position up to 2^24 - 1, every 9th a padding
// slot (-1), slots shuffled over more blocks than the tokens need.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "flashport/linear.h"
#include "flashport/memory.h"
#include "flashport/paged_cache.h"
#include "ops/cache_write_case.h"
#include "ops/ops_test_util.h"
#include "ops/rope_cache_case.h"
#include "ops/rope_case.h"

namespace flashport::test {

struct LinearRopeCase {
    int64_t tokens, in, n_kv_heads, gqa, head_dim;
    bool norm, bias, wide;
    bool prologue = false;  // LinearParams::norm_in_prologue (a GPU one-token GEMV's norm folded in)
    int64_t block_size = 16;
    double theta = 1000000.0;

    int64_t n_heads() const { return n_kv_heads * gqa; }
    int64_t rows() const { return (n_heads() + 2 * n_kv_heads) * head_dim; }
    std::string name() const {
        return std::to_string(tokens) + "x" + std::to_string(in) + " " + std::to_string(n_heads()) + "x" +
               std::to_string(n_kv_heads) + "h d" + std::to_string(head_dim) + (norm ? " norm" : "") +
               (bias ? " bias" : "") + (wide ? " i64" : " i32") + (prologue ? " prologue" : "");
    }
};

inline std::vector<LinearRopeCase> linear_rope_cases() {
    std::vector<LinearRopeCase> cases;
    int n = 0;
    for (int64_t tokens : {1, 7})
        for (int64_t head_dim : {16, 40, 64, 128})
            for (int64_t gqa : {1, 2, 7}) {
                const int64_t kv = n % 3 == 0 ? 2 : 1, in = n % 2 ? 96 : 264;
                cases.push_back({tokens, in, kv, gqa, head_dim, n % 4 != 1, n % 4 != 2, n % 2 == 1});
                ++n;
            }
    return cases;
}

// A case's host tensors (out and the caches NaN-poisoned) and indices.
struct LinearRopeInputs {
    std::unique_ptr<HostTensor> x, w, b, gamma, out, k_cache, v_cache;
    std::vector<int64_t> positions, slots;
    std::vector<int32_t> positions32, slots32;

    LinearRopeInputs(const LinearRopeCase& c, DType dt, Rng& rng) {
        const int64_t blocks = (c.tokens + c.block_size - 1) / c.block_size + 2;
        x = std::make_unique<HostTensor>(dt, std::vector<int64_t>{c.tokens, c.in});
        w = std::make_unique<HostTensor>(dt, std::vector<int64_t>{c.rows(), c.in});
        b = std::make_unique<HostTensor>(dt, std::vector<int64_t>{c.rows()});
        gamma = std::make_unique<HostTensor>(dt, std::vector<int64_t>{c.in});
        out = std::make_unique<HostTensor>(dt, std::vector<int64_t>{c.tokens, c.rows()});
        const std::vector<int64_t> cache = {blocks, c.block_size, c.n_kv_heads, c.head_dim};
        k_cache = std::make_unique<HostTensor>(dt, cache);
        v_cache = std::make_unique<HostTensor>(dt, cache);
        x->fill_normal(rng, 2.0, 0.3);
        w->fill_normal(rng, 1.0 / std::sqrt(double(c.in)));
        b->fill_normal(rng, 0.1);
        gamma->fill_normal(rng, 0.2, 1.0);
        positions = random_positions(rng, c.tokens);
        slots = random_slots(rng, c.tokens, blocks * c.block_size);
        positions32.assign(positions.begin(), positions.end());
        slots32.assign(slots.begin(), slots.end());
    }
};

// out's q, k and v heads ([tokens, heads, head_dim] views of its columns).
inline std::vector<TensorView> qkv_heads(const TensorView& out, const LinearRopeCase& c) {
    const int64_t q = c.n_heads() * c.head_dim, kv = c.n_kv_heads * c.head_dim;
    return {out.narrowed(1, 0, q).split_heads(c.head_dim), out.narrowed(1, q, kv).split_heads(c.head_dim),
            out.narrowed(1, q + kv, kv).split_heads(c.head_dim)};
}

// What one run leaves: out and both caches, every byte, and the kernel linear named.
struct LinearRopeResult {
    std::unique_ptr<HostTensor> out, k_cache, v_cache;
    std::string kernel;
};

// Runs c on a device: Tensor copies a HostTensor there (.view, .download(HostTensor&)), Indices<T> a
// vector of T (.view). fused: one linear with rope_cache; else linear, then rope_qk_cache_write.
template <class Tensor, template <class> class Indices>
LinearRopeResult run_linear_rope(const LinearRopeCase& c, const LinearRopeInputs& in, bool fused, Device device) {
    const Tensor x(*in.x), w(*in.w), b(*in.b), gamma(*in.gamma), out(*in.out), kc(*in.k_cache), vc(*in.v_cache);
    const Indices<int64_t> p64(in.positions), s64(in.slots);
    const Indices<int32_t> p32(in.positions32), s32(in.slots32);
    RopeCacheWrite rc;
    rc.n_heads = c.n_heads();
    rc.n_kv_heads = c.n_kv_heads;
    rc.rope = {c.theta, 0};
    rc.positions = c.wide ? p64.view : p32.view;
    rc.slots = c.wide ? s64.view : s32.view;
    rc.k_cache = kc.view;
    rc.v_cache = vc.view;
    LinearParams p;
    p.bias = c.bias ? &b.view : nullptr;
    p.norm_weight = c.norm ? &gamma.view : nullptr;
    p.norm_in_prologue = c.prologue;
    p.constant_weight = true;
    if (fused) p.rope_cache = &rc;
    Buffer ws(std::max<size_t>(1, linear_workspace_bytes(out.view, x.view, w.view, p)), device);
    LinearRopeResult r;
    r.kernel = linear(out.view, x.view, w.view, p, ws.data(), ws.size());
    if (!fused) {
        const std::vector<TensorView> h = qkv_heads(out.view, c);
        rope_qk_cache_write(h[0], h[1], h[2], rc.positions, rc.rope, kc.view, vc.view, rc.slots);
    }
    r.out = clone(*in.out);
    r.k_cache = clone(*in.k_cache);
    r.v_cache = clone(*in.v_cache);
    out.download(*r.out);
    kc.download(*r.k_cache);
    vc.download(*r.v_cache);
    return r;
}

// The fused run against the composition on the same device, byte for byte; returns the fused kernel.
// `edit` may change the inputs first (bad positions or slots).
template <class Tensor, template <class> class Indices>
std::string expect_rope_cache_matches_composition(const LinearRopeCase& c, DType dt, Rng& rng, Device device,
                                                  const std::function<void(LinearRopeInputs&)>& edit = {}) {
    SCOPED_TRACE(c.name() + " " + short_name(dt));
    LinearRopeInputs in(c, dt, rng);
    if (edit) {
        edit(in);
        in.positions32.assign(in.positions.begin(), in.positions.end());
        in.slots32.assign(in.slots.begin(), in.slots.end());
    }
    const LinearRopeResult fused = run_linear_rope<Tensor, Indices>(c, in, true, device);
    const LinearRopeResult composed = run_linear_rope<Tensor, Indices>(c, in, false, device);
    EXPECT_TRUE(same_bytes(*fused.out, *composed.out)) << "out differs from linear + rope_qk_cache_write";
    EXPECT_TRUE(same_bytes(*fused.k_cache, *composed.k_cache)) << "the k cache differs";
    EXPECT_TRUE(same_bytes(*fused.v_cache, *composed.v_cache)) << "the v cache differs";
    // Not vacuous: every token with a slot in the cache wrote its v rows.
    int64_t written = 0, slotted = 0;
    for (int64_t i = 0; i < fused.v_cache->numel(); ++i) written += !std::isnan(fused.v_cache->get(i));
    for (int64_t s : in.slots) slotted += s >= 0 && s < in.v_cache->view.dim(0) * c.block_size;
    EXPECT_EQ(written, slotted * c.n_kv_heads * c.head_dim);
    return fused.kernel;
}

// Host "devices" for the CPU run: a private copy of the tensor, and the indices as they are.
struct HostCopy {
    std::unique_ptr<HostTensor> t;
    TensorView view;
    explicit HostCopy(const HostTensor& h) : t(clone(h)), view(t->view) {}
    void download(HostTensor& h) const { std::memcpy(h.bytes.data(), t->bytes.data(), h.bytes.size()); }
};
template <class T>
struct HostIndices {
    std::vector<T> values;
    IndexView view;
    explicit HostIndices(const std::vector<T>& v) : values(v), view(std::span<const T>(values)) {}
};

}  // namespace flashport::test
