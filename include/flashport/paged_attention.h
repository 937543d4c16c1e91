// Attention of new query tokens against a paged KV cache: the decode step of an LLM server (a few
// tokens per sequence), and prefill of a prompt chunk or chat turn against the history already cached.
//
// The cache is a pool of fixed-size blocks shared by every sequence (vLLM's PagedAttention layout):
//   k_cache, v_cache  [num_blocks, block_size, n_kv_heads, head_dim]
//   block_table       int32 [batch, max_blocks_per_seq], row-major: entry (b, i) is the cache block that
//                     holds tokens [i·block_size, (i+1)·block_size) of sequence b
//   seq_lens          int32 [batch]: the tokens sequence b has in the cache, the new ones included
// Queries and results (the dense attention API's order, flashport/attention.h):
//   q    [batch, q_len, n_heads, head_dim]   the newest q_len >= 1 tokens of each sequence (their K and V
//                                             are already in the cache)
//   out  like q (same dtype);  lse  fp32 [batch, n_heads, q_len], optional (natural log)
// Query i of sequence b stands at position seq_lens[b] - q_len + i. With `causal` it sees the keys at
// positions <= its own: the dense API's bottom-right rule with kv_len = seq_lens[b]. A row that sees no
// key (seq_lens[b] = 0, or seq_lens[b] < q_len) outputs zeros and an LSE of -inf.
//
// Rules:
//   - block_size is a multiple of 16 (16, 32, 48, ...): the GPU kernel reads a page in 16-token steps.
//   - Only the first ceil(seq_lens[b] / block_size) entries of a block_table row are read; the rest
//     may hold anything (e.g. -1). Tokens past seq_lens[b] in the last block are never read.
//   - block_table and seq_lens live on the caches' device. The call never reads them on the host
//     when the caches are on a GPU (that would synchronise); there an out-of-range block id
//     (< 0 or >= num_blocks) or a seq_len outside [0, max_blocks_per_seq · block_size] is caught in
//     the kernel, and the rows of that sequence (all its heads) become NaN, so the error cannot pass
//     unnoticed; the other sequences are unaffected. On the CPU the same mistakes throw.
//   - Every view has a contiguous innermost dimension (head_dim; q_len for lse); other strides are free.
//   - GPU: fp16 or bf16; head_dim 40, 64, 80, 96, 128, 160 or 256; rows and strides 16-byte aligned.
//     CPU: fp32 too, any head_dim up to 256.
//
// On the CPU, up to PAGED_DECODE_MAX_Q_LEN query tokens read the keys and values in their pages, each
// sequence's pages sliced over the threads and merged (the slices are the CPU's own: num_splits stays 1);
// longer queries gather each sequence's pages and run the dense flash kernel.
// Two GPU kernels serve it. Up to PAGED_DECODE_MAX_Q_LEN query tokens with head_dim 64, 128 or 256 go to
// the split-KV decode kernel (FlashDecoding): each sequence's keys are cut into num_splits slices
// processed in parallel, and the last slice of each group to finish merges the slices with their LSEs
// (one kernel). Longer queries (and the other head dims) go to the flash prefill kernel, which reads K
// and V through the block table; its query tiles fill the GPU, so it runs one split and needs no
// workspace. The partial results, and the counters that tell a slice it is the last (the call zeroes
// them, so the workspace's contents may be anything), live in a caller-supplied workspace
// (paged_attention_workspace_bytes), so the call neither allocates nor synchronises and can be captured
// in a CUDA/HIP graph. To capture one graph for many steps, fix params.num_splits (or
// params.max_seq_len): the launch shape then depends only on batch, q_len and heads, while seq_lens and
// block_table change in device memory between replays.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "flashport/tensor.h"

namespace flashport {

constexpr int64_t PAGED_DECODE_MAX_Q_LEN = 8;  // the most query tokens the GPU decode kernel serves
constexpr int64_t PAGED_BLOCK_SIZE_STEP = 16;   // block_size must be a positive multiple of this
constexpr int PAGED_MAX_SPLITS = 256;           // upper bound of num_splits

// A view of a paged KV cache. Non-owning, like TensorView.
struct PagedKVCache {
    TensorView k_cache;                   // [num_blocks, block_size, n_kv_heads, head_dim]
    TensorView v_cache;                   // same shape and dtype as k_cache (strides may differ)
    const int32_t* block_table = nullptr; // [batch, max_blocks_per_seq], contiguous rows
    int64_t max_blocks_per_seq = 0;
    const int32_t* seq_lens = nullptr;    // [batch]
};

struct PagedAttentionParams {
    float scale = 0.0f;        // 0 means 1/sqrt(head_dim)
    bool causal = true;        // bottom-right aligned within each sequence (see above)
    int num_splits = 0;        // GPU split-KV slices per sequence: 0 picks from the SM count and the length
                               // bound below; 1..PAGED_MAX_SPLITS forces a count (tests, graph capture)
    int64_t max_seq_len = 0;   // an upper bound on seq_lens, used only to pick num_splits;
                               // 0 means the block table's capacity, max_blocks_per_seq · block_size
};

// The kernel a plan runs: paged_attention() dispatches on it. The GPU has two variants of the op,
// decode (the split-KV kernel, up to PAGED_DECODE_MAX_Q_LEN query tokens) and prefill (the flash
// kernels reading K/V through the block table, the one attention's planner picks for the dtype).
enum class PagedAttentionKernel : uint8_t {
    CPU_DECODE,            // up to PAGED_DECODE_MAX_Q_LEN query tokens: keys and values read in their pages
    CPU_GATHER,            // longer queries: each sequence's blocks gathered, then the dense CPU flash kernel
    GPU_DECODE_PORTABLE,   // split-KV decode (FlashDecoding) and its combine, FP32 FMAs: CUDA and HIP
    GPU_DECODE_MMA,        // the same on tensor cores: CUDA, sm_80 and newer
    GPU_DECODE_MFMA,       // the same on AMD matrix cores (CDNA; HIP builds, emulated at wave64 in tests)
    GPU_PREFILL_PORTABLE,  // the flash prefill kernel on paged K/V, FP32 FMAs: CUDA and HIP
    GPU_PREFILL_MMA,       // the same on tensor cores
    GPU_PREFILL_MFMA,      // the same on AMD matrix cores (CDNA; HIP builds, emulated at wave64 in tests)
    GPU_PREFILL_DOT2,      // the same on v_dot2_f32_f16 (fp16 on gfx906/gfx1030; HIP builds, emulated in tests)
    GPU_PREFILL_WGMMA,     // the same on Hopper's warpgroup MMA (sm_90a objects, compute capability 9.0)
};

// What will run, from plan_paged_attention: the one place that both validates a request and picks
// the kernel, like plan_attention.
struct PagedAttentionPlan {
    int64_t batch = 0, q_len = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
    int64_t num_blocks = 0, block_size = 0, max_blocks_per_seq = 0;
    PagedAttentionParams params;  // resolved: scale set, num_splits >= 1 (1 on the CPU)
    Device device;
    PagedAttentionKernel route = PagedAttentionKernel::CPU_GATHER;
    std::string kernel;  // route's name with its specifics, e.g. "gpu.paged_attention.decode.mma.d128.splits64",
                         // "gpu.paged_attention.prefill.mma.d128", "cpu.paged_attention.gather+cpu.flash.avx512"
    size_t workspace_bytes = 0;   // device workspace the call needs (0 with one split, and on the CPU)
};

// Validates the request and picks the kernel and split count. Throws flashport::Error naming the broken
// limit. Reads no device memory.
PagedAttentionPlan plan_paged_attention(const TensorView& out, const TensorView& q, const PagedKVCache& kv,
                                        const TensorView* lse, const PagedAttentionParams& params = {});

// Bytes of workspace plan_paged_attention would ask for with these arguments.
size_t paged_attention_workspace_bytes(const TensorView& out, const TensorView& q, const PagedKVCache& kv,
                                       const TensorView* lse, const PagedAttentionParams& params = {});

// Plans and runs. `workspace` is device memory on q's device, 16-byte aligned, of at least
// `workspace_bytes` >= the plan's need (null and 0 are fine when the plan needs none); a smaller one is
// an error. `stream` is the GPU stream (cudaStream_t / hipStream_t; ignored on the CPU). On the GPU the
// call is asynchronous.
PagedAttentionPlan paged_attention(const TensorView& out, const TensorView& q, const PagedKVCache& kv,
                                   const TensorView* lse, const PagedAttentionParams& params, void* workspace,
                                   size_t workspace_bytes, void* stream = nullptr);

}  // namespace flashport
