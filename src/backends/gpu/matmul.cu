// matmul on the GPU: out = x · weightᵀ (+ bias), fp32 accumulation, rounded once to out's dtype.
// Single-token products (fp16/bf16) run the GEMV kernel (linear.cu), which streams the weight and
// adds the bias in its epilogue; the rest is one GEMM through the BLAS wrapper (blas.h:
// cuBLAS / hipBLAS, or its portable kernel).
//
// The bias: rounding once means round(Σ + bias), not round(round(Σ) + bias), so the bias can't be
// added by a kernel after a GEMM that has already rounded into a 16-bit out. Two ways:
// - the portable GEMM and fp32 outs: bias_rows_kernel writes the bias into every row of out and the
//   GEMM accumulates onto it (beta = 1), computing Σ + bias in fp32 and rounding once. Exact when the
//   bias is representable in out's dtype, hence the rule that a bias has out's dtype or out is fp32.
// - cuBLAS into a 16-bit out: cuBLASLt's bias epilogue adds the bias to the fp32 sums and rounds once
//   (blas::gemm_bias). Where it is not available (or FLASHPORT_MATMUL_BIAS=staged): cuBLAS's beta = 1
//   path does not round once (measured on the H200: 30% of bf16 elements one ulp off the CPU's
//   round(Σ + bias), which a 2-layer Qwen2 amplified to twice transformers' own bf16 error), so the
//   GEMM writes fp32 into a staging buffer and
//   bias_round_kernel writes round(Σ + bias), the CPU's epilogue. The staging buffer (tokens · n_out
//   fp32) is stream-ordered (cudaMallocAsync / hipMallocAsync from the device's pool): no
//   synchronisation, capturable in a graph, freed as soon as the epilogue has run; being transient
//   and pooled, it is outside the tracked allocator's counts.
#include <cstdlib>
#include <cstring>

#include "backends/gpu/blas.h"
#include "backends/gpu/ops_common.cuh"
#include "backends/gpu/ops_gpu.h"

namespace flashport::gpu {
namespace {

using namespace ops;

constexpr int THREADS = 256;

// out[t, n] = bias[n] for every row t, converted to out's dtype.
__global__ void __launch_bounds__(THREADS) bias_rows_kernel(char* out, DType out_dtype, int64_t out_stride,
                                                            const void* bias, DType bias_dtype, int64_t tokens,
                                                            int64_t n_out) {
    const int esize = out_dtype == DType::F32 ? 4 : 2;
    for (int64_t t = blockIdx.y; t < tokens; t += gridDim.y) {
        char* row = out + t * out_stride * esize;
        for (int64_t n = int64_t(blockIdx.x) * THREADS + threadIdx.x; n < n_out; n += int64_t(gridDim.x) * THREADS)
            store(row, out_dtype, n, load(bias, bias_dtype, n));
    }
}

// out[t, n] = round(c[t, n] + bias[n]) with c fp32 [tokens, n_out] (contiguous). VECTOR: VEC columns a
// thread with vector loads and stores (n_out, out's row stride and the pointers aligned for them); the
// element-wise form ran at ~0.8 TB/s on an H200 for a 2048-token prefill's qkv.
template <bool VECTOR>
__global__ void __launch_bounds__(THREADS) bias_round_kernel(char* out, DType out_dtype, int64_t out_stride,
                                                             const float* c, const void* bias, DType bias_dtype,
                                                             int64_t tokens, int64_t n_out) {
    constexpr int W = VECTOR ? VEC : 1;
    const int esize = out_dtype == DType::F32 ? 4 : 2;
    for (int64_t t = blockIdx.y; t < tokens; t += gridDim.y) {
        char* row = out + t * out_stride * esize;
        const float* crow = c + t * n_out;
        for (int64_t n = (int64_t(blockIdx.x) * THREADS + threadIdx.x) * W; n < n_out;
             n += int64_t(gridDim.x) * THREADS * W) {
            if constexpr (VECTOR) {
                float v[VEC], b[VEC];
                load_vec(crow, DType::F32, n, v);
                load_vec(bias, bias_dtype, n, b);
#pragma unroll
                for (int j = 0; j < VEC; ++j) v[j] += b[j];
                store_vec(row, out_dtype, n, v);
            } else {
                store(row, out_dtype, n, crow[n] + load(bias, bias_dtype, n));
            }
        }
    }
}

// A BLAS leading dimension for a [rows, cols] view: its row stride, or the row length when there is
// only one row (its stride is then never used and may be anything); at least 1, as the BLAS demands.
int64_t leading_dim(const TensorView& t) {
    return std::max<int64_t>(1, t.dim(0) <= 1 ? t.dim(1) : t.stride[0]);
}

bool blas_forced_by_env() {
    static const bool forced = [] {
        const char* env = std::getenv("FLASHPORT_GPU_MATMUL");
        return env && std::strcmp(env, "blas") == 0;
    }();
    return forced;
}

// Row-major out [tokens, n_out] = x [tokens, in] · op(B) + beta · out, B = weight [n_out, in] read
// transposed: one BLAS GEMM.
void gemm_rows(const TensorView& out, const TensorView& x, const TensorView& weight, float beta, void* stream) {
    blas::gemm(out.data, leading_dim(out), 0, out.dtype, x.dtype, x.dim(0), weight.dim(0), x.dim(1), 1.0f, beta,
               {x.data, leading_dim(x), 0, false}, {weight.data, leading_dim(weight), 0, true}, 1, stream);
}

// A 16-bit out's bias in cuBLASLt's epilogue (blas::gemm_bias: round(Σ + bias), one rounding, no fp32
// staging and no bias_round launch), where the build has it, the inputs and out share the dtype, the
// sum is not empty, and every operand's rows are 16-byte aligned (base, row length and row stride in
// whole 8-element vectors), unless FLASHPORT_MATMUL_BIAS=staged (the A/B switch of docs/perf.md's "the
// bias in the GEMM's epilogue"). The alignment rule is measured, not cautious: on the H200 (CUDA 13)
// the heuristic's algorithms for rows shifted by one element or padded by four gave sums 2-8 ulps off
// although the heuristic was told the operands' alignment.
bool bias_in_epilogue(const TensorView& out, const TensorView& x, const TensorView& weight, const TensorView& bias) {
    static const bool staged = [] {
        const char* env = std::getenv("FLASHPORT_MATMUL_BIAS");
        return env && std::strcmp(env, "staged") == 0;
    }();
    return !staged && blas::bias_epilogue_available() && blas::backend_for(x.dtype) == blas::Backend::VENDOR &&
           out.dtype == x.dtype && bias.dtype == out.dtype && x.dim(1) > 0 && vec_aligned(out, 8) &&
           vec_aligned(x, 8) && vec_aligned(weight, 8) && vec_aligned(bias, 8);
}

// GEMV or a BLAS GEMM (the caller has checked the common rules).
bool use_gemv(const TensorView& x, const TensorView& weight, MatmulImpl impl) {
    if (impl == MatmulImpl::BLAS) return false;
    // AUTO: one token only. At 8 tokens the FMA GEMV measured slower than cuBLAS, and the matrix-core
    // GEMV no faster inside the engine's graphs (slower at 16 and 32: docs/perf.md, "A matrix-core
    // GEMV for batched decode"), so it runs when asked for (impl GEMV). Decided before the
    // eligibility text is built, which prefill-sized products would otherwise pay for per call.
    if (impl == MatmulImpl::AUTO)
        return x.dim(0) == 1 && !blas_forced_by_env() && gemv_ineligible_reason(x, weight).empty();
    const std::string why_not = gemv_ineligible_reason(x, weight);
    FP_CHECK(why_not.empty(), "matmul on GPU: impl gemv can't take this product: ", why_not);
    return true;
}

}  // namespace

bool use_linear_gemv(const TensorView& out, const TensorView& x, const TensorView& weight, const LinearParams& p) {
    check_current_device("linear", x.device);
    // One token under AUTO or GEMV; more only when the GEMV is asked for (as matmul's AUTO).
    if (p.impl == MatmulImpl::BLAS || blas_forced_by_env()) return false;
    if (x.dim(0) != 1 && p.impl != MatmulImpl::GEMV) return false;
    return linear_gemv_ineligible_reason(out, x, weight, p).empty();
}

std::string plan_matmul(const TensorView& out, const TensorView& x, const TensorView& weight, const TensorView* bias,
                        MatmulImpl impl) {
    check_current_device("matmul", x.device);
    FP_CHECK(weight.dtype == x.dtype, "matmul on GPU: x and weight must share one dtype (the BLAS takes one input ",
             "type), got x ", dtype_name(x.dtype), " and weight ", dtype_name(weight.dtype));
    FP_CHECK(out.dtype == x.dtype || out.dtype == DType::F32, "matmul on GPU: out must be ", dtype_name(x.dtype),
             " (x's dtype) or fp32, got ", dtype_name(out.dtype));
    if (bias)
        FP_CHECK(bias->dtype == out.dtype || out.dtype == DType::F32, "matmul on GPU: bias must have out's dtype (",
                 dtype_name(out.dtype), ") or out must be fp32, so that the bias is added before the one rounding; ",
                 "got bias ", dtype_name(bias->dtype));
    for (const auto& [t, name] : {std::pair{&x, "x"}, {&weight, "weight"}, {&out, "out"}})
        FP_CHECK(t->dim(0) <= 1 || t->stride[0] >= t->dim(1), "matmul on GPU: the rows of ", name,
                 " must not overlap (row stride >= row length), got ", t->describe());
    if (use_gemv(x, weight, impl)) return std::string("gpu.matmul.") + gemv_kernel_name(x.dtype, x.dim(0));
    return std::string("gpu.matmul.") + blas::gemm_name(x.dtype);
}

void matmul(const TensorView& out, const TensorView& x, const TensorView& weight, const TensorView* bias,
            MatmulImpl impl, void* stream) {
    const int64_t tokens = x.dim(0), in = x.dim(1), n_out = weight.dim(0);
    if (tokens == 0 || n_out == 0) return;
    if (use_gemv(x, weight, impl)) {
        gemv(out, x, weight, bias, stream);
        return;
    }
    const dim3 grid(grid_size(ceil_div(n_out, THREADS)), grid_size(tokens));
    if (bias && out.dtype != DType::F32 && bias_in_epilogue(out, x, weight, *bias) &&
        blas::gemm_bias(out.data, leading_dim(out), out.dtype, tokens, n_out, in, {x.data, leading_dim(x), 0, false},
                        {weight.data, leading_dim(weight), 0, true}, bias->data, stream))
        return;
    if (bias && out.dtype != DType::F32 && blas::backend_for(x.dtype) == blas::Backend::VENDOR) {
        const size_t bytes = size_t(tokens * n_out) * sizeof(float);
        const StreamBuffer staging(bytes, as_stream(stream), "matmul: the fp32 staging for the bias");
        void* staged = staging.data();
        blas::gemm(staged, n_out, 0, DType::F32, x.dtype, tokens, n_out, in, 1.0f, 0.0f,
                   {x.data, leading_dim(x), 0, false}, {weight.data, leading_dim(weight), 0, true}, 1, stream);
        const bool vector = n_out % VEC == 0 && vec_aligned(out) && vec_aligned(*bias);  // staged: cudaMallocAsync
        const dim3 round_grid(grid_size(ceil_div(n_out, THREADS * (vector ? VEC : 1))), grid_size(tokens));
        const auto kernel = vector ? bias_round_kernel<true> : bias_round_kernel<false>;
        launch_kernel(kernel, round_grid, THREADS, 0, as_stream(stream), static_cast<char*>(out.data), out.dtype,
                      out.stride[0], static_cast<const float*>(staged), bias->data, bias->dtype, tokens, n_out);
        FP_GPU_CHECK_LAUNCH("matmul bias");
        return;
    }
    float beta = 0.0f;
    if (bias) {
        launch_kernel(bias_rows_kernel, grid, THREADS, 0, as_stream(stream), static_cast<char*>(out.data), out.dtype,
                      out.stride[0], bias->data, bias->dtype, tokens, n_out);
        FP_GPU_CHECK_LAUNCH("matmul bias");
        beta = 1.0f;
    }
    gemm_rows(out, x, weight, beta, stream);
}

// cuBLAS only. Its beta path rounds the product before adding C (measured for the bias, above), so the
// result is the composition's round(residual + round(Σ)), and a batch's tokens keep the bits of the
// one-token GEMV: batched decode picks the same tokens as single decode (EngineGpuBatch passed on the
// H200 with it). flashport's own GEMMs (portable, MFMA) round once, round(residual + Σ): nearer the
// float64 chain, but not those bits, and at wave64 a batched greedy decode parted from the single one
// after 14 tokens. hipBLAS's rounding is unmeasured (no AMD GPU here), so HIP builds compose.
bool residual_in_gemm_available(DType dtype) {
#if defined(FLASHPORT_GPU_CUDA)
    return blas::backend_for(dtype) == blas::Backend::VENDOR;
#else
    (void)dtype;
    return false;
#endif
}

bool matmul_accumulate_serves(const TensorView& out, const TensorView& x, const TensorView& weight,
                              const TensorView& residual, const TensorView* bias, MatmulImpl impl) {
    if (!residual_in_gemm_available(x.dtype)) return false;
    const bool one_view = residual.data == out.data && residual.dtype == out.dtype &&
                          residual.stride[0] == out.stride[0] && residual.stride[1] == out.stride[1];
    // impl GEMV never reaches the BLAS (use_gemv throws where the GEMV can't take the product).
    return one_view && !bias && impl != MatmulImpl::GEMV && !use_gemv(x, weight, impl);
}

std::string matmul_accumulate(const TensorView& out, const TensorView& x, const TensorView& weight, void* stream) {
    std::string name = gpu::plan_matmul(out, x, weight, nullptr, MatmulImpl::BLAS) + ".accumulate";  // its checks
    if (x.dim(0) > 0 && weight.dim(0) > 0) gemm_rows(out, x, weight, 1.0f, stream);
    return name;
}

}  // namespace flashport::gpu
