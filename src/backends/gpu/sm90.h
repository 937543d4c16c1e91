// Hopper's sm_90a path (issue 17, item 1) as the dispatchers and tests see it, in plain C++. The kernels
// are compiled for sm_90a only (wgmma.cuh; the CUDA build's flashport_sm90a objects) and run only on
// compute capability 9.0. HIP builds have none.
#pragma once

#include "flashport/dtype.h"

namespace flashport::gpu {

// The current device is an NVIDIA GPU of compute capability 9.0 (H100, H200) in a CUDA build.
bool sm90_available();

// The layout check of wgmma.cuh: d [64, 64] fp32 = a [64, 16] · b [64, 16]ᵀ, a and b row-major fp16 or
// bf16 (`dtype`), all device pointers, through one wgmma.mma_async of a warpgroup. Throws where
// sm90_available() is false.
void wgmma_probe(const void* a, const void* b, float* d, DType dtype, void* stream = nullptr);

}  // namespace flashport::gpu
