// Where one sequence's rows live, as a kernel block sees them: the dense, varlen and paged layouts of
// AttentionArgs (attention_common.cuh) reduced to a query-row origin, two lengths and a key addresser,
// so the flash kernels' tile loops are the same for all three. The paged decode kernels describe their
// sequences with the same SequenceRows (paged_attention_decode_block.cuh: decode_block).
#pragma once

#include <cstdlib>
#include <cstring>

#include "backends/gpu/attention_common.cuh"
#include "flashport/error.h"

namespace flashport::gpu {

// Sequence b's lengths and where its query rows start. `ok` is false when device-side metadata breaks
// a rule (offsets out of order or past the packed tensors, a length above the grid's bound, a paged
// length above the table's capacity): the kernels then write NaN over the sequence's rows instead of
// results, so the mistake cannot pass as output.
struct SequenceRows {
    int q_len, kv_len;
    int64_t q_row0;  // packed row of query 0 (varlen), else 0
    int64_t k_row0;  // packed row of key 0 (varlen), else 0
    bool ok;
};

__device__ __forceinline__ SequenceRows sequence_rows(const AttentionArgs& a, int b) {
    SequenceRows s{a.q_len, a.kv_len, 0, 0, true};
    if (a.cu_q) {
        const int64_t q0 = a.cu_q[b], q1 = a.cu_q[b + 1], k0 = a.cu_k[b], k1 = a.cu_k[b + 1];
        s.ok = q0 >= 0 && q0 <= q1 && q1 <= a.total_q && q1 - q0 <= a.q_len && k0 >= 0 && k0 <= k1 && k1 <= a.total_k;
        s.q_row0 = q0;
        s.k_row0 = k0;
        s.q_len = s.ok ? int(q1 - q0) : 0;
        s.kv_len = s.ok ? int(k1 - k0) : 0;
    }
    if (a.block_table) {
        const int64_t len = a.seq_lens_k[b];
        const bool fits = len >= 0 && len <= int64_t(a.max_blocks) * a.block_size;
        s.ok = s.ok && fits;
        s.kv_len = fits ? int(len) : 0;
    }
    return s;
}

// Rows [lo, hi) of the packed or batched query axis that sequence b claims, clipped to the tensors;
// what a broken sequence poisons.
__device__ __forceinline__ void claimed_rows(const AttentionArgs& a, int b, int64_t& lo, int64_t& hi) {
    if (a.cu_q) {
        lo = max(int64_t(a.cu_q[b]), int64_t(0));
        hi = min(int64_t(a.cu_q[b + 1]), a.total_q);
    } else {
        lo = 0;
        hi = a.q_len;
    }
}

// Writes NaN over every row (all head_dim elements, and the LSE) of sequence b, head h: called by one
// block per (sequence, head) when sequence_rows says the metadata is broken.
template <DType DT>
__device__ void poison_sequence(const AttentionArgs& a, int b, int h, int head_dim) {
    int64_t lo = 0, hi = 0;
    claimed_rows(a, b, lo, hi);
    uint16_t* out = static_cast<uint16_t*>(a.out) + b * a.o_stride[0] + h * a.o_stride[2];
    const uint16_t nan = from_float<DT>(__int_as_float(0x7fc00000));
    for (int64_t e = threadIdx.x; e < (hi - lo) * head_dim; e += blockDim.x) {
        const int64_t i = lo + e / head_dim;
        out[i * a.o_stride[1] + e % head_dim] = nan;
        if (a.lse && e % head_dim == 0)
            a.lse[b * a.lse_stride[0] + h * a.lse_stride[1] + i * a.lse_stride[2]] = __int_as_float(0x7fc00000);
    }
}

// Sequence b's rows for a block of head h. False when the block has nothing to compute because the
// sequence's metadata is broken: the head's first tile then writes NaN over the sequence's rows.
template <DType DT>
__device__ __forceinline__ bool enter_sequence(const AttentionArgs& a, int b, int h, int head_dim, SequenceRows& s,
                                               bool first_tile) {
    s = sequence_rows(a, b);
    if (s.ok) return true;
    if (first_tile) poison_sequence<DT>(a, b, h, head_dim);
    return false;
}

// Key (or value) rows of sequence b, KV head kvh, as a base pointer plus the argument block: `data` and
// `stride` are args.k / k_stride or args.v / v_stride. The strides, the table and its limits are read
// from the kernel's parameter block at each use (constant memory, no registers), so the dense path
// pays only for its base pointer.
__device__ __forceinline__ const uint16_t* kv_base(const AttentionArgs& a, const void* data,
                                                   const int64_t (&stride)[3], int b, int kvh, const SequenceRows& s) {
    const uint16_t* head = static_cast<const uint16_t*>(data) + kvh * stride[2];
    return a.block_table ? head : head + b * stride[0] + s.k_row0 * stride[1];
}

// Row j through the block table (paged layout only), from a kv_base pointer; null when the row's block
// id is out of range (the caller zero-fills and reports it). Positions fit in 32 bits (the host checks
// the table's capacity), so the division by block_size is a 32-bit one. Kernels branch between this
// and plain dense addressing once per tile, not per row: a per-row test on the layout cost the dense
// path ~20% on head dim 128.
__device__ __forceinline__ const uint16_t* paged_row(const AttentionArgs& a, const uint16_t* base,
                                                     const int64_t (&stride)[3], int b, int j) {
    const int blk = a.block_table[int64_t(b) * a.max_blocks + j / a.block_size];
    if (blk < 0 || blk >= a.num_blocks) return nullptr;
    return base + int64_t(blk) * stride[0] + int64_t(j % a.block_size) * stride[1];
}

// Query row 0 of sequence b, head h (query and output rows are always dense).
__device__ __forceinline__ const uint16_t* q_base(const AttentionArgs& a, int b, int h, const SequenceRows& s) {
    return static_cast<const uint16_t*>(a.q) + b * a.q_stride[0] + s.q_row0 * a.q_stride[1] + h * a.q_stride[2];
}

// What one block of a flash kernel (portable or mma) owns: query rows [i0, i0 + rows) of sequence b,
// head h (KV head kvh). The two kernels differ in how they walk the keys, not in this.
struct FlashBlock {
    int b, h, kvh;
    SequenceRows seq;
    int i0, rows;  // rows: min(BR, q_len - i0)
};

// The block's query tile (BR rows) in a grid of (tiles, n_heads, batch): tile blockIdx.x, or with
// LAST_FIRST the tiles in reverse order, longest first under a causal mask (the last tile of a
// sequence sees every key, the first about BR of them). Blocks start in the grid's linear order (x
// fastest), so reversing x alone orders each (sequence, head)'s tiles but leaves the light tiles of
// head 0 ahead of head 27's heavy ones. With a.heads_first the linear index is read rank by rank over
// every (sequence, head): all heaviest tiles first, then the next rank, so the last wave holds the
// lightest tiles (a 2048 x 2048 causal prefill of 28 heads is 448 blocks, 3.4 waves of one block an SM
// on an H100). OVER_HEADS compiles that choice in: the wgmma kernel's TMA instances (168 registers
// with or without it). The others leave it out, because the remapped head, sequence and tile then live
// in registers instead of being read again from blockIdx: with it ptxas spilled 128 -> 212 and 176 ->
// 216 bytes in the mma kernel's d128 and d160 instances, 20 -> 40 bytes in the all-thread wgmma d128.
// False when it has nothing to compute: the sequence's metadata is broken
// (enter_sequence poisons its rows) or the tile starts past the end of a varlen sequence shorter than
// the grid's bound.
// A broken sequence is poisoned over the call's head dim, not the kernel's D, which may round it up:
// the columns past it belong to the next head, or past the last head to the next row or the buffer's end.
template <DType DT, int BR, bool LAST_FIRST, bool OVER_HEADS = false>
__device__ __forceinline__ bool enter_flash_block(const AttentionArgs& a, FlashBlock& k) {
    static_assert(LAST_FIRST || !OVER_HEADS, "the order over heads is a longest-first order");
    int tile = int(blockIdx.x);
    k.h = int(blockIdx.y);
    k.b = int(blockIdx.z);
    if constexpr (LAST_FIRST) {
        if (OVER_HEADS && a.heads_first) {
            const unsigned heads_seqs = gridDim.y * gridDim.z;
            const unsigned linear = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
            tile = int(linear / heads_seqs);
            k.h = int(linear % heads_seqs % gridDim.y);
            k.b = int(linear % heads_seqs / gridDim.y);
        }
        tile = int(gridDim.x) - 1 - tile;
    }
    k.kvh = k.h / (a.n_heads / a.n_kv_heads);
    if (!enter_sequence<DT>(a, k.b, k.h, a.head_dim, k.seq, tile == 0)) return false;
    k.i0 = tile * BR;
    if (k.i0 >= k.seq.q_len) return false;
    k.rows = min(BR, k.seq.q_len - k.i0);
    return true;
}

// Host: whether an OVER_HEADS kernel should order its causal tiles over every head (enter_flash_block).
// Only while every head's K and V stay in half the L2: rank by rank, the blocks running together read
// all heads' keys at once, where in the head-by-head order they share one head's. The engine's
// prefill fits (Qwen2.5-7B, 4096 keys: 4 KV heads x 4096 x 128 x 2 x 2 B = 8 MiB, against 50 MB on an
// H100); a batch of long sequences of many heads (8 x 16 heads x 4096 keys of 64: 128 MiB) keeps the
// head-by-head order, which reads each head's keys from L2 for all its tiles.
// FLASHPORT_GPU_TILE_ORDER=per-head keeps the head-by-head order everywhere (the A/B of
// docs/perf.md); auto (the default) chooses as above.
inline bool longest_first_over_heads(const AttentionArgs& a, int64_t l2_bytes) {
    static const bool per_head = [] {
        const char* env = std::getenv("FLASHPORT_GPU_TILE_ORDER");
        if (!env || !*env || std::strcmp(env, "auto") == 0) return false;
        FP_CHECK(std::strcmp(env, "per-head") == 0, "FLASHPORT_GPU_TILE_ORDER must be auto or per-head, got ", env);
        return true;
    }();
    if (per_head || !a.causal || a.window_left >= 0) return false;
    const int64_t keys = a.block_table ? int64_t(a.batch) * a.max_blocks * a.block_size
                         : a.cu_k      ? a.total_k
                                       : int64_t(a.batch) * a.kv_len;
    return keys * a.n_kv_heads * a.head_dim * 4 <= l2_bytes / 2;  // K and V, 16-bit
}

// Where the block's sequence starts: query row 0 of head h (q_base), and K and V of its KV head
// (kv_base). Taken once enter_flash_block has returned true: computed on its early-return paths, the
// pointers cost the mma kernel registers and spills.
struct FlashBases {
    const uint16_t *q, *k, *v;
};
__device__ __forceinline__ FlashBases flash_bases(const AttentionArgs& a, const FlashBlock& k) {
    return {q_base(a, k.b, k.h, k.seq), kv_base(a, a.k, a.k_stride, k.b, k.kvh, k.seq),
            kv_base(a, a.v, a.v_stride, k.b, k.kvh, k.seq)};
}

}  // namespace flashport::gpu
