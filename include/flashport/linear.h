// A decoder layer's projection together with what surrounds it, as one op:
//   h   = rms_norm(x, norm_weight, eps)        if norm_weight is set (rms_norm's rounding points), else x
//   y   = h · weightᵀ (+ bias)                 (matmul: fp32 sums, one rounding to out's dtype)
//   out = swiglu(y[:, :n], y[:, n:])           if swiglu: weight is [2n, in], gate rows then up rows
//       = round(residual + y)                  if residual is set (add; residual may be out itself)
//       = y                                    otherwise
// A Qwen layer is then four calls: qkv = linear(x; input norm, [q; k; v], biases), x = linear(attn;
// o_proj, residual x), act = linear(x; post-attention norm, [gate; up], swiglu), x = linear(act; down,
// residual x).
//
// Why one op: a decode step projects one token, and a separate norm, add or SwiGLU launch per
// projection costs more latency than its bytes (docs/perf.md, "GPU engine"). On a GPU one fp16/bf16
// token runs as a single GEMV kernel with the norm in its prologue and the add or SwiGLU in its
// epilogue (backends/gpu/linear.cu); anything else, and the CPU, runs the ops above one after the
// other through `workspace` (h, and y when it is not out). The fused kernel sums x's squares in
// another order than rms_norm, so its h may differ from the composition's by one unit in the last
// place where the scale lands next to a rounding boundary, as the GPU's rms_norm differs from the
// CPU's.
//
// Shapes: x [tokens, in]; weight [rows, in] (any row stride); bias [rows]; norm_weight [in];
// out and residual [tokens, rows] ([tokens, rows / 2] with swiglu). out must not overlap x or weight.
// dtypes and devices: as matmul, rms_norm, add and swiglu take them (flashport/ops.h).
#pragma once

#include <cstddef>
#include <string>

#include "flashport/ops.h"
#include "flashport/tensor.h"

namespace flashport {

struct LinearParams {
    const TensorView* bias = nullptr;
    const TensorView* norm_weight = nullptr;  // RMSNorm of x first
    float eps = 1e-6f;                        // the norm's epsilon
    const TensorView* residual = nullptr;     // out = round(residual + y); not with swiglu
    bool swiglu = false;                      // weight = [gate; up]
    MatmulImpl impl = MatmulImpl::AUTO;       // the product's kernel, as matmul takes it
    // The weight (and bias) are not written by any work still queued on the stream: a model's
    // weights. Lets the GPU GEMV request its first weight vectors before the kernel ahead of it has
    // finished (NVIDIA sm_90+, runtime.h's launch_dependent); leave false for a weight that an
    // earlier kernel computes.
    bool constant_weight = false;
};

// Bytes of workspace `linear` needs for these views (0 when it runs as one fused kernel).
size_t linear_workspace_bytes(const TensorView& out, const TensorView& x, const TensorView& weight,
                              const LinearParams& params);

// Returns the kernel that ran, spelled with the op's name: "gpu.linear.gemv" (the fused kernel), or
// "<cpu|gpu>.linear.composed(<parts>)" naming the composition's ops and matmul kernel
// ("cpu.linear.composed(rms_norm+cpu.matmul.blas+add)"). Throws when the workspace is smaller than
// linear_workspace_bytes.
std::string linear(const TensorView& out, const TensorView& x, const TensorView& weight, const LinearParams& params,
                   void* workspace = nullptr, size_t workspace_bytes = 0, void* stream = nullptr);

}  // namespace flashport
