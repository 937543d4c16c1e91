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
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>

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
// The current GPU's index, checked against the handle tables' size.
constexpr int MAX_DEVICES = 16;
int current_device_index() {
    int dev = 0;
    FP_GPU_CHECK(cudaGetDevice(&dev), "querying the current GPU");
    FP_CHECK(dev >= 0 && dev < MAX_DEVICES, "GPU index ", dev, " beyond the ", MAX_DEVICES, " supported");
    return dev;
}

// One handle of type H per host thread and device: handles are not safe to share between threads that
// set different streams. Made by create(&handle) on first use (that allocates; later calls don't). Each
// handle type has one caller, so one table per type.
template <class H, class Create>
H handle_for_device(int dev, Create create) {
    thread_local H handles[MAX_DEVICES] = {};
    if (!handles[dev]) create(&handles[dev]);
    return handles[dev];
}

cublasHandle_t handle_for_current_device() {
    return handle_for_device<cublasHandle_t>(current_device_index(), [](cublasHandle_t* h) {
        const cublasStatus_t st = cublasCreate(h);
        FP_CHECK(st == CUBLAS_STATUS_SUCCESS, "creating a ", FLASHPORT_GPU_VENDOR, " BLAS handle failed (status ",
                 int(st), ")");
#if defined(FLASHPORT_GPU_CUDA)
        // Split-K partial sums must stay fp32: by default cuBLAS may reduce them in the output's 16-bit
        // type, which rounds a bf16 result more than once (measured: 1.4 ulp errors on 1025x896x136).
        cublasSetMathMode(*h, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
#endif
    });
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

#if FLASHPORT_HAVE_GPU_BLAS && defined(FLASHPORT_GPU_CUDA)
// ---- cuBLASLt, for the bias epilogue ------------------------------------------------------------
// The most workspace a bias GEMM's algorithm may ask for (split-K partials); taken per call from the
// stream-ordered pool (StreamBuffer), so a captured graph holds it as an allocation node.
constexpr size_t LT_WORKSPACE_BYTES = size_t(4) << 20;

void check_lt(cublasStatus_t st, const char* what) {
    FP_CHECK(st == CUBLAS_STATUS_SUCCESS, "cuBLASLt: ", what, " failed (status ", int(st), ")");
}

// The descriptors of one call, destroyed with it.
struct LtCall {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    LtCall() = default;
    LtCall(const LtCall&) = delete;
    LtCall& operator=(const LtCall&) = delete;
    ~LtCall() {
        if (pref) cublasLtMatmulPreferenceDestroy(pref);
        for (cublasLtMatrixLayout_t l : {a, b, c})
            if (l) cublasLtMatrixLayoutDestroy(l);
        if (op) cublasLtMatmulDescDestroy(op);
    }
};

template <class T>
void set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& value) {
    check_lt(cublasLtMatmulDescSetAttribute(d, attr, &value, sizeof value), "setting a matmul attribute");
}
template <class T>
void set_pref(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr, const T& value) {
    check_lt(cublasLtMatmulPreferenceSetAttribute(p, attr, &value, sizeof value), "setting a preference");
}

// The largest power of two (at most 256) dividing the address: the heuristic otherwise assumes 256-byte
// aligned operands and may pick an algorithm that a view into a workspace would break.
uint32_t alignment_of(const void* p) {
    const auto v = reinterpret_cast<uintptr_t>(p);
    uint32_t a = 256;
    while (a > 1 && v % a != 0) a /= 2;
    return a;
}

struct LtAlgo {
    cublasLtMatmulAlgo_t algo;
    size_t workspace;
    bool found;
};

bool gemm_bias_vendor(void* c, int64_t ldc, DType dtype, int64_t m, int64_t n, int64_t k, const Operand& a,
                      const Operand& b, const void* bias, cudaStream_t stream) {
    for (int64_t x : {m, n, k, ldc, a.ld, b.ld})
        FP_CHECK(x <= INT_MAX, "BLAS GEMM: a size or leading dimension (", x, ") exceeds INT_MAX");
    const cudaDataType_t type = dtype == DType::F16 ? CUDA_R_16F : CUDA_R_16BF;
    // Column-major, as gemm_vendor: Cᵀ [n, m] = op(B)ᵀ op(A)ᵀ, so B is cuBLASLt's first operand and the
    // bias, one value per row of Cᵀ, is the epilogue's bias vector of length n.
    const cublasOperation_t ta = b.trans ? CUBLAS_OP_T : CUBLAS_OP_N, tb = a.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    LtCall call;
    check_lt(cublasLtMatmulDescCreate(&call.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "creating a matmul");
    set_desc(call.op, CUBLASLT_MATMUL_DESC_TRANSA, ta);
    set_desc(call.op, CUBLASLT_MATMUL_DESC_TRANSB, tb);
    set_desc(call.op, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
    set_desc(call.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
    set_desc(call.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, type);
    // Stored shapes (before op): the first operand [n, k] or [k, n], the second [k, m] or [m, k].
    check_lt(cublasLtMatrixLayoutCreate(&call.a, type, ta == CUBLAS_OP_N ? n : k, ta == CUBLAS_OP_N ? k : n, b.ld),
             "creating a layout");
    check_lt(cublasLtMatrixLayoutCreate(&call.b, type, tb == CUBLAS_OP_N ? k : m, tb == CUBLAS_OP_N ? m : k, a.ld),
             "creating a layout");
    check_lt(cublasLtMatrixLayoutCreate(&call.c, type, n, m, ldc), "creating a layout");

    const int dev = current_device_index();
    const cublasLtHandle_t h = handle_for_device<cublasLtHandle_t>(
        dev, [](cublasLtHandle_t* lt) { check_lt(cublasLtCreate(lt), "creating a handle"); });
    // The heuristic's answer, once per shape: asking costs tens of µs on the host.
    using Key = std::tuple<int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, uint32_t,
                           uint32_t, uint32_t, uint32_t>;
    const Key key{dev,         int(dtype),  m, n, k, a.ld, b.ld, ldc, int(ta), int(tb), alignment_of(a.data),
                  alignment_of(b.data), alignment_of(c), alignment_of(bias)};
    static std::mutex mutex;
    static std::map<Key, LtAlgo> algos;
    LtAlgo algo{};
    {
        std::lock_guard<std::mutex> lock(mutex);
        auto it = algos.find(key);
        if (it == algos.end()) {
            check_lt(cublasLtMatmulPreferenceCreate(&call.pref), "creating a preference");
            set_pref(call.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, LT_WORKSPACE_BYTES);
            // Split-K partials reduced in fp32 only (none, or in the compute type): an in-place or
            // output-type reduction would round a 16-bit C twice (the cuBLAS handles' math mode).
            set_pref(call.pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                     uint32_t(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE));
            set_pref(call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignment_of(b.data));
            set_pref(call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignment_of(a.data));
            set_pref(call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignment_of(c));
            set_pref(call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignment_of(c));
            cublasLtMatmulHeuristicResult_t result{};
            int found = 0;
            check_lt(cublasLtMatmulAlgoGetHeuristic(h, call.op, call.a, call.b, call.c, call.c, call.pref, 1, &result,
                                                    &found),
                     "choosing an algorithm");
            it = algos.emplace(key, LtAlgo{result.algo, result.workspaceSize,
                                           found > 0 && result.state == CUBLAS_STATUS_SUCCESS}).first;
        }
        algo = it->second;
    }
    if (!algo.found) return false;
    const float alpha = 1.0f, beta = 0.0f;
    std::optional<StreamBuffer> workspace;
    if (algo.workspace > 0) workspace.emplace(algo.workspace, stream, "the bias GEMM's workspace");
    check_lt(cublasLtMatmul(h, call.op, &alpha, b.data, call.a, a.data, call.b, &beta, c, call.c, c, call.c, &algo.algo,
                            workspace ? workspace->data() : nullptr, algo.workspace, stream),
             "the bias GEMM");
    return true;
}
#endif

}  // namespace

bool bias_epilogue_available() {
#if FLASHPORT_HAVE_GPU_BLAS && defined(FLASHPORT_GPU_CUDA)
    return backend() == Backend::VENDOR;
#else
    return false;
#endif
}

bool gemm_bias(void* c, int64_t ldc, DType dtype, int64_t m, int64_t n, int64_t k, const Operand& a, const Operand& b,
               const void* bias, void* stream) {
    FP_CHECK(bias_epilogue_available(), "the bias GEMM needs cuBLAS (a CUDA build with the vendor BLAS chosen)");
    FP_CHECK(dtype == DType::F16 || dtype == DType::BF16, "the bias GEMM takes fp16 or bf16, got ", dtype_name(dtype));
    FP_CHECK(m >= 0 && n >= 0 && k >= 0, "GEMM: negative size");
    if (m == 0 || n == 0) return true;
#if FLASHPORT_HAVE_GPU_BLAS && defined(FLASHPORT_GPU_CUDA)
    return gemm_bias_vendor(c, ldc, dtype, m, n, k, a, b, bias, as_stream(stream));
#else
    (void)c, (void)ldc, (void)k, (void)a, (void)b, (void)bias, (void)stream;
    return false;
#endif
}

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
