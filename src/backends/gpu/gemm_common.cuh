// What the GEMM kernels behind blas::gemm share (gemm_portable.cu, gemm_mfma.cu): their argument
// block, the vector-load test of an operand and the batched launch.
#pragma once

#include <algorithm>
#include <cstdint>

#include "backends/gpu/common.cuh"
#include "backends/gpu/gemm_kernels.h"
#include "backends/gpu/runtime.h"

namespace flashport::gpu::blas {

// A block's 256 threads: a literal, never a multiple of WARP_SIZE (docs/gpu.md).
constexpr int GEMM_THREADS = 256;

// One operand as a kernel reads it: element (i, p) of op(X), i along C's rows (A) or columns (B),
// is X[i * ld + p] when k_contig, else X[p * ld + i]; `vec`: base, ld and batch stride allow the
// kernel's vector loads.
struct GemmSide {
    const void* data;
    int64_t ld, batch_stride;
    bool k_contig;
    bool vec;
};
struct GemmArgs {
    void* c;
    int64_t ldc, stride_c;
    int64_t m, n, k;
    float alpha, beta;
    GemmSide a, b;  // a: rows are C's rows (m); b: rows are C's columns (n)
};

// `x` as a kernel side whose vector loads read `v` elements at once.
inline GemmSide gemm_side(const Operand& x, bool k_contig, int v, size_t elem, int64_t batch) {
    const bool aligned = reinterpret_cast<uintptr_t>(x.data) % (size_t(v) * elem) == 0 && x.ld % v == 0 &&
                         (batch == 1 || x.batch_stride % v == 0);
    return {x.data, x.ld, x.batch_stride, k_contig, aligned};
}

// The argument block of `p` for a kernel whose A and B loads read va and vb elements at once.
inline GemmArgs gemm_args(const GemmProblem& p, int va, int vb) {
    const size_t es = dtype_size(p.ab_dtype);
    return {p.c,
            p.ldc,
            p.stride_c,
            p.m,
            p.n,
            p.k,
            p.alpha,
            p.beta,
            gemm_side(p.a, !p.a.trans, va, es, p.batch),
            gemm_side(p.b, p.b.trans, vb, es, p.batch)};
}

// Launches `kernel` over BM x BN tiles of C, in batches of at most 65535 (grid.z's limit).
template <int BM, int BN>
void launch_gemm_tiles(void (*kernel)(GemmArgs), const GemmProblem& p, const GemmArgs& g, const char* name,
                       cudaStream_t stream) {
    constexpr int64_t MAX_GRID_YZ = 65535;
    FP_CHECK(ceil_div(p.m, BM) <= MAX_GRID_YZ, name, ": m = ", p.m, " exceeds ", MAX_GRID_YZ * BM);
    const int64_t es = int64_t(dtype_size(p.ab_dtype)), ces = int64_t(dtype_size(p.c_dtype));
    for (int64_t z0 = 0; z0 < p.batch; z0 += MAX_GRID_YZ) {
        const int64_t nz = std::min(p.batch - z0, MAX_GRID_YZ);
        GemmArgs gz = g;
        gz.c = static_cast<char*>(p.c) + z0 * p.stride_c * ces;
        gz.a.data = static_cast<const char*>(p.a.data) + z0 * p.a.batch_stride * es;
        gz.b.data = static_cast<const char*>(p.b.data) + z0 * p.b.batch_stride * es;
        const dim3 grid(unsigned(ceil_div(p.n, BN)), unsigned(ceil_div(p.m, BM)), unsigned(nz));
        launch_kernel(kernel, grid, GEMM_THREADS, 0, stream, gz);
        FP_GPU_CHECK_LAUNCH(name);
    }
}

}  // namespace flashport::gpu::blas
