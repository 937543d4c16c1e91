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
    // OpenBLAS's thread count (a process-wide setting); 0 when the library can't report or set it.
    int threads() const;
    void set_threads(int n) const;
};

// Holds OpenBLAS at `n` threads while it lives, then restores the count it found. The matmul runs
// one-thread sgemms on OpenMP's threads under it, so the two pools never compete for the cores.
// Not for concurrent use from several threads at once (the setting is global).
class BlasThreads {
public:
    BlasThreads(const Blas& blas, int n) : blas_(blas), saved_(blas.threads()) {
        if (saved_ > 0 && saved_ != n) blas_.set_threads(n);
    }
    ~BlasThreads() {
        if (saved_ > 0 && blas_.threads() != saved_) blas_.set_threads(saved_);
    }
    BlasThreads(const BlasThreads&) = delete;
    BlasThreads& operator=(const BlasThreads&) = delete;

private:
    const Blas& blas_;
    int saved_;
};

// Loads OpenBLAS on first use. Throws flashport::Error naming the library when it can't be loaded.
const Blas& blas();

}  // namespace flashport::cpu
