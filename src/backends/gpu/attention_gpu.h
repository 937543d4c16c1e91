// The GPU attention backend as ops/attention.cpp sees it. Compiled only in CUDA and HIP builds
// (FLASHPORT_GPU defined).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "backends/gpu/gpu_arch.h"
#include "flashport/attention.h"

namespace flashport::gpu {

// The GPU limits every implementation shares, for a request that passed the generic checks of
// ops/attention.cpp: q's GPU exists and holds every view, head_dim is contiguous, sizes fit the
// kernels' 32-bit indices and the grid. Throws flashport::Error naming the broken limit.
void check_attention_views(const AttentionPlan& plan, const TensorView& out, const TensorView& q, const TensorView& k,
                           const TensorView& v, const TensorView* lse);

// Why the flash kernels cannot serve the request: "" when they can, else the limit it breaks (dtype,
// head dim, 16-byte rows) as a whole error message. The planner decides with it, for `auto` too.
std::string flash_limit(const AttentionPlan& plan, const TensorView& out, const TensorView& q, const TensorView& k,
                        const TensorView& v);

// The flash kernel the current device runs for `dtype` and `head_dim` under the selected variant
// (set_flash_variant, FLASHPORT_GPU_FLASH); select_flash_kernel, below, has the rules.
AttentionKernel flash_kernel(DType dtype, int64_t head_dim);

// The name of a GPU plan's route, e.g. "gpu.flash.mma.d128", "gpu.naive.blas".
std::string attention_kernel_name(const AttentionPlan& plan, DType dtype);

// Runs a plan produced by plan_attention on `stream` (a cudaStream_t / hipStream_t; null is the
// default stream). Asynchronous: flash neither allocates nor synchronises, so it can be captured in
// a graph. Naive needs a score workspace; this overload takes it from the tracked allocator (counted,
// and freed when the call returns, which waits for the stream).
void run_attention(const AttentionPlan& plan, const TensorView& out, const TensorView& q, const TensorView& k,
                   const TensorView& v, const TensorView* lse, void* stream);

// Extensions beyond the dispatcher's interface, for callers that manage memory and for tests.

// Bytes of device workspace the plan needs for inputs of `dtype` (0 for flash).
size_t attention_workspace_bytes(const AttentionPlan& plan, DType dtype);
// As run_attention, with a caller-supplied workspace of at least attention_workspace_bytes(plan).
void run_attention_with_workspace(const AttentionPlan& plan, const TensorView& out, const TensorView& q,
                                  const TensorView& k, const TensorView& v, const TensorView* lse, void* workspace,
                                  void* stream);

// The flash kernels with a filled argument block (dense, varlen or paged layout, attention_common.cuh):
// the tensor-core kernel if `mma` (a plan's route, from flash_kernel()), else the portable one. dtype is
// F16 or BF16 and head_dim one of FlashHeadDims (head_dim_switch.h); the callers have checked both.
struct AttentionArgs;
void launch_flash(const AttentionArgs& args, DType dtype, int head_dim, bool mma, void* stream);
// An argument block with what the views and the softmax parameters give: the data of q, k, v (dense
// views or the paged caches), out and lse (null when not asked for), their outer strides and scale,
// causal, window_left. The sizes and the layout's metadata are the caller's to fill in.
AttentionArgs attention_args(const TensorView& out, const TensorView& q, const TensorView& k, const TensorView& v,
                             const TensorView* lse, float scale, bool causal, int64_t window_left);
// A flash route's variant in kernel names: "mma", "mfma", "dot2" or "portable" (gpu.flash.<it>.d128).
const char* flash_route_name(AttentionKernel route);
// A flash plan's route (flash_kernel()) launched: the tensor-core, matrix-core, dot2 or portable kernel.
void launch_flash_route(const AttentionArgs& args, DType dtype, int head_dim, AttentionKernel route, void* stream);

// Split-KV (attention_split_kv.cu): a flash plan with at most PAGED_DECODE_MAX_Q_LEN query rows per
// sequence, a head dim of the paged decode kernel (64, 128, 256), no window and at least
// SPLIT_KV_MIN_KV_LEN keys, under the default flash variant (a forced variant means that flash kernel),
// runs the paged decode kernels over the dense K and V: sequence b is cache block b (the block's stride
// is K's batch stride), its kv_len keys in one block of kv_len rounded up to 16 slots. Nothing is
// copied; the [batch] block table and lengths and the splits' partials live in a stream-ordered
// allocation made and freed on the call's stream.
constexpr int64_t SPLIT_KV_MIN_KV_LEN = 256;
// Whether split-KV may serve at all: on by default; FLASHPORT_GPU_SPLIT_KV=0 in the environment turns it
// off at start. Process-wide, for benchmarks that time the flash kernel on the same shapes (the rule's
// measurement) and for tests.
void set_split_kv(bool on);
bool split_kv_enabled();

// The wgmma kernel's TMA route (attention_flash_wgmma.cu): calls with a positive scale whose tensors TMA can
// describe (dense, varlen, paged) run the TMA producer instance (1.4-2.1x the all-thread instance in the
// tile sweep; its test grid and compute-sanitizer runs passed on an H100, h200.sh tma-check, 2026-12-05).
// FLASHPORT_GPU_WGMMA_TMA=1 or 0 sets it at start, set_wgmma_tma for tests and benchmarks. Process-wide;
// nothing changes off compute capability 9.0.
constexpr bool WGMMA_TMA_BY_DEFAULT = true;
void set_wgmma_tma(bool on);
bool wgmma_tma_enabled();
bool split_kv_serves(const AttentionPlan& plan, const TensorView& out, const TensorView& q, const TensorView& k,
                     const TensorView& v);
// Sets the plan's route and kernel name ("gpu.flash.split_kv.mma.d128.splits66").
void plan_split_kv(AttentionPlan& plan, const TensorView& out, const TensorView& q, const TensorView& k,
                   const TensorView& v, const TensorView* lse);
void run_split_kv(const AttentionPlan& plan, const TensorView& out, const TensorView& q, const TensorView& k,
                  const TensorView& v, const TensorView* lse, void* stream);

// Varlen attention (flashport/attention_varlen.h) on the GPU. `plan` comes from plan_attention on the
// packed tensors seen as batch-1 4-D views (out, q, k, v, lse as given here); seqs' offsets live on the
// GPU and are checked by the kernel.
struct VarlenSeqsView {
    const int32_t* cu_q;
    const int32_t* cu_k;
    int64_t batch, max_seqlen_q;
    int64_t max_seqlen_k;  // 0: unknown
};
void run_attention_varlen(const AttentionPlan& plan, const TensorView& out, const TensorView& q, const TensorView& k,
                          const TensorView& v, const TensorView* lse, const VarlenSeqsView& seqs, void* stream);
// The flash kernels' argument block for a varlen call (the views as run_attention_varlen takes them).
AttentionArgs varlen_args(const AttentionPlan& plan, const TensorView& out, const TensorView& q, const TensorView& k,
                          const TensorView& v, const TensorView* lse, const VarlenSeqsView& seqs);

// Varlen split-KV (attention_split_kv.cu): split-KV's rules with the varlen plan's shape (batch
// sequences, q_len = max_seqlen_q <= PAGED_DECODE_MAX_Q_LEN, kv_len = total_k), where total_k gives
// every sequence SPLIT_KV_MIN_KV_LEN keys on average. The decode kernels read the packed K and V as a
// cache whose block i starts at packed row i, so sequence b is one block, cu_k[b]; its queries are
// found per sequence (DecodeLayout). A small kernel turns the offsets into that table, checking
// them as the flash kernel does (a broken sequence's rows are NaN). Nothing is copied; the table and
// the partials live in a stream-ordered allocation on the call's stream.
bool split_kv_serves_varlen(const AttentionPlan& plan, const TensorView& k, const TensorView& v);
// max_seqlen_k (0: unknown, then total_k) bounds the split count, as max_seq_len does for paged decode.
void plan_split_kv_varlen(AttentionPlan& plan, const TensorView& out, const TensorView& q, const TensorView& k,
                          const TensorView& v, const TensorView* lse, int64_t max_seqlen_k);
void run_split_kv_varlen(const AttentionPlan& plan, const TensorView& out, const TensorView& q, const TensorView& k,
                         const TensorView& v, const TensorView* lse, const VarlenSeqsView& seqs, void* stream);

// Which flash kernel serves fp16/bf16, process-wide (for tests and benchmarks; FLASHPORT_GPU_FLASH=portable,
// =mfma or =dot2 in the environment sets it at start):
//   AUTO (default): the device's fastest kernel for the dtype: WGMMA on compute capability 9.0 where
//     wgmma_beats_mma (the 128 tile; the 40, 64 and 256 tiles with the TMA route), else MMA (tensor
//     cores) on NVIDIA sm_80+, MFMA on an AMD chip whose matrix cores cover the dtype (gpu_arch.h:
//     gfx90a/940 both, gfx908 fp16), DOT2 for fp16 on an AMD chip with v_dot2_f32_f16 and no MFMA for it
//     (gfx906, gfx1030), else PORTABLE;
//   MMA: the tensor-core kernel where the device has it, else PORTABLE;
//   PORTABLE: the FMA kernel every target runs;
//   MFMA: the matrix-core kernel; an error on a HIP device without the instructions (gfx906, RDNA), the
//     portable kernel in a build without it (CUDA);
//   DOT2: the fp16 dot2 kernel; an error for bf16 or on a HIP device without v_dot2_f32_f16, the
//     portable kernel in a build without it (CUDA).
// The MFMA and dot2 kernels have run only under the HIP CPU Runtime's emulation (which reports gfx90a);
// no AMD chip.
enum class FlashVariant : unsigned char { MMA, PORTABLE, MFMA, AUTO, DOT2, WGMMA };
// What the choice reads of a device: a plain value, so the rules are testable for every arch.
struct FlashTarget {
    bool nvidia_mma = false;  // CUDA build and sm_80+
    bool mfma_built = false;  // mfma_kernels_built(): the AMD-only kernels (MFMA and dot2) are in the build
    MatrixCores matrix_cores = MatrixCores::NONE;
    bool dot2_f16 = false;  // dot2_f16_of_arch()
    bool sm90_wgmma = false;  // sm90_available(): the wgmma kernel's sm_90a machine code runs here
    bool wgmma_tma = false;   // wgmma_tma_enabled(): its TMA producer instance serves dense/varlen/paged calls
    std::string_view arch;  // for the error message, e.g. "gfx906"
};
AttentionKernel select_flash_kernel(FlashVariant variant, DType dtype, int64_t head_dim, const FlashTarget& target);
// AUTO's wgmma rule on compute capability 9.0 (attention_gpu.cu says where each tile was measured).
bool wgmma_beats_mma(int64_t head_dim, bool tma);
bool mfma_kernels_built();
// The MFMA flash kernel is built and the current device's matrix cores cover `dtype`.
bool mfma_flash_available(DType dtype);
// The dot2 flash kernel is built and the current device has v_dot2_f32_f16 (it serves fp16 only).
bool dot2_flash_available();
void set_flash_variant(FlashVariant variant);
FlashVariant flash_variant();

}  // namespace flashport::gpu
