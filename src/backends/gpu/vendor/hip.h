// HIP names for the GPU backend: maps the cuda*/cublas* spellings the sources use to hip*/hipblas*, so
// one source compiles for both. Included only through common.cuh.
//
// Written against Debian 12's HIP 5.2 (hipcc + clang 15): it has no hipBLAS, and hip_bfloat16 is a
// host/device struct rather than CUDA's __nv_bfloat16 with intrinsics, so common.cuh converts bf16
// from raw bits itself.
#pragma once

#if defined(FLASHPORT_HIP_CPU)
#include "backends/gpu/vendor/hip_cpu.h"  // first: it sets libco's stack hook for the runtime's headers
#endif
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>

#if FLASHPORT_HAVE_GPU_BLAS
#if __has_include(<hipblas/hipblas.h>)
#include <hipblas/hipblas.h>
#else
#include <hipblas.h>
#endif
#endif

#define FLASHPORT_GPU_HIP 1
#ifndef FLASHPORT_GPU_VENDOR
#define FLASHPORT_GPU_VENDOR "HIP"
#endif

// Runtime.
#define cudaError_t hipError_t
#define cudaSuccess hipSuccess
#define cudaErrorNoDevice hipErrorNoDevice
#define cudaErrorMemoryAllocation hipErrorOutOfMemory
#define cudaErrorInsufficientDriver hipErrorInsufficientDriver
#define cudaGetErrorString hipGetErrorString
#define cudaGetErrorName hipGetErrorName
#define cudaGetLastError hipGetLastError
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaDriverGetVersion hipDriverGetVersion
#define cudaRuntimeGetVersion hipRuntimeGetVersion
#define cudaGetDevice hipGetDevice
#define cudaSetDevice hipSetDevice
#define cudaDeviceProp hipDeviceProp_t
#define cudaGetDeviceProperties hipGetDeviceProperties
#define cudaDeviceGetAttribute hipDeviceGetAttribute
#define cudaDevAttrMaxSharedMemoryPerBlockOptin hipDeviceAttributeSharedMemPerBlockOptin
#define cudaDevAttrMultiProcessorCount hipDeviceAttributeMultiprocessorCount
#define cudaFuncSetAttribute(func, attr, value) hipFuncSetAttribute(reinterpret_cast<const void*>(func), attr, value)
#define cudaFuncAttributeMaxDynamicSharedMemorySize hipFuncAttributeMaxDynamicSharedMemorySize
#define cudaOccupancyMaxActiveBlocksPerMultiprocessor hipOccupancyMaxActiveBlocksPerMultiprocessor
#define cudaMalloc hipMalloc
#define cudaFree hipFree
#define cudaMallocAsync hipMallocAsync
#define cudaFreeAsync hipFreeAsync
#define cudaMemPool_t hipMemPool_t
#define cudaDeviceGetDefaultMemPool hipDeviceGetDefaultMemPool
#define cudaMemPoolSetAttribute hipMemPoolSetAttribute
#define cudaMemPoolAttrReleaseThreshold hipMemPoolAttrReleaseThreshold
#define cudaMemGetInfo hipMemGetInfo
#define cudaMemcpy hipMemcpy
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemcpyDefault hipMemcpyDefault
#define cudaMemsetAsync hipMemsetAsync
#define cudaDeviceSynchronize hipDeviceSynchronize
#define cudaStream_t hipStream_t
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaStreamCreateWithFlags hipStreamCreateWithFlags
#define cudaStreamNonBlocking hipStreamNonBlocking
#define cudaStreamDestroy hipStreamDestroy
#define cudaStreamBeginCapture hipStreamBeginCapture
#define cudaStreamEndCapture hipStreamEndCapture
#define cudaStreamCaptureModeThreadLocal hipStreamCaptureModeThreadLocal
#define cudaStreamIsCapturing hipStreamIsCapturing
#define cudaStreamCaptureStatus hipStreamCaptureStatus
#define cudaStreamCaptureStatusNone hipStreamCaptureStatusNone
#define cudaGraph_t hipGraph_t
#define cudaGraphExec_t hipGraphExec_t
#define cudaGraphInstantiateWithFlags hipGraphInstantiateWithFlags
#define cudaGraphLaunch hipGraphLaunch
#define cudaGraphExecDestroy hipGraphExecDestroy
#define cudaGraphDestroy hipGraphDestroy
#define cudaEvent_t hipEvent_t
#define cudaEventCreate hipEventCreate
#define cudaEventDestroy hipEventDestroy
#define cudaEventRecord hipEventRecord
#define cudaEventSynchronize hipEventSynchronize
#define cudaEventElapsedTime hipEventElapsedTime

// BLAS (only where hipBLAS exists; Debian 12 has none, and the portable GEMM serves instead).
#if FLASHPORT_HAVE_GPU_BLAS
#define cublasHandle_t hipblasHandle_t
#define cublasStatus_t hipblasStatus_t
#define CUBLAS_STATUS_SUCCESS HIPBLAS_STATUS_SUCCESS
#define cublasCreate hipblasCreate
#define cublasDestroy hipblasDestroy
#define cublasSetStream hipblasSetStream
#define cublasOperation_t hipblasOperation_t
#define CUBLAS_OP_N HIPBLAS_OP_N
#define CUBLAS_OP_T HIPBLAS_OP_T
#define CUBLAS_GEMM_DEFAULT HIPBLAS_GEMM_DEFAULT
#define cublasGemmStridedBatchedEx hipblasGemmStridedBatchedEx
// hipBLAS before 6.0 takes a hipblasDatatype_t as the compute type; 6.x takes hipblasComputeType_t.
#if defined(HIPBLAS_V2)
#define FP_BLAS_COMPUTE_32F HIPBLAS_COMPUTE_32F
#define FP_BLAS_R_32F HIP_R_32F
#define FP_BLAS_R_16F HIP_R_16F
#define FP_BLAS_R_16BF HIP_R_16BF
#else
#define FP_BLAS_COMPUTE_32F HIPBLAS_R_32F
#define FP_BLAS_R_32F HIPBLAS_R_32F
#define FP_BLAS_R_16F HIPBLAS_R_16F
#define FP_BLAS_R_16BF HIPBLAS_R_16B
#endif
#endif

// Warp shuffles: HIP's take no member mask (a wavefront runs in lockstep), so the mask is dropped.
#ifndef FP_SHFL_XOR  // vendor/hip_cpu.h defines checked ones
#define FP_SHFL_XOR(mask, value, lane_mask, width) __shfl_xor((value), (lane_mask), (width))
#define FP_SHFL(mask, value, src_lane, width) __shfl((value), (src_lane), (width))
#endif
