// The GPU kernels of the ops in flashport/ops.h, as src/ops/*.cpp sees them. Compiled only in CUDA
// and HIP builds (FLASHPORT_GPU). The op layer has already checked shapes, strides and that every
// view is on one GPU; these functions check what only the GPU needs (that device exists and is the
// current one, the GPU-specific limits), then launch on `stream` without allocating or synchronising.
// One file per op family: norm.cu, rope.cu, activation.cu, embedding.cu, matmul.cu, argmax.cu,
// sample.cu.
#pragma once

#include <string>

#include "flashport/linear.h"
#include "flashport/ops.h"
#include "flashport/sample.h"
#include "flashport/tensor.h"

namespace flashport::gpu {

// residual_out is null for plain rms_norm; else residual_out = round(x + residual) is normalised.
void rms_norm(const TensorView& out, const TensorView* residual_out, const TensorView& x, const TensorView* residual,
              const TensorView& weight, float eps, void* stream);
// x, out: [..., n_heads, head_dim] (3 or 4 dims), as cpu::rope takes them.
void rope(const TensorView& out, const TensorView& x, const IndexView& positions, double theta, void* stream);
void swiglu(const TensorView& out, const TensorView& gate, const TensorView& up, void* stream);
void add(const TensorView& out, const TensorView& a, const TensorView& b, void* stream);
void embedding(const TensorView& out, const TensorView& table, const IndexView& ids, void* stream);
void argmax(int32_t* ids, const TensorView& x, void* stream);  // one block per row
// Split over blocks for small batches when the workspace holds argmax_workspace_bytes (else as above).
size_t argmax_workspace_bytes(int64_t rows, int64_t n);
void argmax(int32_t* ids, const TensorView& x, void* workspace, size_t workspace_bytes, void* stream);
// sample.cu: the workspace of a [rows, vocab] sample, the sample, and mark_seen.
size_t sample_workspace_bytes(int64_t rows, int64_t vocab);
void sample(int32_t* ids, const TensorView& x, const SampleParams* params, const SeenSets& seen, void* workspace,
            void* stream);
void mark_seen(const SeenSets& seen, const IndexView& ids, const int32_t* slots, void* stream);

// Checks the GPU limits of a matmul and names its kernel: "gpu.matmul.gemv" (linear.cu's kernel),
// "gpu.matmul.blas" or "gpu.matmul.portable-gemm". AUTO takes the GEMV for one eligible token, unless
// FLASHPORT_GPU_MATMUL=blas is set (same-run comparisons); GEMV demands it (1-8 tokens) and says why
// when it can't.
std::string plan_matmul(const TensorView& out, const TensorView& x, const TensorView& weight, const TensorView* bias,
                        MatmulImpl impl);
void matmul(const TensorView& out, const TensorView& x, const TensorView& weight, const TensorView* bias,
            MatmulImpl impl, void* stream);

// linear's residual folded into the GEMM (matmul.cu): out = out + x · weightᵀ as one BLAS call with
// beta = 1, where out is the residual itself (the decoder's x += o_proj(attn), x += down(act) at 2+
// tokens). It saves the add's launch and the product's round trip through the workspace ([tokens,
// rows] written, then read twice). Serves on cuBLAS only, whose beta path rounds Σ before adding C,
// so the result keeps the composition's bits, round(residual + round(Σ)) (matmul.cu says why that
// matters), where the BLAS GEMM would run the product (not the GEMV), out and residual are one view
// (same data, dtype and strides) and there is no bias. matmul_accumulate returns the kernel's name,
// e.g. "gpu.matmul.blas.accumulate".
bool residual_in_gemm_available(DType dtype);  // CUDA builds, cuBLAS chosen for these inputs
bool matmul_accumulate_serves(const TensorView& out, const TensorView& x, const TensorView& weight,
                              const TensorView& residual, const TensorView* bias, MatmulImpl impl);
std::string matmul_accumulate(const TensorView& out, const TensorView& x, const TensorView& weight, void* stream);

// The GEMV kernels (linear.cu): one token on the FMA GEMV; 2 to GEMV_TC_MAX_TOKENS (linear_gemv.h) on
// the matrix-core GEMV where the current device's matrix instructions take the dtype
// (gemv_tc_serves: NVIDIA sm_80+, AMD gfx908 fp16 / gfx90a and gfx94x fp16 and bf16), else up to
// GEMV_MAX_TOKENS on the FMA GEMV. gemv_kernel_name: "gemv", "gemv.mma" or "gemv.mfma".
constexpr int64_t GEMV_TC_MAX_TOKENS = LINEAR_GEMV_MAX_TOKENS;  // flashport/linear.h
bool gemv_tc_serves(DType dtype);
const char* gemv_kernel_name(DType dtype, int64_t tokens);
// Empty when the GEMV kernels can take this product, else why not.
std::string gemv_ineligible_reason(const TensorView& x, const TensorView& weight);
void gemv(const TensorView& out, const TensorView& x, const TensorView& weight, const TensorView* bias, void* stream);

// linear (flashport/linear.h) on a GEMV kernel with its residual / SwiGLU (and for one token its norm
// or RoPE) fused: whether it runs so (eligible tokens, impl not BLAS, FLASHPORT_GPU_MATMUL not
// "blas"), why it can't, and the launch, which returns gemv_kernel_name's. More than one token takes
// x already normalised. Anything else is composed of the plain ops by the op layer.
bool use_linear_gemv(const TensorView& out, const TensorView& x, const TensorView& weight, const LinearParams& p);
std::string linear_gemv_ineligible_reason(const TensorView& out, const TensorView& x, const TensorView& weight,
                                          const LinearParams& p);
const char* linear_gemv(const TensorView& out, const TensorView& x, const TensorView& weight, const LinearParams& p,
                        void* stream);

}  // namespace flashport::gpu
