// The non-attention ops of a Qwen forward pass: RMSNorm, rotary embedding, SwiGLU, matmul (x·Wᵀ + b),
// embedding lookup and the residual add. Like attention, each op validates its views (a failed check
// throws flashport::Error naming the broken limit) and dispatches to a backend.
//
// Conventions shared by every op here:
// - Views have 1 to 4 dimensions. The innermost dimension must have unit stride (the kernels stream
//   rows); the outer dimensions may have any non-negative strides, so a slice of a bigger buffer (a
//   KV-cache row, one head of a fused QKV projection) needs no copy.
// - Any of fp32, fp16 and bf16 for each tensor. Arithmetic is fp32; where transformers rounds an
//   intermediate to the model dtype, so do we (each op says where), so bf16 results match PyTorch's
//   bit for bit up to fp32 rounding of sums and libm differences.
// - `out` may be the same view as an input (in place) unless the op says otherwise.
// - CPU or GPU: all views of one call on one device. On a GPU (a CUDA or HIP build) the op runs
//   asynchronously on `stream` (a cudaStream_t / hipStream_t; null: the default stream), with the
//   CPU's rounding points; it neither allocates nor synchronises, so it can be captured in a graph.
//   Index arrays (positions, ids) then live on that GPU too, so their values can't be checked on
//   the host: an out-of-range entry turns its rows of `out` into NaN instead of an error. The
//   device must be the current GPU. In a CPU-only build a GPU view is an error that says so.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "flashport/tensor.h"

namespace flashport {

// Integer indices (token ids, positions), which TensorView's float dtypes can't describe. A
// non-owning, contiguous array of int32 or int64.
struct IndexView {
    enum class Type : uint8_t { I32, I64 };
    const void* data = nullptr;
    Type type = Type::I32;
    int64_t size = 0;
    Device device;

    IndexView() = default;
    IndexView(const int32_t* p, int64_t n, Device d = Device::cpu()) : data(p), type(Type::I32), size(n), device(d) {}
    IndexView(const int64_t* p, int64_t n, Device d = Device::cpu()) : data(p), type(Type::I64), size(n), device(d) {}
    IndexView(std::span<const int32_t> s) : IndexView(s.data(), int64_t(s.size())) {}
    IndexView(std::span<const int64_t> s) : IndexView(s.data(), int64_t(s.size())) {}

    // Host access (CPU views only).
    int64_t operator[](int64_t i) const {
        return type == Type::I32 ? int64_t(static_cast<const int32_t*>(data)[i]) : static_cast<const int64_t*>(data)[i];
    }
};

// out = weight · round_x(x · rsqrt(mean(x²) + eps)), normalising over the last dimension.
//   x, out  [..., dim]   (out usually has x's dtype; another dtype gets the same value rounded once)
//   weight  [dim]
// As transformers' Qwen2RMSNorm / Qwen3RMSNorm (identical forward): x is upcast to fp32, the variance
// is the fp32 mean of squares, x is multiplied by 1/sqrt(var + eps) in fp32, *then cast to the input
// dtype*, and only then multiplied by the weight (`self.weight * hidden_states.to(input_dtype)`), a
// product PyTorch rounds to the promoted dtype (bf16 for a bf16 model). Qwen3's q_norm / k_norm are
// this op on [tokens, heads, head_dim] views.
void rms_norm(const TensorView& out, const TensorView& x, const TensorView& weight, float eps, void* stream = nullptr);

// The residual add fused with the next RMSNorm, as a decoder layer runs them:
//   residual_out = round(x + residual)         (add, rounded to residual_out's dtype)
//   out          = rms_norm(residual_out)      (rms_norm with weight and eps)
// Bit for bit the same as add(residual_out, x, residual) then rms_norm(out, residual_out, weight, eps);
// on the GPU one pass over the row instead of two launches. residual_out may be x or residual (in
// place); out may be x or residual but not residual_out.
//   x, residual, residual_out, out  [..., dim], one shape;  weight [dim]
void add_rms_norm(const TensorView& out, const TensorView& residual_out, const TensorView& x,
                  const TensorView& residual, const TensorView& weight, float eps, void* stream = nullptr);

// Rotary position embedding, half-split ("rotate_half") as transformers' Qwen2 apply_rotary_pos_emb:
//   out = round(round(x · cos) + round(rotate_half(x) · sin)),  rotate_half(x) = [-x2, x1]
// per head, with the angle of pair i at position p = p · inv_freq[i], inv_freq[i] = 1/theta^(2i/d)
// (d = rotary head_dim). cos and sin are computed in fp32 and rounded to x's dtype first, as
// Qwen2RotaryEmbedding returns `cos.to(x.dtype)`; round() is rounding to x's dtype.
//   x, out     [tokens, n_heads, head_dim]  or  [tokens, n_heads * head_dim] with params.head_dim set
//              or [batch, len, n_heads, head_dim] with positions of length batch · len (row-major)
//   positions  one per token, int32 or int64, >= 0 and < 2^24 (exact as fp32, as in transformers);
//              on the GPU a position outside that range makes its token's rows NaN
// GPU limit: head_dim <= 1024 (inv_freq travels in the kernel's arguments, computed by the host's
// powf so that angles match the CPU's bit for bit).
struct RopeParams {
    double theta = 10000.0;  // rope_theta from config.json
    int64_t head_dim = 0;    // 0: the last dimension of x; else it must divide it (packed heads)
};
void rope(const TensorView& out, const TensorView& x, const IndexView& positions, const RopeParams& params,
          void* stream = nullptr);

// out = round(round(silu(gate)) · up), silu(g) = g / (1 + exp(-g)) in fp32: transformers' Qwen2MLP
// `act_fn(gate_proj(x)) * up_proj(x)` rounds the activation to the model dtype before the product.
//   gate, up, out  [..., intermediate], one shape
void swiglu(const TensorView& out, const TensorView& gate, const TensorView& up, void* stream = nullptr);

// out = round(a + b) (the residual connection). a, b, out of one shape.
void add(const TensorView& out, const TensorView& a, const TensorView& b, void* stream = nullptr);

// out[t, n] = Σ_k x[t, k] · weight[n, k] (+ bias[n]): nn.Linear, accumulated in fp32, rounded once.
//   x       [tokens, in]
//   weight  [out, in]   (inner stride 1; any row stride)
//   bias    [out] or null
//   out     [tokens, out]   must not overlap x or weight
// GPU: one fp16/bf16 token runs a GEMV kernel that streams the weight (16-byte aligned rows, in a
// multiple of 8). GEMV asks for it with more tokens: 2 to 32 on the matrix-core GEMV where the GPU
// has matrix instructions for the dtype (NVIDIA sm_80+, AMD gfx908 fp16, gfx90a/94x), else up to
// GEMV_MAX_TOKENS on the CUDA-core kernel. The rest is one GEMM through the BLAS wrapper (cuBLAS / hipBLAS,
// or the portable GEMM where the build has no vendor BLAS). Its limits: x and weight share one dtype,
// out has x's dtype or fp32, a bias has out's dtype or out is fp32, rows do not overlap. Either way
// the sum plus bias is rounded once.
enum class MatmulImpl : uint8_t {
    AUTO,  // CPU: GEMV for up to GEMV_MAX_TOKENS tokens; GPU: for one eligible token. Else BLAS
    GEMV,  // streams the weight once per call (decode: bandwidth-bound). CPU: in its own dtype, 8
           // tokens at a time. GPU: an error when the product isn't eligible
    BLAS,  // CPU: weight converted to fp32 one tile of rows at a time, OpenBLAS sgemm (prefill:
           // compute-bound). GPU: the BLAS wrapper's GEMM
};
constexpr int64_t GEMV_MAX_TOKENS = 8;
const char* matmul_impl_name(MatmulImpl impl);

// Validates and names the kernel that would run ("cpu.matmul.gemv.avx512", "cpu.matmul.blas",
// "gpu.matmul.gemv", "gpu.matmul.gemv.mma", "gpu.matmul.blas", "gpu.matmul.portable-gemm"), without running it.
std::string plan_matmul(const TensorView& out, const TensorView& x, const TensorView& weight, const TensorView* bias,
                        MatmulImpl impl = MatmulImpl::AUTO);
std::string matmul(const TensorView& out, const TensorView& x, const TensorView& weight,
                   const TensorView* bias = nullptr, MatmulImpl impl = MatmulImpl::AUTO, void* stream = nullptr);

// ids[r] = the index of row r's first maximum, as torch.argmax (greedy decoding), or -1 when the row
// holds a NaN or +inf (a diverged forward pass: the caller reports it; -inf entries are fine).
//   x    [rows, n], n >= 1, any dtype (rows may be strided)
//   ids  rows int32 on x's device
// On a GPU greedy decoding then brings 4 bytes per sequence to the host instead of its logits.
void argmax(int32_t* ids, const TensorView& x, void* stream = nullptr);
// The same, given a workspace of argmax_workspace_bytes(x) bytes on x's device (null when 0): on a
// GPU a small batch (<= 64 rows) then spreads each row over many blocks instead of one (a 152k row:
// one block is one SM busy). Without it (or on the CPU, where the size is 0) as above. Graph-capturable;
// the workspace holds nothing between calls.
size_t argmax_workspace_bytes(const TensorView& x);
void argmax(int32_t* ids, const TensorView& x, void* workspace, size_t workspace_bytes, void* stream = nullptr);

// out[t, :] = table[ids[t], :]. An id outside [0, vocab) is an error naming the id and the vocab size
// (on the GPU, where ids live in device memory: a NaN row instead).
//   table  [vocab, hidden]
//   out    [tokens, hidden]  (any dtype: the row is converted)
void embedding(const TensorView& out, const TensorView& table, const IndexView& ids, void* stream = nullptr);

}  // namespace flashport
