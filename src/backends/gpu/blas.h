// A thin strided-batched GEMM over cuBLAS / hipBLAS, with a portable tiled kernel that serves where
// the vendor library is absent (Debian 12 has no hipBLAS) and that can be forced on CUDA for testing.
#pragma once

#include <cstdint>

#include "flashport/dtype.h"

namespace flashport::gpu::blas {

enum class Backend : uint8_t { VENDOR, PORTABLE };

// Whether this build links cuBLAS / hipBLAS.
bool vendor_available();
// The process-wide choice; starts as VENDOR when available, or PORTABLE when FLASHPORT_GPU_BLAS=portable
// is set in the environment. Selecting VENDOR in a build without it throws.
Backend backend();
void set_backend(Backend b);
const char* backend_name(Backend b);

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

}  // namespace flashport::gpu::blas
