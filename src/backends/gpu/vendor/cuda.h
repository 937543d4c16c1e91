// CUDA names for the GPU backend. Kernel and host code use the cuda*/cublas* spellings; vendor/hip.h
// maps the same spellings to HIP, so one source compiles for both. Included only through common.cuh.
#pragma once

// port-check: ignore nvidia-header-bf16 -- the CUDA side of the name map; vendor/hip.h includes hip_bf16.h
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#if FLASHPORT_HAVE_GPU_BLAS
#include <cublas_v2.h>
// cuBLASLt: matmul's bias epilogue (blas.h, gemm_bias). HIP has no such path: matmul stages fp32 and
// rounds itself there.
// port-check: ignore nvidia-header-cublaslt -- CUDA's side of the name map
#include <cublasLt.h>
#endif

#define FLASHPORT_GPU_CUDA 1
#define FLASHPORT_GPU_VENDOR "CUDA"

// Warp shuffles. CUDA needs an explicit member mask; callers pass one built by common.cuh from the
// warp size, never a literal.
#define FP_SHFL_XOR(mask, value, lane_mask, width) __shfl_xor_sync((mask), (value), (lane_mask), (width))
#define FP_SHFL(mask, value, src_lane, width) __shfl_sync((mask), (value), (src_lane), (width))

#if FLASHPORT_HAVE_GPU_BLAS
#define FP_BLAS_COMPUTE_32F CUBLAS_COMPUTE_32F
#define FP_BLAS_R_32F CUDA_R_32F
#define FP_BLAS_R_16F CUDA_R_16F
#define FP_BLAS_R_16BF CUDA_R_16BF
#endif
