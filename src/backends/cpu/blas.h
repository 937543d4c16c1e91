// OpenBLAS, loaded at run time. Loading it ourselves lets us fix its CPU detection before it starts:
// Debian 12's OpenBLAS 0.3.21 predates Zen 4 and falls back to its "Prescott" (SSE3) kernels there,
// a 5x slower sgemm, which would make the naive baseline unfairly slow.
#pragma once

#include <string>

namespace flashport::cpu {

struct Blas {
    // C[m,n] = alpha * A[m,k] * op(B) + beta * C, row-major; op(B) = Bᵀ when b_transposed.
    void sgemm(bool b_transposed, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
               float beta, float* c, int ldc) const;
    std::string description;  // "OpenBLAS 0.3.21 (core SkylakeX, OPENBLAS_CORETYPE set by flashport), 2 threads"
};

// Loads OpenBLAS on first use. Throws flashport::Error naming the library when it can't be loaded.
const Blas& blas();

}  // namespace flashport::cpu
