// A thin strided-batched GEMM over cuBLAS / hipBLAS, with its own kernels where the vendor library is
// absent (Debian 12 has no hipBLAS): a portable register-blocked kernel (every target, every dtype) and
// an MFMA kernel for fp16/bf16 on AMD matrix cores (gemm_kernels.h). Either can be forced for testing.
#pragma once

#include <cstdint>

#include "flashport/dtype.h"

namespace flashport::gpu::blas {

// VENDOR: cuBLAS / hipBLAS. PORTABLE: gemm_portable.cu. MFMA: gemm_mfma.cu for the 16-bit inputs the
// device's matrix cores cover (fp16 on gfx908; fp16 and bf16 on gfx90a/940), the portable kernel for
// the rest (fp32 inputs, bf16 on gfx908).
enum class Backend : uint8_t { VENDOR, PORTABLE, MFMA };

// Whether this build links cuBLAS / hipBLAS.
bool vendor_available();
// Whether this build has the MFMA kernel (HIP builds) and the current device has matrix cores.
bool mfma_available();
// The process-wide choice. Starts as FLASHPORT_GPU_BLAS says (portable, mfma or vendor), else VENDOR
// where linked, else MFMA where available, else PORTABLE. Selecting VENDOR or MFMA where it is not
// available throws (one line naming the device).
Backend backend();
void set_backend(Backend b);
const char* backend_name(Backend b);
// The kernel a call with `ab_dtype` inputs runs under the current choice (never MFMA for fp32 inputs
// or where the matrix cores lack the dtype), and its name in the ops' kernel names: "blas",
// "portable-gemm" or "mfma-gemm" (e.g. gpu.matmul.mfma-gemm).
Backend backend_for(DType ab_dtype);
const char* gemm_name(DType ab_dtype);

// One operand of a row-major GEMM: element (i, p) of op(X) is X[i * ld + p], or X[p * ld + i] when
// trans. Consecutive batch entries are batch_stride elements apart (0 broadcasts one matrix).
struct Operand {
    const void* data;
    int64_t ld;
    int64_t batch_stride;
    bool trans;
};

// C[z] = alpha * op(A[z]) op(B[z]) + beta * C[z] for z < batch, row-major: op(A) [m, k], op(B) [k, n],
// C [m, n] with leading dimension ldc. A and B are `ab_dtype`; C is `c_dtype`, either the same or F32.
// Products accumulate in fp32, the beta term is added in fp32 and C is rounded once. With beta = 0, C
// is not read (it may hold NaN). Asynchronous on `stream`.
void gemm(void* c, int64_t ldc, int64_t stride_c, DType c_dtype, DType ab_dtype, int64_t m, int64_t n, int64_t k,
          float alpha, float beta, const Operand& a, const Operand& b, int64_t batch, void* stream);

// C = round(op(A) op(B) + bias) for one row-major GEMM: op(A) [m, k], op(B) [k, n], bias [n] and C
// [m, n] (leading dimension ldc) all `dtype` (fp16 or bf16), the bias added to the fp32 sums and C
// rounded once, in the GEMM's epilogue (cuBLASLt's bias epilogue). bias_epilogue_available: whether
// this build and the current choice (VENDOR) have it: CUDA builds with cuBLAS only; elsewhere matmul
// stages the fp32 sums and rounds them itself (matmul.cu). gemm_bias returns false, having done
// nothing, where cuBLASLt has no algorithm for the shapes and alignments (the caller stages then).
bool bias_epilogue_available();
bool gemm_bias(void* c, int64_t ldc, DType dtype, int64_t m, int64_t n, int64_t k, const Operand& a, const Operand& b,
               const void* bias, void* stream);

}  // namespace flashport::gpu::blas
