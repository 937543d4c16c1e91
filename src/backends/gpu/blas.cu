// Strided-batched GEMM: C[z] = alpha * op(A[z]) op(B[z]) + beta * C[z], row-major, fp32 accumulation; C in the
// inputs' dtype or fp32.
//
// Variants:
//   vendor   - cublasGemmStridedBatchedEx / hipblasGemmStridedBatchedEx with a 32F compute type;
//   portable - gemm_tiled below: 64x64 output tiles, 16-deep k steps through shared memory, each of 256
//              threads owning a 4x4 strided block of C. Correct for any sizes, strides and transposes;
//              about an order of magnitude slower than the vendor library on large problems.
#include "backends/gpu/blas.h"

#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "backends/gpu/runtime.h"

namespace flashport::gpu::blas {
namespace {

constexpr int TILE = 64, TILE_K = 16, THREADS = 256, PER_THREAD = 4;  // 16x16 threads x 4x4 each

// Element (i, p) of op(X): see Operand.
template <DType DT>
__device__ __forceinline__ float load_op(const storage_t<DT>* x, int64_t ld, bool trans, int64_t i, int64_t p) {
    return to_float<DT>(trans ? x[p * ld + i] : x[i * ld + p]);
}

template <DType DT, DType DC>
__global__ void __launch_bounds__(THREADS) gemm_tiled(storage_t<DC>* __restrict__ c, int64_t ldc, int64_t stride_c,
                                                      int64_t m, int64_t n, int64_t k, float alpha, float beta,
                                                      const storage_t<DT>* __restrict__ a, int64_t lda,
                                                      int64_t stride_a, bool trans_a,
                                                      const storage_t<DT>* __restrict__ b, int64_t ldb,
                                                      int64_t stride_b, bool trans_b) {
    // Both tiles are stored k-major so the inner loop reads along m and n; the +1 column keeps the
    // transposing stores of trans operands off a single bank.
    __shared__ float as[TILE_K][TILE + 1];
    __shared__ float bs[TILE_K][TILE + 1];
    const int64_t z = blockIdx.z;
    a += z * stride_a;
    b += z * stride_b;
    c += z * stride_c;
    const int64_t row0 = int64_t(blockIdx.y) * TILE, col0 = int64_t(blockIdx.x) * TILE;
    const int tx = int(threadIdx.x) % 16, ty = int(threadIdx.x) / 16;

    float acc[PER_THREAD][PER_THREAD] = {};
    for (int64_t p0 = 0; p0 < k; p0 += TILE_K) {
        // 64x16 elements of each operand, 4 per thread; zero outside the matrix so edges need no test
        // in the inner loop.
        for (int e = int(threadIdx.x); e < TILE * TILE_K; e += THREADS) {
            const int r = e / TILE_K, q = e % TILE_K;
            const int64_t i = row0 + r, j = col0 + r, p = p0 + q;
            as[q][r] = (i < m && p < k) ? load_op<DT>(a, lda, trans_a, i, p) : 0.0f;
            bs[q][r] = (j < n && p < k) ? load_op<DT>(b, ldb, !trans_b, j, p) : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int q = 0; q < TILE_K; ++q) {
            float av[PER_THREAD], bv[PER_THREAD];
#pragma unroll
            for (int r = 0; r < PER_THREAD; ++r) av[r] = as[q][ty + 16 * r];
#pragma unroll
            for (int s = 0; s < PER_THREAD; ++s) bv[s] = bs[q][tx + 16 * s];
#pragma unroll
            for (int r = 0; r < PER_THREAD; ++r)
#pragma unroll
                for (int s = 0; s < PER_THREAD; ++s) acc[r][s] = fmaf(av[r], bv[s], acc[r][s]);
        }
        __syncthreads();  // the tiles are overwritten next step
    }
#pragma unroll
    for (int r = 0; r < PER_THREAD; ++r)
#pragma unroll
        for (int s = 0; s < PER_THREAD; ++s) {
            const int64_t i = row0 + ty + 16 * r, j = col0 + tx + 16 * s;
            if (i >= m || j >= n) continue;
            float v = alpha * acc[r][s];
            if (beta != 0.0f) v += beta * to_float<DC>(c[i * ldc + j]);  // beta = 0 never reads C (NaN-safe)
            c[i * ldc + j] = from_float<DC>(v);
        }
}

Backend initial_backend() {
    const char* env = std::getenv("FLASHPORT_GPU_BLAS");
    if (env && std::strcmp(env, "portable") == 0) return Backend::PORTABLE;
    return vendor_available() ? Backend::VENDOR : Backend::PORTABLE;
}
std::atomic<Backend>& current() {
    static std::atomic<Backend> b{initial_backend()};
    return b;
}

template <DType DT, DType DC>
void launch_gemm_tiled(void* c, int64_t ldc, int64_t stride_c, int64_t m, int64_t n, int64_t k, float alpha,
                       float beta, const Operand& a, const Operand& b, int64_t batch, cudaStream_t stream) {
    constexpr int64_t MAX_GRID_YZ = 65535;
    FP_CHECK(ceil_div(m, TILE) <= MAX_GRID_YZ, "portable GEMM: m = ", m, " exceeds ", MAX_GRID_YZ * TILE);
    using T = storage_t<DT>;
    using TC = storage_t<DC>;
    for (int64_t z0 = 0; z0 < batch; z0 += MAX_GRID_YZ) {  // grid.z is limited to 65535
        const int64_t nz = std::min(batch - z0, MAX_GRID_YZ);
        const dim3 grid(unsigned(ceil_div(n, TILE)), unsigned(ceil_div(m, TILE)), unsigned(nz));
        launch_kernel(gemm_tiled<DT, DC>, grid, THREADS, 0, stream, static_cast<TC*>(c) + z0 * stride_c, ldc, stride_c,
                      m, n, k, alpha, beta, static_cast<const T*>(a.data) + z0 * a.batch_stride, a.ld, a.batch_stride,
                      a.trans, static_cast<const T*>(b.data) + z0 * b.batch_stride, b.ld, b.batch_stride, b.trans);
        FP_GPU_CHECK_LAUNCH("gemm_tiled");
    }
}

void gemm_portable(void* c, int64_t ldc, int64_t stride_c, DType c_dtype, DType dtype, int64_t m, int64_t n, int64_t k,
                   float alpha, float beta, const Operand& a, const Operand& b, int64_t batch, cudaStream_t stream) {
    dispatch_dtype(dtype, [&]<DType DT>() {
        if (c_dtype == DT)
            launch_gemm_tiled<DT, DT>(c, ldc, stride_c, m, n, k, alpha, beta, a, b, batch, stream);
        else if constexpr (DT != DType::F32)
            launch_gemm_tiled<DT, DType::F32>(c, ldc, stride_c, m, n, k, alpha, beta, a, b, batch, stream);
    });
}

#if FLASHPORT_HAVE_GPU_BLAS
// One handle per host thread and device: handles are not safe to share between threads that set
// different streams. Created on first use (that allocates; later calls don't).
cublasHandle_t handle_for_current_device() {
    constexpr int MAX_DEVICES = 16;
    thread_local cublasHandle_t handles[MAX_DEVICES] = {};
    int dev = 0;
    FP_GPU_CHECK(cudaGetDevice(&dev), "querying the current GPU");
    FP_CHECK(dev >= 0 && dev < MAX_DEVICES, "GPU index ", dev, " beyond the ", MAX_DEVICES, " supported");
    if (!handles[dev]) {
        const cublasStatus_t st = cublasCreate(&handles[dev]);
        FP_CHECK(st == CUBLAS_STATUS_SUCCESS, "creating a ", FLASHPORT_GPU_VENDOR, " BLAS handle failed (status ",
                 int(st), ")");
#if defined(FLASHPORT_GPU_CUDA)
        // Split-K partial sums must stay fp32: by default cuBLAS may reduce them in the output's 16-bit
        // type, which rounds a bf16 result more than once (measured: 1.4 ulp errors on 1025x896x136).
        cublasSetMathMode(handles[dev], CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
#endif
    }
    return handles[dev];
}

auto blas_type(DType dtype) {
    return dtype == DType::F32 ? FP_BLAS_R_32F : dtype == DType::F16 ? FP_BLAS_R_16F : FP_BLAS_R_16BF;
}

void gemm_vendor(void* c, int64_t ldc, int64_t stride_c, DType c_dtype, DType dtype, int64_t m, int64_t n, int64_t k,
                 float alpha, float beta, const Operand& a, const Operand& b, int64_t batch, cudaStream_t stream) {
    for (int64_t x : {m, n, k, ldc, a.ld, b.ld, batch})
        FP_CHECK(x <= INT_MAX, "BLAS GEMM: a size or leading dimension (", x, ") exceeds INT_MAX");
    cublasHandle_t h = handle_for_current_device();
    FP_CHECK(cublasSetStream(h, stream) == CUBLAS_STATUS_SUCCESS, "BLAS: setting the stream failed");
    const auto type = blas_type(dtype);
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T; a row-major operand read as
    // column-major is already transposed, so each keeps its own trans flag and the two swap places.
    const cublasStatus_t st = cublasGemmStridedBatchedEx(
        h, b.trans ? CUBLAS_OP_T : CUBLAS_OP_N, a.trans ? CUBLAS_OP_T : CUBLAS_OP_N, int(n), int(m), int(k), &alpha,
        b.data, type, int(b.ld), b.batch_stride, a.data, type, int(a.ld), a.batch_stride, &beta, c, blas_type(c_dtype), int(ldc),
        stride_c, int(batch), FP_BLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    FP_CHECK(st == CUBLAS_STATUS_SUCCESS, FLASHPORT_GPU_VENDOR, " BLAS GemmStridedBatchedEx failed (status ", int(st),
             ") for m=", m, " n=", n, " k=", k, " batch=", batch);
}
#endif

}  // namespace

bool vendor_available() { return FLASHPORT_HAVE_GPU_BLAS != 0; }
Backend backend() { return current().load(); }
void set_backend(Backend b) {
    FP_CHECK(b == Backend::PORTABLE || vendor_available(),
             "this build has no vendor BLAS (cuBLAS/hipBLAS); only the portable GEMM is available");
    current().store(b);
}
const char* backend_name(Backend b) { return b == Backend::VENDOR ? "vendor" : "portable"; }

void gemm(void* c, int64_t ldc, int64_t stride_c, DType c_dtype, DType dtype, int64_t m, int64_t n, int64_t k,
          float alpha, float beta, const Operand& a, const Operand& b, int64_t batch, void* stream) {
    FP_CHECK(m >= 0 && n >= 0 && k >= 0 && batch >= 0, "GEMM: negative size");
    FP_CHECK(c_dtype == dtype || c_dtype == DType::F32, "GEMM: C must be ", dtype_name(dtype), " or fp32, got ",
             dtype_name(c_dtype));
    if (m == 0 || n == 0 || batch == 0) return;
#if FLASHPORT_HAVE_GPU_BLAS
    if (backend() == Backend::VENDOR) {
        gemm_vendor(c, ldc, stride_c, c_dtype, dtype, m, n, k, alpha, beta, a, b, batch, as_stream(stream));
        return;
    }
#endif
    gemm_portable(c, ldc, stride_c, c_dtype, dtype, m, n, k, alpha, beta, a, b, batch, as_stream(stream));
}

}  // namespace flashport::gpu::blas
