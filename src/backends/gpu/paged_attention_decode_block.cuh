// What the paged decode split kernels share before and after their main loops: which sequence, KV
// head, query rows and slice of keys a block owns, each row's causal limit, where a row's query,
// output, partial and LSE live, and how the splits' partials are merged (decode_finish_split,
// decode_combine_row). paged_attention_decode.cuh (portable), paged_attention_decode_mma.cuh (NVIDIA
// tensor cores) and paged_attention_decode_mfma.cuh (AMD matrix cores) differ only in how they walk the keys.
//
// Grid of all three: (num_splits · row_chunks, n_kv_heads, batch). A KV head of sequence b serves
// rows = group · q_len query rows, row = qi · group + head-in-group (the heads of one GQA group × the
// query tokens), cut into row_chunks chunks of ROWS rows. Its keys are cut into num_splits slices of
// whole tiles, sized from the sequence's own length at run time, so one launch serves any lengths
// (graph capture) and short sequences waste no tiles.
//
// Merging in the split kernel (num_splits > 1, the default): the num_splits blocks of one (sequence,
// KV head, row chunk) group each store their normalised partial O and its LSE to the workspace, then
// count themselves in on the group's counter (split_counters, one uint32 per group at the workspace's
// end); the block that counts last merges the group's rows, exactly as the separate combine kernel
// does (decode_combine_row is that kernel's body), and sets the counter back to 0. Every split block
// counts in, including one whose slice of keys is empty, so the last one always sees num_splits - 1.
// Memory ordering (the CUDA threadFenceReduction pattern): every thread fences its partial stores
// (__threadfence) before the block's count (one atomicAdd, after a barrier); the last block fences
// again after seeing the count, before it reads the other blocks' partials. No block waits on another,
// so nothing depends on which blocks are resident.
#pragma once

#include "backends/gpu/attention_sequence.cuh"
#include "backends/gpu/paged_attention_decode.h"

namespace flashport::gpu {

// One split block's work: rows [r0, r0 + nr) of KV head kvh of sequence b, keys [kv_lo, kv_hi) of
// seq.kv_len (empty when seq.ok is false: a broken length reads nothing and the rows become NaN).
struct DecodeBlock {
    int split, chunk, kvh, b;
    int r0, nr;
    SequenceRows seq;
    int kv_lo, kv_hi;
};

// Sequence b's query tokens: rows row0 .. row0 + len of q's position axis (DecodeLayout's spans), or
// the dense q_len rows from 0.
struct DecodeQuerySpan {
    int64_t row0;
    int len;
};
__device__ __forceinline__ DecodeQuerySpan decode_query_span(const PagedAttentionDecodeArgs& a, int b) {
    if (a.q_lens) return {a.q_starts[b], a.q_lens[b]};
    return {0, a.q_len};
}

// ROWS: query rows per block; T: keys per tile, the granularity of a split.
template <int ROWS, int T>
__device__ __forceinline__ DecodeBlock decode_block(const PagedAttentionDecodeArgs& a) {
    DecodeBlock k;
    const int chunk = int(blockIdx.x) % a.row_chunks;
    k.split = int(blockIdx.x) / a.row_chunks;
    k.chunk = chunk;
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
    const DecodeQuerySpan span = decode_query_span(a, k.b);
    k.seq.q_len = span.len;
    k.seq.kv_len = bad ? 0 : len_raw;
    k.seq.q_row0 = span.row0;  // keys go through the block table
    k.seq.k_row0 = 0;
    k.seq.ok = !bad;
    // A varlen sequence shorter than q_len leaves its last chunks without rows: they read no keys.
    k.nr = max(0, min(k.nr, span.len * a.group - k.r0));
    const int len = k.nr > 0 ? k.seq.kv_len : 0;
    // num_splits equal slices of whole tiles, or (split_tokens, DecodeLayout) splits of a fixed length
    // while num_splits of them cover the sequence.
    const int per_split = max(((len + a.num_splits - 1) / a.num_splits + T - 1) / T * T, a.split_tokens);
    const int64_t lo64 = int64_t(k.split) * per_split;
    k.kv_lo = lo64 < len ? int(lo64) : len;
    k.kv_hi = min(len, k.kv_lo + per_split);
    return k;
}

// Block row r as (query token, head), and t, the token's row on q's position axis.
struct DecodeRow {
    int qi, h;
    int64_t t;
};
__device__ __forceinline__ DecodeRow decode_row(const PagedAttentionDecodeArgs& a, const DecodeBlock& k, int r) {
    const int row = k.r0 + r, qi = row / a.group;
    return {qi, k.kvh * a.group + row % a.group, k.seq.q_row0 + qi};
}

// Keys [0, limit) block row r may see: query token qi stands at position len - q_len + qi (the last
// q_len keys are the query tokens' own), so causal rows see up to and including that position.
__device__ __forceinline__ int decode_row_key_limit(const PagedAttentionDecodeArgs& a, const DecodeBlock& k, int r) {
    const int len = k.seq.kv_len, qi = (k.r0 + r) / a.group;
    return a.causal ? max(0, min(len, qi + len - k.seq.q_len + 1)) : len;
}

// K or V cache rows of KV head kvh: a page's slot s is at + page · stride[0] + s · stride[1].
__device__ __forceinline__ const uint16_t* decode_cache_head(const void* cache, const int64_t (&stride)[3], int kvh) {
    return static_cast<const uint16_t*>(cache) + int64_t(kvh) * stride[2];
}
// Sequence b's row of the block table, [max_blocks_per_seq] page ids.
__device__ __forceinline__ const int32_t* decode_table(const PagedAttentionDecodeArgs& a, int b) {
    return a.block_table + int64_t(b) * a.max_blocks_per_seq;
}

// Row (t, h) of q, out ([batch, q_len, n_heads, head_dim] views) and its lse slot ([batch, n_heads, q_len]).
__device__ __forceinline__ const uint16_t* decode_q_row(const PagedAttentionDecodeArgs& a, int b, DecodeRow row) {
    return static_cast<const uint16_t*>(a.q) + int64_t(b) * a.q_stride[0] + row.t * a.q_stride[1] +
           row.h * a.q_stride[2];
}
__device__ __forceinline__ uint16_t* decode_out_row(const PagedAttentionDecodeArgs& a, int b, DecodeRow row) {
    return static_cast<uint16_t*>(a.out) + b * a.o_stride[0] + row.t * a.o_stride[1] + row.h * a.o_stride[2];
}
__device__ __forceinline__ float* decode_lse_slot(const PagedAttentionDecodeArgs& a, int b, DecodeRow row) {
    return a.lse + b * a.lse_stride[0] + row.h * a.lse_stride[1] + row.t * a.lse_stride[2];
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

// ---- Merging the splits -------------------------------------------------------------------------
// Shared memory of decode_combine_row for NT threads at head dim D: SG groups of splits summed in
// parallel, each thread owning a float4 column of one group. The split kernels alias it onto shared
// memory their epilogue no longer reads (a static_assert in each checks that it fits).
template <int D, int NT>
struct DecodeCombineShared {
    static constexpr int DC = D / 4;    // float4 columns
    static constexpr int SG = NT / DC;  // split groups summed in parallel
    static_assert(D % 4 == 0 && NT % DC == 0, "head_dim, block size");
    float w[PAGED_MAX_SPLITS];  // each split's weight 2^(lse_s - M)
    alignas(16) float red[SG * D];
    // block_reduce's one value per warp, sized per thread: the layout must not depend on the warp
    // width, which differs between HIP's host and device passes (tools/check_warp_size.py).
    float scratch[NT];
    int last;  // decode_finish_split: this block counted last
};

// Merges the num_splits partials of workspace row `row` ((b · q_len + qi) · n_heads + h) into out
// and lse: O = Σ_s 2^(lse_s − M) O_s / Σ_s 2^(lse_s − M), LSE = M + log2 Σ_s 2^(lse_s − M) (as a
// natural log). An empty split (lse −inf, O zeros) weighs 0; a NaN LSE makes the row NaN; no key in
// any split gives zeros and −inf. Every thread of an NT-thread block calls it (block reductions).
template <DType DT, int D, int NT>
__device__ __forceinline__ void decode_combine_row(const PagedAttentionDecodeArgs& a, int64_t row,
                                                   DecodeCombineShared<D, NT>& sh) {
    using Sh = DecodeCombineShared<D, NT>;
    constexpr int DC = Sh::DC, SG = Sh::SG;
    static_assert(NT % WARP_SIZE == 0, "whole warps");
    const int tid = int(threadIdx.x), S = a.num_splits;
    const float* ls = a.ws_lse + row * S;

    float mx = -INFINITY, nan_seen = 0.0f;
    for (int s = tid; s < S; s += NT) {
        const float x = load_from_other_blocks(ls + s);
        if (x != x) nan_seen = 1.0f;
        else mx = fmaxf(mx, x);
    }
    mx = block_reduce(mx, sh.scratch, true);  // its first barrier: the previous row's reads of sh are done
    nan_seen = block_reduce(nan_seen, sh.scratch, true);
    const float m_use = mx == -INFINITY ? 0.0f : mx;
    float wl = 0.0f;
    for (int s = tid; s < S; s += NT) {
        const float x = load_from_other_blocks(ls + s);
        const float w = x != x ? 0.0f : exp2f(x - m_use);  // an empty split (-inf) weighs 0
        sh.w[s] = w;
        wl += w;
    }
    const float wsum = block_reduce(wl, sh.scratch, false);  // its barriers also publish sh.w

    const int c4 = tid % DC, sg = tid / DC;
    const float* po = a.ws_o + row * S * D + c4 * 4;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    // No test of w: an empty split's partial is finite zeros (weight 0), and a NaN partial makes the
    // whole row NaN anyway (nan_row), so the loads can all be issued before the FMAs.
#pragma unroll 4
    for (int s = sg; s < S; s += SG) {
        const float w = sh.w[s];
        const float4 x = load_from_other_blocks4(po + int64_t(s) * D);
        acc.x = fmaf(w, x.x, acc.x), acc.y = fmaf(w, x.y, acc.y);
        acc.z = fmaf(w, x.z, acc.z), acc.w = fmaf(w, x.w, acc.w);
    }
    *reinterpret_cast<float4*>(sh.red + sg * D + c4 * 4) = acc;
    __syncthreads();

    const int h = int(row % a.n_heads), qi = int(row / a.n_heads % a.q_len), b = int(row / a.n_heads / a.q_len);
    const DecodeRow dr{qi, h, decode_query_span(a, b).row0 + qi};
    const bool nan_row = nan_seen > 0.0f;
    uint16_t* out = decode_out_row(a, b, dr);
    for (int d = tid; d < D; d += NT) {
        float v = 0.0f;
#pragma unroll
        for (int g = 0; g < SG; ++g) v += sh.red[g * D + d];
        out[d] = from_float<DT>(nan_row ? NAN : wsum > 0.0f ? v / wsum : 0.0f);
    }
    if (tid == 0 && a.lse)
        *decode_lse_slot(a, b, dr) = nan_row ? NAN : wsum > 0.0f ? (mx + log2f(wsum)) * LN2 : -INFINITY;
}

// Called by every thread of an NT-thread split block after it stored its partials (the epilogue's
// last shared-memory reads may still be in flight: the first barrier below orders them before `sh`,
// which aliases that memory at `scratch`, is written). With num_splits > 1 and split_counters set,
// counts the block in on its group's counter and, in the group's last block, merges the group's rows
// and resets the counter. The counter is reset by the block that read num_splits − 1, after which no block of this
// launch touches it, so the next launch (a graph replay, the next layer) finds it at 0: the op's own
// counters need no memset between launches (run_paged_attention_decode; a workspace's do).
template <DType DT, int D, int NT>
__device__ __forceinline__ void decode_finish_split(const PagedAttentionDecodeArgs& a, const DecodeBlock& k,
                                                    void* scratch) {
    if (a.num_splits == 1 || a.split_counters == nullptr) return;  // uniform over the block
    DecodeCombineShared<D, NT>& sh = *static_cast<DecodeCombineShared<D, NT>*>(scratch);
    __threadfence();  // this thread's partial stores are visible GPU-wide before the block counts in
    __syncthreads();  // ... for every thread of the block
    if (threadIdx.x == 0) {
        unsigned* counter = a.split_counters + (int64_t(k.b) * a.n_kv_heads + k.kvh) * a.row_chunks + k.chunk;
        const bool last = atomicAdd(counter, 1u) == unsigned(a.num_splits - 1);
        if (last) {
            __threadfence();            // acquire: the counts seen were made after the partials' stores
            atomicExch(counter, 0u);    // every split has counted: ready for the next launch
        }
        sh.last = last;
    }
    __syncthreads();  // ... and the barrier carries that order to the block's other threads
    if (!sh.last) return;  // uniform: read after the barrier
    __threadfence();       // each reading thread's own acquire, before it loads the other splits' partials
    for (int r = 0; r < k.nr; ++r) decode_combine_row<DT, D, NT>(a, decode_ws_row(a, k.b, decode_row(a, k, r)), sh);
}

}  // namespace flashport::gpu
