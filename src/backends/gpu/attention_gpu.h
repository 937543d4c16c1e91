// The GPU attention backend as ops/attention.cpp sees it. Compiled only in CUDA and HIP builds
// (FLASHPORT_GPU defined).
#pragma once

#include <string>

#include "flashport/attention.h"

namespace flashport::gpu {

// Checks the GPU-specific limits of a request (dtypes, head dims, strides, implementation) that the
// generic shape checks in ops/attention.cpp have already passed, and names the kernel that will serve
// it, e.g. "gpu.flash.mma.d128". Throws flashport::Error naming the broken limit.
std::string select_attention_kernel(const AttentionPlan& plan, const TensorView& out, const TensorView& q,
                                    const TensorView& k, const TensorView& v, const TensorView* lse);

// Runs a plan produced by plan_attention on `stream` (a cudaStream_t / hipStream_t; null is the
// default stream). Asynchronous: no allocation, no synchronisation.
void run_attention(const AttentionPlan& plan, const TensorView& out, const TensorView& q, const TensorView& k,
                   const TensorView& v, const TensorView* lse, void* stream);

}  // namespace flashport::gpu
