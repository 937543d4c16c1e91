// What every GPU attention kernel shares: the masking rule on the device and the parameter block that
// launchers fill from tensor views.
#pragma once

#include <cstdint>

#include "backends/gpu/common.cuh"

namespace flashport::gpu {

// The keys [lo, hi) that query row i sees: bottom-right aligned causal plus an optional left window.
// This is cpu::visible_keys (backends/cpu/attention_cpu.h) on the device; the GPU tests compare
// every row against the CPU reference, so the two cannot drift apart unnoticed.
struct DeviceKeyRange {
    int64_t lo, hi;
};
__host__ __device__ __forceinline__ DeviceKeyRange device_visible_keys(int64_t i, int64_t q_len, int64_t kv_len,
                                                                       bool causal, int64_t window_left) {
    const int64_t diag = i + (kv_len - q_len);
    int64_t hi = causal ? (diag + 1 < kv_len ? diag + 1 : kv_len) : kv_len;
    int64_t lo = window_left >= 0 ? (diag - window_left > 0 ? diag - window_left : 0) : 0;
    if (hi < 0) hi = 0;
    return {lo, hi};
}

// Strides are in elements: [0] batch, [1] sequence position, [2] head (for lse: batch, head, row).
// Three ways to find a sequence's rows, all served by the same kernels:
//   dense    q [batch, q_len, ...], k/v [batch, kv_len, ...]: row i of sequence b at b·stride[0] + i·stride[1];
//   varlen   cu_q / cu_k set: packed sequences (FlashAttention's varlen API), sequence b's rows start at
//            cu_q[b] (keys at cu_k[b]); stride[0] is 0 and q_len bounds every sequence's length (the grid);
//   paged    block_table set: keys and values of sequence b live in a paged cache, key j in block
//            block_table[b·max_blocks + j / block_size], slot j % block_size; stride[0] is the block
//            stride and seq_lens_k[b] the sequence's key count.
// The kernels check what the host cannot see without synchronising (offsets, lengths, block ids in
// device memory); a sequence that breaks a rule gets NaN rows (attention_sequence.cuh).
struct AttentionArgs {
    const void* q;
    const void* k;
    const void* v;
    void* out;
    float* lse;  // null when not requested
    int64_t q_stride[3], k_stride[3], v_stride[3], o_stride[3], lse_stride[3];
    int batch, q_len, kv_len, n_heads, n_kv_heads;
    // The head dim (a multiple of 8). A kernel's D may round it up (dispatch_head_dim_up): the columns
    // past it are zero-filled on load, so they add nothing to q·k, and never stored.
    int head_dim;
    float scale;       // softmax scale
    float scale_log2;  // scale * log2(e): kernels exponentiate with exp2
    bool causal;
    // The grid's order of causal query tiles (the wgmma kernel's TMA instances, which take them
    // longest-first): true, rank by rank over every (sequence, head); false, each (sequence, head)'s
    // tiles in turn. Set by longest_first_over_heads (attention_sequence.cuh) at the wgmma launch.
    bool heads_first;
    int64_t window_left;  // -1: no window
    // varlen: [batch + 1] row offsets; total_q / total_k are the packed tensors' row counts
    const int32_t* cu_q;
    const int32_t* cu_k;
    int64_t total_q, total_k;
    // paged K/V: [batch, max_blocks] block ids and [batch] key counts
    const int32_t* block_table;
    const int32_t* seq_lens_k;
    int max_blocks, block_size, num_blocks;
};
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;

// The end of an online softmax for one row, from its running max m (log2 units) and sum l. l = 0: the
// row saw no key (zeros, LSE -inf). A NaN score makes l NaN, and the row must come out NaN, as
// PyTorch's softmax makes it; a test `l > 0 ? ... : <empty row>` would hide it as zeros.
__device__ __forceinline__ float softmax_inv_sum(float l) {
    return l == 0.0f ? 0.0f : 1.0f / l;
}
__device__ __forceinline__ float softmax_lse2(float m, float l) {
    return l == 0.0f ? -INFINITY : m + log2f(l);
}

}  // namespace flashport::gpu
