// Paged-KV decode attention on the GPU as src/ops/paged_attention.cpp sees it (compiled only in CUDA and
// HIP builds), plus the argument block and launchers shared by paged_attention_decode.cu and the kernel
// instances in paged_attention_decode_{f16,bf16}.cu.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/gpu/head_dim_switch.h"
#include "flashport/dtype.h"
#include "flashport/paged_attention.h"

namespace flashport::gpu {

// The GPU limits both paged kernels (decode and prefill) share: q's GPU exists, fp16 or bf16, and
// q, out and the caches have contiguous, 16-byte aligned rows.
void check_paged_gpu_views(const TensorView& out, const TensorView& q, const PagedKVCache& kv);

// Checks the GPU limits of a request whose generic checks passed (dtype, head dim, alignment, grid
// limits), names the kernel, picks num_splits when params.num_splits is 0, and sets the workspace size.
void plan_paged_attention_decode(PagedAttentionPlan& plan, const TensorView& out, const TensorView& q,
                                 const PagedKVCache& kv, const TensorView* lse);

// As plan_paged_attention_decode, for sequences of uneven lengths whose keys number total_keys in all
// (the longest plan.params.max_seq_len): splits of a fixed length instead of a fixed count, sized so
// that all the sequences' splits fill the SMs' resident slots once (at least MIN_TILES_PER_SPLIT tiles
// each); the longest sequence then takes num_splits of them and a short one few. Names the kernel
// "...splits<S>x<tokens>" and returns the split length for DecodeLayout::split_tokens.
int plan_paged_attention_decode_by_length(PagedAttentionPlan& plan, const TensorView& out, const TensorView& q,
                                          const PagedKVCache& kv, const TensorView* lse, int64_t total_keys);

// Where the paged decode's defaults do not hold (varlen split-KV, attention_split_kv.cu):
// - each sequence's query tokens, when they are not the dense [batch, q_len] rows of q, out and lse:
//   varlen packs them on one token axis with q_len the longest. Sequence b's q_lens[b] <= q_len tokens
//   are rows q_starts[b] .. + q_lens[b] of that axis (views with batch stride 0); its rows past
//   q_lens[b] are neither computed nor written. Device arrays of [batch] int32, already checked (a
//   broken sequence has q_lens[b] = 0). Null: the dense rows.
// - split_tokens > 0: splits of that many keys (a multiple of 64, every kernel's tile) from each
//   sequence's start, so that a long sequence takes more of the num_splits than a short one
//   (plan_paged_attention_decode_by_length); a sequence longer than num_splits of them is cut into
//   num_splits equal slices instead, so every key is covered whatever the plan assumed.
struct DecodeLayout {
    const int32_t* q_starts = nullptr;
    const int32_t* q_lens = nullptr;
    int split_tokens = 0;
};

// Launches the plan on `stream`: the split kernel the plan names (mma, MFMA or portable), which with
// num_splits > 1 also merges the splits (its last block per group does, counting in on the op's own
// counters for the stream, or on the workspace's after a memset); or, with DecodeCombine::SEPARATE,
// the split kernel then the combine kernel. Nothing synchronises; the only allocation is a stream's
// 16 KB of counters, the first time it needs them. The caller has checked the workspace size.
void run_paged_attention_decode(const PagedAttentionPlan& plan, const TensorView& out, const TensorView& q,
                                const PagedKVCache& kv, const TensorView* lse, void* workspace, void* stream,
                                const DecodeLayout* layout = nullptr);

// Which split kernel serves paged decode. MMA, the default, asks for the device's matrix units: tensor
// cores on NVIDIA sm_80+ (the mma kernel), AMD matrix cores where they cover the dtype (the MFMA kernel:
// gfx90a/940, gfx908 fp16), else the portable kernel. PORTABLE: FP32 FMAs, every target. MFMA: the
// MFMA kernel; an error on a HIP device without it, the portable kernel in a CUDA build (as the flash
// variants). FLASHPORT_GPU_DECODE=portable or =mfma in the environment sets it at start. Process-wide;
// for tests and benchmarks (as set_flash_variant).
enum class DecodeVariant : unsigned char { MMA, PORTABLE, MFMA };
void set_decode_variant(DecodeVariant variant);
DecodeVariant decode_variant();
// Where the splits' partials are merged (num_splits > 1). SEPARATE, the default: by a second, combine
// kernel, one block per query row. FUSED: in the split kernel, by the last block of each group to
// finish; the groups count in on a 16 KB counter buffer the op keeps per (GPU, stream), which every
// launch leaves at 0, so no memset node breaks a captured step's chain of dependent launches. Slower
// in the engine's decode all the same: one block merges a whole GQA group's rows (docs/perf.md).
// FLASHPORT_DECODE_COMBINE=fused in the environment sets it at start. Process-wide; the plan records
// it in its kernel name (".combine" suffix for SEPARATE), so a plan and its launch agree. Both need
// the same workspace.
enum class DecodeCombine : unsigned char { FUSED, SEPARATE };
void set_decode_combine(DecodeCombine combine);
DecodeCombine decode_combine();
// Tests: with false, FUSED counts in on the workspace's counters after a memset, as it does when a
// request needs more counters than the op's buffer holds (decode_owned_counters_size) or when the
// stream is capturing before its buffer exists. decode_owned_counters: the stream's buffer (made
// if missing), null while the op's counters are off.
void set_decode_owned_counters(bool on);
const unsigned* decode_owned_counters(void* stream);
size_t decode_owned_counters_size();
// The workspace (num_splits > 1): ws_o, then ws_lse, then the split counters, each 256-byte aligned.
// Where the counters start, for a plan with `rows` = batch · q_len · n_heads query rows (tests).
size_t paged_attention_decode_counters_offset(int64_t rows, int num_splits, int64_t head_dim);

// Whether the mma kernel would serve head_dim on the current device with the MMA variant selected:
// a CUDA build, sm_80+, and enough shared memory for two pipeline stages (d256 needs ~140 KB, which
// sm_86/sm_89 lack). False in HIP builds.
bool paged_attention_decode_mma_available(int head_dim);
// Whether the MFMA split kernel is built (HIP) and the current device's matrix cores cover `dtype`.
bool paged_attention_decode_mfma_available(DType dtype);

// The split kernels' shapes, here so that the host's choices (splits, shared memory) and the kernels
// read the same numbers.
// Query rows (query token x head of one GQA group) one block serves; more rows take more blocks.
constexpr int DECODE_ROWS = 8;       // portable kernel
constexpr int DECODE_MMA_ROWS = 16;  // mma kernel: one m16 tile
// The mma kernel's block: 4 NVIDIA warps (mma.sync's fragments span 32 lanes); spelled out, as all
// launch geometry is (common.cuh), and checked against WARP_SIZE in the kernel.
constexpr int DECODE_MMA_WARPS = 4;
constexpr int DECODE_MMA_THREADS = 128;
// Keys of one mma step of one warp (the k extent of P V); the mma kernel's warps take interleaved
// steps, so its splits are whole multiples of DECODE_MMA_WARPS steps (64 keys).
constexpr int DECODE_MMA_STEP = 16;
// Keys one tile of a split kernel covers: a split is a whole number of tiles.
constexpr int DECODE_MMA_TILE_TOKENS = DECODE_MMA_WARPS * DECODE_MMA_STEP;
constexpr int decode_portable_tile_tokens(int head_dim) {
    return head_dim <= 128 ? 64 : 32;
}
// The mma kernel's shared memory: rows padded by 16 bytes (the 8 rows of each ldmatrix hit distinct
// banks); Q's DECODE_MMA_ROWS rows, then per warp `stages` steps of K and V.
constexpr int decode_mma_pitch(int head_dim) {
    return head_dim + 8;
}
constexpr int decode_mma_smem_bytes(int head_dim, int stages) {
    return (DECODE_MMA_ROWS + DECODE_MMA_WARPS * stages * 2 * DECODE_MMA_STEP) * decode_mma_pitch(head_dim) * 2;
}

// The kernels' argument block. Strides are in elements: q/out (batch, position, head), lse (batch,
// head, position), caches (block, slot, head).
struct PagedAttentionDecodeArgs {
    const void* q;
    void* out;
    float* lse;  // null when not requested
    const void* k_cache;
    const void* v_cache;
    const int32_t* block_table;
    const int32_t* seq_lens;
    const int32_t* q_starts;  // DecodeLayout (varlen), else null: sequence b's queries are rows b · q_len ..
    const int32_t* q_lens;
    int split_tokens;         // DecodeLayout: > 0, splits of this many keys; 0, num_splits equal slices
    float* ws_o;    // [batch·q_len·n_heads][num_splits][head_dim] partial outputs (num_splits > 1)
    float* ws_lse;  // [batch·q_len·n_heads][num_splits] partial LSEs, log2 domain
    // [batch][n_kv_heads][row_chunks] arrival counters (num_splits > 1): the split block that counts
    // last merges its group's partials (paged_attention_decode_block.cuh). Null: the separate combine
    // kernel merges them (DecodeCombine::SEPARATE).
    unsigned* split_counters;
    int64_t q_stride[3], o_stride[3], lse_stride[3], k_stride[3], v_stride[3];
    int batch, q_len, n_heads, n_kv_heads, group;  // group = n_heads / n_kv_heads
    int rows, row_chunks;                          // rows = group · q_len per KV head, in chunks of DECODE_ROWS
    int num_blocks, block_size, max_blocks_per_seq;
    int num_splits;
    int kv_stages;     // mma kernel: K/V pipeline stages per warp (set by its launcher)
    float scale_log2;  // softmax scale · log2(e): the kernels exponentiate with exp2
    bool causal;
};

// Per dtype (F16, BF16); head_dim one of DecodeHeadDims (head_dim_switch.h). The portable split kernel and the
// separate combine kernel are instantiated in paged_attention_decode_{f16,bf16}.cu (every build), the mma split kernel
// in paged_attention_decode_mma_{f16,bf16}.cu (CUDA builds only; paged_attention_decode_mma_available says when it may
// be called), the MFMA one in paged_attention_decode_mfma_{f16,bf16}.cu (HIP builds: FLASHPORT_GPU_MFMA_KERNELS;
// paged_attention_decode_mfma_available says when).
template <DType DT>
void paged_attention_decode_split_portable(const PagedAttentionDecodeArgs& args, int head_dim, void* stream);
template <DType DT>
void paged_attention_decode_split_mma(const PagedAttentionDecodeArgs& args, int head_dim, void* stream);
template <DType DT>
void paged_attention_decode_split_mfma(const PagedAttentionDecodeArgs& args, int head_dim, void* stream);
template <DType DT>
void paged_attention_decode_combine(const PagedAttentionDecodeArgs& args, int head_dim, void* stream);
// Resident blocks per SM of each split kernel (occupancy), for choosing num_splits; the mma one
// returns 0 where it cannot run (too little shared memory).
template <DType DT>
int paged_attention_decode_portable_blocks_per_sm(int head_dim);
template <DType DT>
int paged_attention_decode_mma_blocks_per_sm(int head_dim);
template <DType DT>
int paged_attention_decode_mfma_blocks_per_sm(int head_dim);

}  // namespace flashport::gpu
