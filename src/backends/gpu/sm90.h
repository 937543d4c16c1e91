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

// The MN-major B operand's check (wgmma_mma with TRANS_B, for P · V with V untransposed): d [64, 64] = a [64,
// 16] · b [16, 64], b row-major (its 64 columns contiguous), copied into shared memory as core matrices
// of 8 k-rows x 8 columns (16 bytes a row), core matrix (k / 8, n / 8) at k_group_bytes · (k / 8) +
// n_group_bytes · (n / 8), and read through a descriptor with the given leading and stride byte offsets.
// The test tries the candidate pairings and reports the one that matches float64. Throws where
// sm90_available() is false.
// With swizzle128, b sits in the 128-byte swizzle layout instead: row k of each 8-row group in one
// 128-byte line (its 64 columns), 16-byte chunk c at chunk c ^ (k % 8), groups k_group_bytes apart (a
// multiple of 1024); n_group_bytes is unused, and the descriptor says layout type 1.
struct WgmmaMnLayout {
    unsigned k_group_bytes, n_group_bytes, lbo, sbo;
    bool swizzle128 = false;
};
void wgmma_probe_mn_major(const void* a, const void* b, float* d, DType dtype, const WgmmaMnLayout& layout,
                          void* stream = nullptr);

}  // namespace flashport::gpu
