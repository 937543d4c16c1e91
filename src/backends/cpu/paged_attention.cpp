// Paged-KV attention on the CPU for longer queries (prefill of a chunk against the cached history;
// decode has its own path, paged_attention_decode.cpp): each sequence's keys and values are gathered
// through the block table into a dense [1, seq_len, n_kv_heads, head_dim] copy, then the dense kernels
// run on it, so the paged path shares the dense path's masking rule and numerics (the dense CPU flash
// kernel).
// Block ids and seq_lens are host memory here, so they are checked and a bad one throws.
#include "backends/cpu/paged_attention.h"

#include <cstring>

#include "backends/cpu/attention_cpu.h"
#include "flashport/attention.h"
#include "flashport/error.h"
#include "flashport/memory.h"

namespace flashport::cpu {

int64_t checked_seq_len(const PagedAttentionPlan& p, const PagedKVCache& kv, int64_t b) {
    const int64_t len = kv.seq_lens[b], capacity = p.max_blocks_per_seq * p.block_size;
    FP_CHECK(len >= 0 && len <= capacity, "paged_attention: seq_lens[", b, "] = ", len,
             " is outside [0, max_blocks_per_seq · block_size = ", capacity, "]");
    return len;
}

void check_block_ids(const PagedAttentionPlan& p, const PagedKVCache& kv, int64_t b, int64_t pages) {
    const int32_t* table = kv.block_table + b * p.max_blocks_per_seq;
    for (int64_t blk = 0; blk < pages; ++blk)
        FP_CHECK(table[blk] >= 0 && table[blk] < p.num_blocks, "paged_attention: block_table[", b, "][", blk,
                 "] = ", table[blk], " is outside [0, num_blocks = ", p.num_blocks, ")");
}

namespace {

// Sequence b's first `len` tokens of one cache, as a dense contiguous [1, len, n_kv_heads, head_dim]
// view over `buf`. With len 0 the view points at the cache (the dense kernels read nothing then).
TensorView gather(const PagedAttentionPlan& p, const PagedKVCache& kv, const TensorView& cache, int64_t b,
                  int64_t len, Buffer& buf) {
    const size_t es = dtype_size(cache.dtype);
    TensorView dense(cache.data, cache.dtype, {1, len, p.n_kv_heads, p.head_dim});
    if (len == 0) return dense;
    buf = Buffer(size_t(len * p.n_kv_heads * p.head_dim) * es);
    dense.data = buf.data();
    const int32_t* table = kv.block_table + b * p.max_blocks_per_seq;
    check_block_ids(p, kv, b, (len + p.block_size - 1) / p.block_size);
    for (int64_t j = 0; j < len; ++j) {
        const int64_t page = table[j / p.block_size];
        for (int64_t h = 0; h < p.n_kv_heads; ++h)  // head_dim is contiguous (plan_paged_attention checks)
            std::memcpy(dense.at(0, j, h, 0), cache.at(page, j % p.block_size, h, 0), size_t(p.head_dim) * es);
    }
    return dense;
}

// The view of batch entry b of a [batch, ...] view, as a batch of one.
TensorView batch_entry(const TensorView& t, int64_t b) {
    TensorView e = t;
    e.data = t.at(b);
    e.shape[0] = 1;
    return e;
}

}  // namespace

void paged_attention(const PagedAttentionPlan& plan, const TensorView& out, const TensorView& q,
                     const PagedKVCache& kv, const TensorView* lse) {
    AttentionParams params;
    params.scale = plan.params.scale;
    params.causal = plan.params.causal;
    params.impl = AttentionImpl::FLASH;
    for (int64_t b = 0; b < plan.batch; ++b) {
        const int64_t len = checked_seq_len(plan, kv, b);
        Buffer kbuf, vbuf;  // per sequence: peak extra memory is one sequence's K and V
        const TensorView k = gather(plan, kv, kv.k_cache, b, len, kbuf);
        const TensorView v = gather(plan, kv, kv.v_cache, b, len, vbuf);
        const TensorView lse_b = lse ? batch_entry(*lse, b) : TensorView{};
        attention(batch_entry(out, b), batch_entry(q, b), k, v, lse ? &lse_b : nullptr, params);
    }
}

void paged_cache_write(const TensorView& k_cache, const TensorView& v_cache, const TensorView& k, const TensorView& v,
                       const IndexView& slots) {
    const int64_t block_size = k_cache.dim(1);
    const int64_t heads = k.dim(1), row_bytes = k.dim(2) * int64_t(dtype_size(k.dtype));
    for (int64_t t = 0; t < k.dim(0); ++t) {
        const int64_t slot = slots[t];  // the op has checked that none is past the cache
        if (slot < 0) continue;         // padding
        for (int64_t h = 0; h < heads; ++h) {
            std::memcpy(k_cache.at(slot / block_size, slot % block_size, h), k.at(t, h), size_t(row_bytes));
            std::memcpy(v_cache.at(slot / block_size, slot % block_size, h), v.at(t, h), size_t(row_bytes));
        }
    }
}

}  // namespace flashport::cpu
