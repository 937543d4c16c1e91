// The GEMM kernels behind blas::gemm (blas.h) when no vendor BLAS serves: the portable register-blocked
// kernel (gemm_portable.cu, every target) and the AMD matrix-core kernel (gemm_mfma.cu, HIP only).
// Plain C++: blas.cu calls these with the problem it validated.
#pragma once

#include <cstdint>

#include "backends/gpu/blas.h"

namespace flashport::gpu::blas {

// One validated call of blas::gemm: m, n, batch > 0, k >= 0, c_dtype == ab_dtype or F32.
struct GemmProblem {
    void* c;
    int64_t ldc, stride_c;
    DType c_dtype, ab_dtype;
    int64_t m, n, k;
    float alpha, beta;
    Operand a, b;
    int64_t batch;
};

// FP32 FMAs from shared memory; any dtype, size, stride and transpose. Asynchronous on `stream`.
void gemm_portable(const GemmProblem& p, void* stream);

// v_mfma_f32_16x16x16 (fp16, bf16 inputs only): AMD-only (gemm_mfma.cu, FLASHPORT_GPU_MFMA_KERNELS
// builds); traps on a target without matrix cores, so blas.cu calls it only where they cover the dtype.
void gemm_mfma(const GemmProblem& p, void* stream);

// The name of the portable kernel's tile a problem of this shape gets ("128x128" or "64x64"): tests
// use it to cover both. The MFMA kernel takes the same tiles.
const char* gemm_portable_tile(int64_t m, int64_t n);

}  // namespace flashport::gpu::blas
