// The arguments of linear's GPU GEMV kernels, shared by the FMA GEMV (linear.cu: one token, or up to
// GEMV_MAX_TOKENS without fusions) and the matrix-core GEMV (linear_tc.cuh: 2 to GEMV_TC_MAX_TOKENS
// tokens on NVIDIA mma.sync or AMD MFMA), so that both take the same views the same way.
// Plain C++: the launchers' host code reads it.
#pragma once

#include <cstdint>

#include "flashport/dtype.h"
#include "backends/gpu/ops_gpu.h"  // GEMV_TC_MAX_TOKENS
#include "backends/gpu/runtime.h"

namespace flashport::gpu {

// What surrounds the product (see linear.h): NORM normalises x first (the FMA GEMV's prologue); the
// epilogue stores the sum (PLAIN), adds it to a residual (RESIDUAL), pairs gate and up rows through
// SwiGLU (SWIGLU), or rotates q and k pairs and writes k and v pairs to the paged cache (ROPE_CACHE,
// the FMA GEMV with one token only).
enum class Epilogue : int { PLAIN, RESIDUAL, SWIGLU, ROPE_CACHE };

// out[t, n] = epilogue(sum_k x[t, k] · w[n, k] + bias[n]); 16-bit x and w of one dtype, rows ld*
// elements apart, 16-byte aligned, in a multiple of 8.
struct GemvArgs {
    void* out;
    DType out_dtype;
    int64_t ldo;
    const uint16_t* x;
    int64_t ldx;
    const uint16_t* w;
    int64_t ldw;
    const void* bias;  // null: none
    DType bias_dtype;
    int64_t n_out, in;       // SWIGLU: n_out gate rows, then n_out up rows
    const uint16_t* norm_w;  // NORM: [in], x's dtype
    float eps;               // NORM
    const void* residual;    // RESIDUAL: out's dtype; may be out itself
    int64_t ldr;
    bool constant_weight;  // no queued kernel writes w: it may be read before wait_for_prior_grid
};

// The launches, by vendor (each file exists in one vendor's build only): tokens in [1,
// GEMV_TC_MAX_TOKENS], epilogue PLAIN, RESIDUAL or SWIGLU, dtype F16 or BF16.
#if defined(FLASHPORT_GPU_CUDA)
void gemv_mma(const GemvArgs& a, DType dtype, int64_t tokens, Epilogue epi, cudaStream_t stream);
#else
void gemv_mfma(const GemvArgs& a, DType dtype, int64_t tokens, Epilogue epi, cudaStream_t stream);
#endif

}  // namespace flashport::gpu
