// A decoder layer's projection together with what surrounds it, as one op:
//   h   = rms_norm(x, norm_weight, eps)        if norm_weight is set (rms_norm's rounding points), else x
//   y   = h · weightᵀ (+ bias)                 (matmul: fp32 sums, one rounding to out's dtype)
//   out = swiglu(y[:, :n], y[:, n:])           if swiglu: weight is [2n, in], gate rows then up rows
//       = round(residual + y)                  if residual is set (add; residual may be out itself)
//       = y                                    otherwise
//   then, if rope_cache is set (the qkv projection): out = [q | k | v] per token; q and k rotated in
//   place and k, v written to the paged cache, as rope_qk_cache_write (flashport/paged_cache.h) on
//   out's three views: the same bits
// A Qwen layer is then four calls: qkv = linear(x; input norm, [q; k; v], biases, rope_cache), x = linear(attn;
// o_proj, residual x), act = linear(x; post-attention norm, [gate; up], swiglu), x = linear(act; down,
// residual x).
//
// Why one op: a decode step projects one token, and a separate norm, add or SwiGLU launch per
// projection costs more latency than its bytes (docs/perf.md, "GPU engine"). On a GPU one fp16/bf16
// token runs as a single GEMV kernel with the norm in its prologue and the add or SwiGLU in its
// epilogue (backends/gpu/linear.cu); with impl GEMV, a batch of up to 32 decode tokens runs the
// matrix-core GEMV with the add or SwiGLU in its epilogue (backends/gpu/linear_tc.cuh) where the GPU
// has matrix instructions for the dtype; anything else, and the CPU, runs the ops above one after
// the other through `workspace` (h, and y when it is not out). On cuBLAS with out the residual itself
// (x += o_proj(attn) at 2+ tokens), the GEMM adds the product onto out (beta = 1): no add launch, with
// the composition's bits (cuBLAS rounds the product before adding, as measured on the H200). The
// fused kernel sums x's squares in another order than rms_norm, so its h may differ from the
// composition's by one unit in the last place where the scale lands next to a rounding boundary, as
// the GPU's rms_norm differs from the CPU's.
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

// RoPE and the KV-cache write after a qkv projection (LinearParams::rope_cache): out's row of a token
// is its q heads, then its k heads, then its v heads, [n_heads + 2 · n_kv_heads, head_dim] with
// head_dim the caches' last dimension. positions and slots (one per token) and the caches are
// rope_qk_cache_write's and follow its rules (bad positions, skipped slots).
struct RopeCacheWrite {
    int64_t n_heads = 0, n_kv_heads = 0;
    RopeParams rope;  // rope.head_dim: 0 or the caches' head_dim
    IndexView positions, slots;
    TensorView k_cache, v_cache;  // [num_blocks, block_size, n_kv_heads, head_dim]
};

// The most tokens `impl` GEMV takes on a GPU whose matrix instructions cover the dtype (the
// matrix-core GEMV; elsewhere the FMA GEMV's 8): 4 NVIDIA m16n8k16 or 2 AMD 16x16x16 token tiles.
inline constexpr int64_t LINEAR_GEMV_MAX_TOKENS = 32;

struct LinearParams {
    const TensorView* bias = nullptr;
    const TensorView* norm_weight = nullptr;  // RMSNorm of x first
    float eps = 1e-6f;                        // the norm's epsilon
    const TensorView* residual = nullptr;     // out = round(residual + y); not with swiglu
    bool swiglu = false;                      // weight = [gate; up]
    const RopeCacheWrite* rope_cache = nullptr;  // RoPE on out's q, k and the cache write; not with
                                                 // swiglu or a residual
    MatmulImpl impl = MatmulImpl::AUTO;       // the product's kernel, as matmul takes it
    // One 16-bit token on a GPU with a norm: fold the norm into the GEMV's prologue (one launch)
    // instead of running rms_norm into the workspace first. Off by default: on the H200 the
    // prologue's x and gamma registers slow the weight stream by more than a launch costs (Qwen-7B's
    // gate_up 72.9 µs fused against 64.5 µs apart; docs/perf.md, "the norm apart").
    bool norm_in_prologue = false;
    // The weight, bias and norm weight are not written by any work still queued on the stream: a
    // model's weights. Lets the GPU GEMV request its first weight vectors before the kernel ahead of
    // it has finished (NVIDIA sm_90+, runtime.h's launch_dependent); leave false for a weight that
    // an earlier kernel computes.
    bool constant_weight = false;
    // A GPU GEMM with out the residual itself adds the product onto out (beta = 1) instead of writing
    // y and launching add. false keeps the add: the A/B switch of docs/perf.md ("the residual in the
    // GEMM").
    bool residual_in_gemm = true;
};

// Bytes of workspace `linear` needs for these views (0 when it runs as one fused kernel).
size_t linear_workspace_bytes(const TensorView& out, const TensorView& x, const TensorView& weight,
                              const LinearParams& params);

// Returns the kernel that ran, spelled with the op's name: "gpu.linear.gemv" (one GEMV launch, with
// the norm in its prologue when norm_in_prologue), "gpu.linear.rms_norm+gemv" (the norm's launch, then
// the GEMV with its epilogue), "gpu.linear.gemv.mma" / "gpu.linear.gemv.mfma" and their
// "rms_norm+" forms (2 to 32 tokens with impl GEMV on the matrix-core GEMV: NVIDIA sm_80+, AMD MFMA;
// the norm always in its own launch), or
// "<cpu|gpu>.linear.composed(<parts>)" naming the composition's ops and matmul kernel
// ("cpu.linear.composed(rms_norm+cpu.matmul.blas+add)"). Throws when the workspace is smaller than
// linear_workspace_bytes.
std::string linear(const TensorView& out, const TensorView& x, const TensorView& weight, const LinearParams& params,
                   void* workspace = nullptr, size_t workspace_bytes = 0, void* stream = nullptr);

}  // namespace flashport
