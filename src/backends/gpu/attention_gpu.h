// The GPU attention backend as ops/attention.cpp sees it. Compiled only in CUDA and HIP builds
// (FLASHPORT_GPU defined).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "flashport/attention.h"

namespace flashport::gpu {

// Checks the GPU-specific limits of a request (dtypes, head dims, strides, implementation) that the
// generic shape checks in ops/attention.cpp have already passed, and names the kernel that will serve
// it, e.g. "gpu.flash.mma.d128". Throws flashport::Error naming the broken limit.
std::string select_attention_kernel(const AttentionPlan& plan, const TensorView& out, const TensorView& q,
                                    const TensorView& k, const TensorView& v, const TensorView* lse);

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
// the mma or portable variant as flash_variant() and the device allow. dtype is F16 or BF16 and head_dim
// one of FLASH_HEAD_DIMS (attention_kernels.h); the callers have checked both.
struct AttentionArgs;
void launch_flash(const AttentionArgs& args, DType dtype, int head_dim, void* stream);
// "mma" or "portable": the variant launch_flash runs now, for kernel names.
const char* flash_variant_name();
bool is_flash_head_dim(int64_t head_dim);
// "16, 32, 40, ... and 256": the list for error messages.
std::string flash_head_dims_text();

// Varlen attention (flashport/attention_varlen.h) on the GPU. `plan` comes from plan_attention on the
// packed tensors seen as batch-1 4-D views (out, q, k, v, lse as given here); seqs' offsets live on the
// GPU and are checked by the kernel.
struct VarlenSeqsView {
    const int32_t* cu_q;
    const int32_t* cu_k;
    int64_t batch, max_seqlen_q;
};
void run_attention_varlen(const AttentionPlan& plan, const TensorView& out, const TensorView& q, const TensorView& k,
                          const TensorView& v, const TensorView* lse, const VarlenSeqsView& seqs, void* stream);

// Which flash variant serves fp16/bf16 on GPUs that have both: MMA (tensor cores, NVIDIA sm_80+, the
// default there) or PORTABLE (the kernel HIP runs). FLASHPORT_GPU_FLASH=portable in the environment
// sets PORTABLE at start. Process-wide; for tests and benchmarks.
enum class FlashVariant : unsigned char { MMA, PORTABLE };
void set_flash_variant(FlashVariant variant);
FlashVariant flash_variant();

}  // namespace flashport::gpu
