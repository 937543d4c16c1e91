// Attention: out = softmax(scale · q kᵀ + mask) v, per batch and head.
//
// Layout (FlashAttention's order; any strides, so PyTorch's [batch, heads, len, dim] needs no copy):
//   q   [batch, q_len,  n_heads,    head_dim]
//   k,v [batch, kv_len, n_kv_heads, head_dim]      n_heads % n_kv_heads == 0 (GQA / MQA)
//   out [batch, q_len,  n_heads,    head_dim]      same dtype as q
//   lse [batch, n_heads, q_len]  fp32, optional: natural-log log-sum-exp of each row's scaled scores
//
// Causal masking is bottom-right aligned, as in a KV cache: query i sees key j when
// j <= i + (kv_len - q_len). A row that sees no key outputs zeros and an LSE of -inf.
// window_left >= 0 additionally hides keys more than window_left positions left of that diagonal.
#pragma once

#include <cstdint>
#include <string>

#include "flashport/tensor.h"

namespace flashport {

enum class AttentionImpl : uint8_t {
    AUTO,   // the fastest supported implementation
    NAIVE,  // materialises the [batch, n_heads, q_len, kv_len] scores: BMM -> softmax -> BMM
    FLASH,  // tiled with an online softmax; O(N) extra memory
};

const char* impl_name(AttentionImpl impl);
AttentionImpl parse_impl(const std::string& name);  // "auto", "naive", "flash"

struct AttentionParams {
    float scale = 0.0f;         // 0 means 1/sqrt(head_dim)
    bool causal = false;
    int64_t window_left = -1;   // -1: unlimited
    AttentionImpl impl = AttentionImpl::AUTO;
};

// The shape of one call, read off the views.
struct AttentionShape {
    int64_t batch = 0, q_len = 0, kv_len = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
};

// The kernel a plan runs. attention() dispatches on it; AttentionPlan::kernel spells it out for people.
enum class AttentionKernel : uint8_t {
    CPU_NAIVE,           // OpenBLAS BMM -> softmax -> BMM
    CPU_FLASH,           // tiled online softmax, micro-kernels for the best ISA of this CPU
    GPU_NAIVE,           // BLAS (or the portable GEMM) around a softmax kernel
    GPU_FLASH_PORTABLE,  // FP32-FMA flash kernel: CUDA and HIP
    GPU_FLASH_MMA,       // tensor-core flash kernel: CUDA, sm_80 and newer
    GPU_FLASH_MFMA,      // matrix-core flash kernel (AMD CDNA MFMA): only in builds that have it
    GPU_FLASH_DOT2,      // fp16 flash kernel on v_dot2_f32_f16 (AMD gfx906): only in builds that have it
    GPU_FLASH_SPLIT_KV,  // a few query rows against a long KV: each KV head's keys cut into slices that
                         // run in parallel and merge by their LSEs (FlashDecoding; the paged decode
                         // kernels reading the dense K and V in place)
    GPU_FLASH_WGMMA,     // warpgroup-MMA flash kernel (Hopper, sm_90a): CUDA builds on compute capability
                         // 9.0, when asked for (FLASHPORT_GPU_FLASH=wgmma)
};

// What will run. Produced by plan_attention, the single place that decides both whether a request is
// supported and which kernel serves it, so the two can never disagree.
struct AttentionPlan {
    AttentionShape shape;
    AttentionParams params;  // resolved: scale is set and impl is never AUTO
    Device device;
    AttentionKernel route = AttentionKernel::CPU_FLASH;
    std::string kernel;  // route's name with its specifics, e.g. "cpu.flash.avx512", "gpu.flash.mma.d128"
};

// Validates the request and picks the kernel. Throws flashport::Error naming the broken limit.
AttentionPlan plan_attention(const TensorView& out, const TensorView& q, const TensorView& k,
                             const TensorView& v, const TensorView* lse, const AttentionParams& params);

// Plans and runs. `stream` is the GPU stream (ignored on the CPU). On a GPU, a few query rows (1 to 8)
// against a long KV (gpu.flash.split_kv) split the keys over the SMs and take a small stream-ordered
// allocation for the table and the splits' partials (freed on the stream); every other flash call
// allocates nothing.
AttentionPlan attention(const TensorView& out, const TensorView& q, const TensorView& k, const TensorView& v,
                        const TensorView* lse = nullptr, const AttentionParams& params = {},
                        void* stream = nullptr);

}  // namespace flashport
