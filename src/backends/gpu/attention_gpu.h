// The GPU attention backend as ops/attention.cpp sees it. Compiled only in CUDA and HIP builds
// (FLASHPORT_GPU defined).
#pragma once

#include <cstddef>
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

// Which flash variant serves fp16/bf16 on GPUs that have both: MMA (tensor cores, NVIDIA sm_80+, the
// default there) or PORTABLE (the kernel HIP runs). FLASHPORT_GPU_FLASH=portable in the environment
// sets PORTABLE at start. Process-wide; for tests and benchmarks.
enum class FlashVariant : unsigned char { MMA, PORTABLE };
void set_flash_variant(FlashVariant variant);
FlashVariant flash_variant();

}  // namespace flashport::gpu
