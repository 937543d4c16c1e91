// Paged-KV decode attention on the GPU as src/ops/paged_attention.cpp sees it (compiled only in CUDA and
// HIP builds), plus the argument block and launchers shared by attention_decode.cu and the kernel
// instances in attention_decode_{f16,bf16}.cu.
#pragma once

#include <cstddef>
#include <cstdint>

#include "flashport/dtype.h"
#include "flashport/paged_attention.h"

namespace flashport::gpu {

// Checks the GPU limits of a request whose generic checks passed (dtype, head dim, alignment, grid
// limits), names the kernel, picks num_splits when params.num_splits is 0, and sets the workspace size.
void plan_paged_decode(PagedAttentionPlan& plan, const TensorView& out, const TensorView& q, const PagedKVCache& kv,
                       const TensorView* lse);

// Launches the plan on `stream`: the split kernel, then (num_splits > 1) the combine kernel. Neither
// allocates nor synchronises. The caller has checked the workspace size.
void run_paged_decode(const PagedAttentionPlan& plan, const TensorView& out, const TensorView& q,
                      const PagedKVCache& kv, const TensorView* lse, void* workspace, void* stream);

// Head dims the decode kernels are instantiated for.
constexpr int DECODE_HEAD_DIMS[] = {64, 128, 256};
// Query rows (query token x head of one GQA group) one block serves; more rows take more blocks.
constexpr int DECODE_ROWS = 8;

// The kernels' argument block. Strides are in elements: q/out (batch, position, head), lse (batch,
// head, position), caches (block, slot, head).
struct PagedDecodeArgs {
    const void* q;
    void* out;
    float* lse;  // null when not requested
    const void* k_cache;
    const void* v_cache;
    const int32_t* block_table;
    const int32_t* seq_lens;
    float* ws_o;    // [batch·q_len·n_heads][num_splits][head_dim] partial outputs (num_splits > 1)
    float* ws_lse;  // [batch·q_len·n_heads][num_splits] partial LSEs, log2 domain
    int64_t q_stride[3], o_stride[3], lse_stride[3], k_stride[3], v_stride[3];
    int batch, q_len, n_heads, n_kv_heads, group;  // group = n_heads / n_kv_heads
    int rows, row_chunks;                          // rows = group · q_len per KV head, in chunks of DECODE_ROWS
    int num_blocks, block_size, max_blocks_per_seq;
    int num_splits;
    float scale_log2;  // softmax scale · log2(e): the kernels exponentiate with exp2
    bool causal;
};

// Per dtype (F16, BF16), instantiated in attention_decode_{f16,bf16}.cu.
template <DType DT>
void paged_decode(const PagedDecodeArgs& args, int head_dim, void* stream);
// Resident blocks per SM of the split kernel (occupancy), for choosing num_splits.
template <DType DT>
int paged_decode_blocks_per_sm(int head_dim);
// Keys one tile of the split kernel covers; a split is a whole number of tiles.
int paged_decode_tile_tokens(int head_dim);

}  // namespace flashport::gpu
