// Where one sequence's rows live, as a kernel block sees them: the dense, varlen and paged layouts of
// AttentionArgs (attention_common.cuh) reduced to a query-row origin, two lengths and a key addresser,
// so the flash kernels' tile loops are the same for all three. The paged decode kernels describe their
// sequences with the same SequenceRows (paged_attention_decode_block.cuh: decode_block).
#pragma once

#include "backends/gpu/attention_common.cuh"

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
// sequence's metadata is broken: block x == 0 of each head then writes NaN over the sequence's rows.
template <DType DT>
__device__ __forceinline__ bool enter_sequence(const AttentionArgs& a, int b, int h, int head_dim, SequenceRows& s) {
    s = sequence_rows(a, b);
    if (s.ok) return true;
    if (blockIdx.x == 0) poison_sequence<DT>(a, b, h, head_dim);
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
// LAST_FIRST the tiles in reverse order. False when it has nothing to compute: the sequence's
// metadata is broken (enter_sequence poisons its rows) or the tile starts past the end of a varlen
// sequence shorter than the grid's bound.
// A broken sequence is poisoned over the call's head dim, not the kernel's D, which may round it up:
// the columns past it belong to the next head, or past the last head to the next row or the buffer's end.
template <DType DT, int BR, bool LAST_FIRST>
__device__ __forceinline__ bool enter_flash_block(const AttentionArgs& a, FlashBlock& k) {
    k.b = int(blockIdx.z);
    k.h = int(blockIdx.y);
    k.kvh = k.h / (a.n_heads / a.n_kv_heads);
    if (!enter_sequence<DT>(a, k.b, k.h, a.head_dim, k.seq)) return false;
    k.i0 = (LAST_FIRST ? int(gridDim.x - 1 - blockIdx.x) : int(blockIdx.x)) * BR;
    if (k.i0 >= k.seq.q_len) return false;
    k.rows = min(BR, k.seq.q_len - k.i0);
    return true;
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
