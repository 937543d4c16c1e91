// The case grid of rope_qk_cache_write's tests, shared by the CPU test (tests/ops/test_rope_cache.cpp:
// the fused op against rope, rope, paged_cache_write on the CPU) and the GPU test
// (tests/gpu/test_rope_cache_gpu.cpp: the fused kernel against the unfused GPU ops and the CPU), so
// both run the same cases.
//
// A case's inputs: random q, k, v whose head rows may be padded (strided heads and tokens), caches
// poisoned with NaN (slots nobody writes must stay NaN), shuffled slots spread over more blocks than
// the tokens need, every 9th token a padding slot (-1), positions up to 2^24 - 1.
#pragma once

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "flashport/ops.h"
#include "ops/ops_test_util.h"

namespace flashport::test {

struct RopeCacheCase {
    int64_t tokens, n_kv_heads, gqa, head_dim, block_size;
    DType dtype;
    bool wide = false;  // int64 positions and slots (else int32)
    int64_t pad = 0;    // spare elements after each head row of q, k, v and the caches
    double theta = 10000.0;

    int64_t n_heads() const { return n_kv_heads * gqa; }
    std::string name() const {
        return std::to_string(tokens) + "tok_" + std::to_string(n_heads()) + "x" + std::to_string(n_kv_heads) + "h_d" +
               std::to_string(head_dim) + "_bs" + std::to_string(block_size) + "_" + short_name(dtype) +
               (wide ? "_i64" : "_i32") + "_pad" + std::to_string(pad);
    }
};

// tokens 1, 7, 97 × head_dim 16, 64, 128 × GQA 1, 2, 7 × block size 16, 32, for one dtype; KV heads,
// index width, padding and theta cycle along.
inline std::vector<RopeCacheCase> rope_cache_grid(DType dtype) {
    std::vector<RopeCacheCase> cases;
    int n = 0;
    for (int64_t tokens : {1, 7, 97})
        for (int64_t head_dim : {16, 64, 128})
            for (int64_t gqa : {1, 2, 7})
                for (int64_t block_size : {16, 32}) {
                    RopeCacheCase c{tokens, n % 3 == 0 ? 2 : n % 3 == 1 ? 1 : 4, gqa, head_dim, block_size, dtype};
                    c.wide = n % 2 == 1;
                    c.pad = n % 4 == 1 ? 3 : n % 4 == 3 ? 8 : 0;
                    c.theta = n % 5 < 3 ? 1000000.0 : 10000.0;
                    ++n;
                    cases.push_back(c);
                }
    return cases;
}

// A HostTensor with the same shape, padding and bytes (poison included).
inline std::unique_ptr<HostTensor> clone(const HostTensor& t) {
    std::vector<int64_t> shape(t.view.shape.begin(), t.view.shape.begin() + t.view.ndim);
    auto c = std::make_unique<HostTensor>(t.view.dtype, shape, t.pad);
    std::memcpy(c->bytes.data(), t.bytes.data(), t.bytes.size());
    return c;
}

inline bool same_bytes(const HostTensor& a, const HostTensor& b) {
    return a.bytes.size() == b.bytes.size() && std::memcmp(a.bytes.data(), b.bytes.data(), a.bytes.size()) == 0;
}

struct RopeCacheInputs {
    std::unique_ptr<HostTensor> q, k, v, k_cache, v_cache;
    std::vector<int64_t> positions, slots;
    std::vector<int32_t> positions32, slots32;
    RopeParams rope;

    RopeCacheInputs(const RopeCacheCase& c, Rng& rng) : rope{c.theta, 0} {
        const int64_t num_blocks = (c.tokens + c.block_size - 1) / c.block_size + 2;
        q = std::make_unique<HostTensor>(c.dtype, std::vector<int64_t>{c.tokens, c.n_heads(), c.head_dim}, c.pad);
        k = std::make_unique<HostTensor>(c.dtype, std::vector<int64_t>{c.tokens, c.n_kv_heads, c.head_dim}, c.pad);
        v = std::make_unique<HostTensor>(c.dtype, std::vector<int64_t>{c.tokens, c.n_kv_heads, c.head_dim}, c.pad);
        const std::vector<int64_t> cache_shape = {num_blocks, c.block_size, c.n_kv_heads, c.head_dim};
        k_cache = std::make_unique<HostTensor>(c.dtype, cache_shape, c.pad);
        v_cache = std::make_unique<HostTensor>(c.dtype, cache_shape, c.pad);
        q->fill_normal(rng);
        k->fill_normal(rng);
        v->fill_normal(rng);
        std::vector<int64_t> all(size_t(num_blocks * c.block_size));
        std::iota(all.begin(), all.end(), 0);
        for (size_t i = all.size() - 1; i > 0; --i) std::swap(all[i], all[size_t(rng.below(int64_t(i) + 1))]);
        for (int64_t t = 0; t < c.tokens; ++t) {
            slots.push_back(t % 9 == 8 ? -1 : all[size_t(t)]);
            positions.push_back(t % 5 == 4 ? rng.below(1 << 24) : rng.below(40000));
        }
        positions32.assign(positions.begin(), positions.end());
        slots32.assign(slots.begin(), slots.end());
    }
    // Host views of the positions and slots, int64 or int32.
    IndexView position_view(bool wide) const {
        return wide ? IndexView(std::span<const int64_t>(positions)) : IndexView(std::span<const int32_t>(positions32));
    }
    IndexView slot_view(bool wide) const {
        return wide ? IndexView(std::span<const int64_t>(slots)) : IndexView(std::span<const int32_t>(slots32));
    }
};

}  // namespace flashport::test
