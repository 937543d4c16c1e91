// paged_cache_write and rope_qk_cache_write (flashport/paged_cache.h): the cases the CPU test
// (test_rope_cache.cpp), the GPU test (tests/gpu/test_rope_cache_gpu.cpp) and the bench (bench/ops.cpp)
// run, over rope_cache_case.h's grid (tokens 1/7/97, head_dim 16/64/128, GQA 1/2/7, block size 16/32,
// strided rows, int32 and int64 indices) plus Qwen2.5-7B's decode and prefill shapes.
//
// The caches start as random "older tokens" (so an untouched slot must keep its value, and compare()
// sees only finite values); the slots are shuffled over more blocks than the tokens need, every 9th
// a padding slot (-1). Reference: the cache rows of the slotted tokens replaced by their k and v rows,
// bit for bit; for rope_qk_cache_write, q and k rotated as rope_case.h's reference (rope's tolerance:
// 2 ulps, fp32 slack; the cache's k rows take k's tolerance), plus, for 16-bit dtypes, the rare cos or
// sin that lies within fp32 noise of a 16-bit rounding midpoint (the kernel's fp32 cosf may round it
// the other way: one ulp of cos times |x|, far above 2 ulps of a small output; seen once in the grid).
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "flashport/paged_cache.h"
#include "ops/op_case.h"
#include "ops/rope_cache_case.h"
#include "ops/rope_case.h"

namespace flashport::test {

// Entries [begin, begin + n) of an index view, on its device: rope_qk_cache_write's case keeps its
// positions and slots in one OpData index ([positions..., slots...]).
inline IndexView index_part(const IndexView& v, int64_t begin, int64_t n) {
    return v.type == IndexView::Type::I64 ? IndexView(static_cast<const int64_t*>(v.data) + begin, n, v.device)
                                          : IndexView(static_cast<const int32_t*>(v.data) + begin, n, v.device);
}

// One slot per token: shuffled over num_blocks · block_size, every 9th token a padding slot (-1).
inline std::vector<int64_t> random_slots(Rng& rng, int64_t tokens, int64_t capacity) {
    std::vector<int64_t> all(static_cast<size_t>(capacity)), slots;
    std::iota(all.begin(), all.end(), 0);
    for (size_t i = all.size() - 1; i > 0; --i) std::swap(all[i], all[size_t(rng.below(int64_t(i) + 1))]);
    for (int64_t t = 0; t < tokens; ++t) slots.push_back(t % 9 == 8 ? -1 : all[size_t(t)]);
    return slots;
}

inline int64_t cache_blocks(const RopeCacheCase& c) { return (c.tokens + c.block_size - 1) / c.block_size + 2; }

inline std::string cache_case_name(const RopeCacheCase& c) {
    return std::to_string(c.tokens) + "tok_" + std::to_string(c.n_heads()) + "x" + std::to_string(c.n_kv_heads) +
           "h_d" + std::to_string(c.head_dim) + "_bs" + std::to_string(c.block_size) + (c.wide ? "_i64" : "_i32") +
           "_pad" + std::to_string(c.pad);
}

inline std::string cache_case_params(const RopeCacheCase& c) {
    return "{\"tokens\": " + std::to_string(c.tokens) + ", \"n_heads\": " + std::to_string(c.n_heads()) +
           ", \"n_kv_heads\": " + std::to_string(c.n_kv_heads) + ", \"head_dim\": " + std::to_string(c.head_dim) +
           ", \"block_size\": " + std::to_string(c.block_size) + ", \"num_blocks\": " +
           std::to_string(cache_blocks(c)) + ", \"theta\": " + std::to_string(c.theta) + "}";
}

// Adds k, v [tokens, n_kv_heads, head_dim] and k_cache, v_cache [num_blocks, block_size, n_kv_heads,
// head_dim] to d, all random (the caches' values: older tokens').
inline void add_kv_and_caches(OpData& d, const RopeCacheCase& c, Rng& rng) {
    const std::vector<int64_t> kv_shape = {c.tokens, c.n_kv_heads, c.head_dim},
                               cache_shape = {cache_blocks(c), c.block_size, c.n_kv_heads, c.head_dim};
    for (const auto* shape : {&kv_shape, &kv_shape, &cache_shape, &cache_shape}) d.add(c.dtype, *shape, c.pad).fill_normal(rng);
}

// `cache` (flat) with row slots[t] replaced by row t of `rows` ([tokens, row] flat), for each slotted
// token: a cache's reference (or, given tolerances for `rows`, the cache's tolerance).
inline std::vector<double> cache_reference(std::vector<double> cache, const std::vector<double>& rows,
                                           const std::vector<int64_t>& slots, int64_t row) {
    for (size_t t = 0; t < slots.size(); ++t)
        if (slots[t] >= 0) std::copy_n(rows.begin() + int64_t(t) * row, row, cache.begin() + slots[t] * row);
    return cache;
}

// tensors: k, v, k_cache, v_cache; index: the slots. Exact.
inline OpCase paged_cache_case(const RopeCacheCase& c) {
    OpCase oc;
    oc.op = "paged_cache_write";
    oc.name = cache_case_name(c);
    oc.dtype = c.dtype;
    oc.params = cache_case_params(c);
    oc.bytes = 4.0 * double(c.tokens * c.n_kv_heads * c.head_dim) * double(dtype_size(c.dtype)) +
               double(c.tokens) * (c.wide ? 8 : 4);  // k, v read, written to the caches
    oc.make = [c](Rng& rng) {
        OpData d;
        const std::vector<int64_t> slots = random_slots(rng, c.tokens, cache_blocks(c) * c.block_size);
        add_kv_and_caches(d, c, rng);
        const int64_t row = c.n_kv_heads * c.head_dim;
        d.ref = {cache_reference(values(*d.tensors[2]), values(*d.tensors[0]), slots, row),
                 cache_reference(values(*d.tensors[3]), values(*d.tensors[1]), slots, row)};
        d.outputs = {2, 3};
        for (const auto& r : d.ref) d.tol.push_back(std::vector<double>(r.size(), 0.0));
        d.set_index(slots, c.wide);
        d.min_exact = 1.0;
        return d;
    };
    oc.run = [](const OpViews& v, void* stream) {
        paged_cache_write(v.t[2], v.t[3], v.t[0], v.t[1], v.index, stream);
        return std::string("paged_cache_write");
    };
    return oc;
}

// tensors: q, k, v, k_cache, v_cache; index: [positions..., slots...]. q and k within rope's
// tolerance, v unchanged, the caches' v rows exact and k rows within k's tolerance.
inline OpCase rope_cache_case(const RopeCacheCase& c) {
    OpCase oc;
    oc.op = "rope_qk_cache_write";
    oc.name = cache_case_name(c) + "_theta" + std::to_string(int64_t(c.theta));
    oc.dtype = c.dtype;
    oc.params = cache_case_params(c);
    const double q_n = double(c.tokens * c.n_heads() * c.head_dim), kv_n = double(c.tokens * c.n_kv_heads * c.head_dim);
    // q read and written; k read, written and cached; v read and cached; positions and slots.
    oc.bytes = (2 * q_n + 5 * kv_n) * double(dtype_size(c.dtype)) + 2.0 * double(c.tokens) * (c.wide ? 8 : 4);
    oc.flops = 3 * (q_n + kv_n);
    oc.make = [c](Rng& rng) {
        OpData d;
        HostTensor& q = d.add(c.dtype, {c.tokens, c.n_heads(), c.head_dim}, c.pad);
        q.fill_normal(rng);
        std::vector<int64_t> positions = random_positions(rng, c.tokens);
        const std::vector<int64_t> slots = random_slots(rng, c.tokens, cache_blocks(c) * c.block_size);
        add_kv_and_caches(d, c, rng);
        const HostTensor &k = *d.tensors[1], &v = *d.tensors[2];
        const int64_t row = c.n_kv_heads * c.head_dim;
        const std::vector<double> q_extra = rope_extra_tol(q, c.n_heads(), c.head_dim, positions, c.theta),
                                  k_extra = rope_extra_tol(k, c.n_kv_heads, c.head_dim, positions, c.theta);
        const std::vector<double> k_ref = rope_reference(k, c.n_kv_heads, c.head_dim, positions, c.theta);
        d.outputs = {0, 1, 2, 3, 4};
        d.ref = {rope_reference(q, c.n_heads(), c.head_dim, positions, c.theta), k_ref, values(v),
                 cache_reference(values(*d.tensors[3]), k_ref, slots, row),  // the rotated k reaches the cache
                 cache_reference(values(*d.tensors[4]), values(v), slots, row)};
        const std::vector<double> k_tol = ulp_tolerance(k_ref, c.dtype, 2.0, 0.0, &k_extra);
        // The caches: exact but for the k rows in their slots, which take k's tolerance.
        d.tol = {ulp_tolerance(d.ref[0], c.dtype, 2.0, 0.0, &q_extra), k_tol, std::vector<double>(d.ref[2].size(), 0.0),
                 cache_reference(std::vector<double>(d.ref[3].size(), 0.0), k_tol, slots, row),
                 std::vector<double>(d.ref[4].size(), 0.0)};
        positions.insert(positions.end(), slots.begin(), slots.end());
        d.set_index(std::move(positions), c.wide);
        d.min_exact = ROPE_MIN_EXACT;
        return d;
    };
    oc.run = [c](const OpViews& v, void* stream) {
        rope_qk_cache_write(v.t[0], v.t[1], v.t[2], index_part(v.index, 0, c.tokens), {c.theta, 0}, v.t[3], v.t[4],
                            index_part(v.index, c.tokens, c.tokens), stream);
        return std::string("rope_qk_cache_write");
    };
    return oc;
}

// The grid, then Qwen2.5-7B's attention (28 q heads, 4 KV heads, head_dim 128): a decode step of 8
// sequences and a 512-token prefill chunk.
inline std::vector<RopeCacheCase> cache_write_shapes(DType dt) {
    std::vector<RopeCacheCase> shapes = rope_cache_grid(dt);
    for (int64_t tokens : {8, 512}) shapes.push_back({tokens, 4, 7, 128, 16, dt, false, 0, 1000000.0});
    return shapes;
}

inline std::vector<OpCase> paged_cache_cases(DType dt) {
    std::vector<OpCase> cases;
    for (const RopeCacheCase& c : cache_write_shapes(dt)) cases.push_back(paged_cache_case(c));
    return cases;
}

inline std::vector<OpCase> rope_cache_cases(DType dt) {
    std::vector<OpCase> cases;
    for (const RopeCacheCase& c : cache_write_shapes(dt)) cases.push_back(rope_cache_case(c));
    return cases;
}

}  // namespace flashport::test
