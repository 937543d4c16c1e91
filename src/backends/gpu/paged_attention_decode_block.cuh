// What the two paged decode split kernels share before and after their main loops: which sequence,
// KV head, query rows and slice of keys a block owns, each row's causal limit, and where a row's query,
// output, partial and LSE live. paged_attention_decode.cuh (portable) and paged_attention_decode_mma.cuh
// (NVIDIA tensor cores) differ only in how they walk the keys.
//
// Grid of both: (num_splits · row_chunks, n_kv_heads, batch). A KV head of sequence b serves
// rows = group · q_len query rows, row = qi · group + head-in-group (the heads of one GQA group × the
// query tokens), cut into row_chunks chunks of ROWS rows. Its keys are cut into num_splits slices of
// whole tiles, sized from the sequence's own length at run time, so one launch serves any lengths
// (graph capture) and short sequences waste no tiles.
#pragma once

#include "backends/gpu/attention_sequence.cuh"
#include "backends/gpu/paged_attention_decode.h"

namespace flashport::gpu {

// One split block's work: rows [r0, r0 + nr) of KV head kvh of sequence b, keys [kv_lo, kv_hi) of
// seq.kv_len (empty when seq.ok is false: a broken length reads nothing and the rows become NaN).
struct DecodeBlock {
    int split, kvh, b;
    int r0, nr;
    SequenceRows seq;
    int kv_lo, kv_hi;
};

// ROWS: query rows per block; T: keys per tile, the granularity of a split.
template <int ROWS, int T>
__device__ __forceinline__ DecodeBlock decode_block(const PagedAttentionDecodeArgs& a) {
    DecodeBlock k;
    const int chunk = int(blockIdx.x) % a.row_chunks;
    k.split = int(blockIdx.x) / a.row_chunks;
    k.kvh = int(blockIdx.y);
    k.b = int(blockIdx.z);
    k.r0 = chunk * ROWS;
    k.nr = min(ROWS, a.rows - k.r0);
    // Sequence b: q_len query tokens, seq_lens[b] keys. A length outside [0, the block table's
    // capacity] is broken (ok false, no keys read, rows NaN): the rule of sequence_rows' paged layout
    // (attention_sequence.cuh), spelled out here because behind a call ptxas allocates the portable
    // kernel differently (d128, at its 255-register limit, then spills).
    const int len_raw = a.seq_lens[k.b];
    int bad = len_raw < 0 || int64_t(len_raw) > int64_t(a.max_blocks_per_seq) * a.block_size;
    k.seq.q_len = a.q_len;
    k.seq.kv_len = bad ? 0 : len_raw;
    k.seq.q_row0 = k.seq.k_row0 = 0;  // query rows are dense; keys go through the block table
    k.seq.ok = !bad;
    const int len = k.seq.kv_len;
    const int per_split = ((len + a.num_splits - 1) / a.num_splits + T - 1) / T * T;
    const int64_t lo64 = int64_t(k.split) * per_split;
    k.kv_lo = lo64 < len ? int(lo64) : len;
    k.kv_hi = min(len, k.kv_lo + per_split);
    return k;
}

// Block row r as (query token, head).
struct DecodeRow {
    int qi, h;
};
__device__ __forceinline__ DecodeRow decode_row(const PagedAttentionDecodeArgs& a, const DecodeBlock& k, int r) {
    const int row = k.r0 + r;
    return {row / a.group, k.kvh * a.group + row % a.group};
}

// Keys [0, limit) block row r may see: query token qi stands at position len - q_len + qi (the last
// q_len keys are the query tokens' own), so causal rows see up to and including that position.
__device__ __forceinline__ int decode_row_key_limit(const PagedAttentionDecodeArgs& a, const DecodeBlock& k, int r) {
    const int len = k.seq.kv_len, qi = (k.r0 + r) / a.group;
    return a.causal ? max(0, min(len, qi + len - a.q_len + 1)) : len;
}

// K or V cache rows of KV head kvh: a page's slot s is at + page · stride[0] + s · stride[1].
__device__ __forceinline__ const uint16_t* decode_cache_head(const void* cache, const int64_t (&stride)[3], int kvh) {
    return static_cast<const uint16_t*>(cache) + int64_t(kvh) * stride[2];
}
// Sequence b's row of the block table, [max_blocks_per_seq] page ids.
__device__ __forceinline__ const int32_t* decode_table(const PagedAttentionDecodeArgs& a, int b) {
    return a.block_table + int64_t(b) * a.max_blocks_per_seq;
}

// Row (qi, h) of q, out ([batch, q_len, n_heads, head_dim] views) and its lse slot ([batch, n_heads, q_len]).
__device__ __forceinline__ const uint16_t* decode_q_row(const PagedAttentionDecodeArgs& a, int b, DecodeRow row) {
    return static_cast<const uint16_t*>(a.q) + int64_t(b) * a.q_stride[0] + row.qi * a.q_stride[1] +
           row.h * a.q_stride[2];
}
__device__ __forceinline__ uint16_t* decode_out_row(const PagedAttentionDecodeArgs& a, int b, DecodeRow row) {
    return static_cast<uint16_t*>(a.out) + b * a.o_stride[0] + row.qi * a.o_stride[1] + row.h * a.o_stride[2];
}
__device__ __forceinline__ float* decode_lse_slot(const PagedAttentionDecodeArgs& a, int b, DecodeRow row) {
    return a.lse + b * a.lse_stride[0] + row.h * a.lse_stride[1] + row.qi * a.lse_stride[2];
}

// The row's index in the split workspace: ws_o [rows][num_splits][D], ws_lse [rows][num_splits].
// Kernels compute it once per row and pass it to the two stores below.
__device__ __forceinline__ int64_t decode_ws_row(const PagedAttentionDecodeArgs& a, int b, DecodeRow row) {
    return (int64_t(b) * a.q_len + row.qi) * a.n_heads + row.h;
}
// Element d of this split's partial O of workspace row ws_row (num_splits > 1).
template <int D>
__device__ __forceinline__ float* decode_partial(const PagedAttentionDecodeArgs& a, const DecodeBlock& k,
                                                 int64_t ws_row, int d) {
    return a.ws_o + (ws_row * a.num_splits + k.split) * D + d;
}
// The row's LSE (log2 domain) from this split: the workspace with several splits, else lse (natural
// log) when requested.
__device__ __forceinline__ void decode_store_lse(const PagedAttentionDecodeArgs& a, const DecodeBlock& k, DecodeRow row,
                                                 int64_t ws_row, float lse2) {
    if (a.num_splits > 1)
        a.ws_lse[ws_row * a.num_splits + k.split] = lse2;
    else if (a.lse)
        *decode_lse_slot(a, k.b, row) = lse2 * LN2;
}

}  // namespace flashport::gpu
