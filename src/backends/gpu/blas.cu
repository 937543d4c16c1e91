// Strided-batched GEMM: C[z] = alpha * op(A[z]) op(B[z]) + beta * C[z], row-major, fp32 accumulation; C in the
// inputs' dtype or fp32.
//
// Variants:
//   vendor   - cublasGemmStridedBatchedEx / hipblasGemmStridedBatchedEx with a 32F compute type;
//   mfma     - gemm_mfma.cu: v_mfma_f32_16x16x16 on AMD matrix cores, for the 16-bit inputs the device
//              covers (HIP builds; gfx908 fp16, gfx90a/940 fp16 + bf16);
//   portable - gemm_portable.cu: register-blocked FP32 FMAs (128x128 or 64x64 tiles), every target and
//              dtype; correct for any sizes, strides and transposes.
#include "backends/gpu/blas.h"

#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backends/gpu/gemm_kernels.h"
#include "backends/gpu/gpu_arch.h"
#include "backends/gpu/runtime.h"
#include "flashport/device.h"

namespace flashport::gpu::blas {
namespace {

bool mfma_built() {
#if defined(FLASHPORT_GPU_MFMA_KERNELS)
    return true;
#else
    return false;
#endif
}

void check_available(Backend b) {
    FP_CHECK(b != Backend::VENDOR || vendor_available(),
             "this build has no vendor BLAS (cuBLAS/hipBLAS); use FLASHPORT_GPU_BLAS=portable",
             mfma_built() ? " or mfma" : "");
    FP_CHECK(b != Backend::MFMA || mfma_available(), "the MFMA GEMM (FLASHPORT_GPU_BLAS=mfma) needs ",
             mfma_built() ? "" : "a HIP build and ", "AMD matrix cores (gfx908, gfx90a, gfx940); this device is ",
             gpu_device_count() > 0 ? current_device_info().arch : std::string("absent"),
             ". Unset FLASHPORT_GPU_BLAS or set it to portable");
}

Backend initial_backend() {
    const char* env = std::getenv("FLASHPORT_GPU_BLAS");
    if (env && *env) {
        Backend b = Backend::PORTABLE;
        if (std::strcmp(env, "mfma") == 0)
            b = Backend::MFMA;
        else if (std::strcmp(env, "vendor") == 0)
            b = Backend::VENDOR;
        else
            FP_CHECK(std::strcmp(env, "portable") == 0, "FLASHPORT_GPU_BLAS must be portable, mfma or vendor, got ",
                     env);
        check_available(b);
        return b;
    }
    if (vendor_available()) return Backend::VENDOR;
    return mfma_available() ? Backend::MFMA : Backend::PORTABLE;
}
std::atomic<Backend>& current() {
    static std::atomic<Backend> b{initial_backend()};
    return b;
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
        b.data, type, int(b.ld), b.batch_stride, a.data, type, int(a.ld), a.batch_stride, &beta, c, blas_type(c_dtype),
        int(ldc), stride_c, int(batch), FP_BLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    FP_CHECK(st == CUBLAS_STATUS_SUCCESS, FLASHPORT_GPU_VENDOR, " BLAS GemmStridedBatchedEx failed (status ", int(st),
             ") for m=", m, " n=", n, " k=", k, " batch=", batch);
}
#endif

}  // namespace

bool vendor_available() {
    return FLASHPORT_HAVE_GPU_BLAS != 0;
}
bool mfma_available() {
    return mfma_built() && gpu_device_count() > 0 && current_device_info().matrix_cores != MatrixCores::NONE;
}
Backend backend() {
    return current().load();
}
void set_backend(Backend b) {
    check_available(b);
    current().store(b);
}
const char* backend_name(Backend b) {
    return b == Backend::VENDOR ? "vendor" : b == Backend::MFMA ? "mfma" : "portable";
}
Backend backend_for(DType ab_dtype) {
    const Backend b = backend();
    if (b != Backend::MFMA) return b;
    return matrix_cores_cover(current_device_info().matrix_cores, ab_dtype) ? Backend::MFMA : Backend::PORTABLE;
}
const char* gemm_name(DType ab_dtype) {
    const Backend b = backend_for(ab_dtype);
    return b == Backend::VENDOR ? "blas" : b == Backend::MFMA ? "mfma-gemm" : "portable-gemm";
}

void gemm(void* c, int64_t ldc, int64_t stride_c, DType c_dtype, DType dtype, int64_t m, int64_t n, int64_t k,
          float alpha, float beta, const Operand& a, const Operand& b, int64_t batch, void* stream) {
    FP_CHECK(m >= 0 && n >= 0 && k >= 0 && batch >= 0, "GEMM: negative size");
    FP_CHECK(c_dtype == dtype || c_dtype == DType::F32, "GEMM: C must be ", dtype_name(dtype), " or fp32, got ",
             dtype_name(c_dtype));
    if (m == 0 || n == 0 || batch == 0) return;
    const Backend be = backend_for(dtype);
#if FLASHPORT_HAVE_GPU_BLAS
    if (be == Backend::VENDOR) {
        gemm_vendor(c, ldc, stride_c, c_dtype, dtype, m, n, k, alpha, beta, a, b, batch, as_stream(stream));
        return;
    }
#endif
#if defined(FLASHPORT_GPU_MFMA_KERNELS)
    if (be == Backend::MFMA) {
        gemm_mfma({c, ldc, stride_c, c_dtype, dtype, m, n, k, alpha, beta, a, b, batch}, stream);
        return;
    }
#endif
    gemm_portable({c, ldc, stride_c, c_dtype, dtype, m, n, k, alpha, beta, a, b, batch}, stream);
}

}  // namespace flashport::gpu::blas
