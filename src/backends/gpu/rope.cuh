// RoPE's arithmetic on the GPU, shared by rope (rope.cu) and rope_qk_cache_write
// (rope_cache.cu), so the fused op is the plain one's bits by construction:
//   inv_freq[i] = 1 / theta^(2i/d)                 host powf (rope_inv_freq)
//   angle       = inv_freq[i] · float(pos)         fp32, mul_rn
//   c, s        = round_x(cos(angle)), round_x(sin(angle))      in double, rounded once to fp32
//   o1          = round_x(round_x(x1 · c) − round_x(x2 · s))    x1 = x[i], x2 = x[i + d/2]
//   o2          = round_x(round_x(x2 · c) + round_x(x1 · s))
// backends/cpu/rope.cpp has the same rounding points; rope.cu says why each is where it is.
#pragma once

#include <cmath>

#include "backends/gpu/ops_common.cuh"
#include "backends/gpu/view_strides.h"
#include "flashport/ops.h"

// HIP 5.2's __fmul_rn is a plain product, so contraction must be off wherever x·c − x'·s is written
// (mul_rn in ops_common.cuh). At file scope, so it covers this header's functions and the file that
// includes it.
#if defined(FLASHPORT_GPU_HIP)
#pragma clang fp contract(off)
#endif

namespace flashport::gpu::ops {

// head_dim <= 1024: inv_freq (2 KB) travels in the kernel arguments, within the 4 KB limit.
constexpr int ROPE_MAX_HALF = 512;
// Positions are exact in fp32 up to 2^24 (transformers' position_ids.float()); beyond, NaN rows.
constexpr int64_t ROPE_MAX_POSITION = int64_t(1) << 24;

// The GPU limits of a RoPE over n_heads rows of head_dim per token (`op` names the op in the message):
// the kernels index a token's (head, pair) in 32 bits.
inline void check_rope_limits(const char* op, int64_t n_heads, int64_t head_dim, const TensorView& x) {
    FP_CHECK(head_dim <= 2 * ROPE_MAX_HALF, op, " on GPU supports head_dim up to ", 2 * ROPE_MAX_HALF, ", got ",
             head_dim);
    FP_CHECK(n_heads * head_dim <= 0x7fffffff, op, " on GPU: heads · head_dim must fit in 32 bits, got ", x.describe());
}

// The CPU kernel's expression, evaluated by the same libm (backends/cpu/rope.cpp): a GPU pow differs
// in the last bit, which at position 10^6 moves the angle by ~0.06 rad.
inline void rope_inv_freq(float* inv_freq, int64_t head_dim, double theta) {
    const float base = float(theta);
    for (int64_t i = 0; i < head_dim / 2; ++i) inv_freq[i] = 1.0f / std::pow(base, float(2 * i) / float(head_dim));
}

// Where RoPE and the cache write take a token's k and v, as both kernels that do it take it
// (rope_qk_cache_write's, and the qkv GEMV's epilogue in linear.cu): the paged caches, the tokens'
// positions and slots, the heads and the rotation's table. Each kernel's arguments derive from it.
struct RopeCacheTarget {
    char* k_cache;
    char* v_cache;
    int64_t kc_stride[3], vc_stride[3];  // bytes: (block, slot, head)
    const void* positions;
    const void* slots;
    bool positions_64, slots_64;
    int64_t block_size, capacity;  // capacity: num_blocks · block_size slots
    int n_heads, n_kv_heads, half;
    float inv_freq[ROPE_MAX_HALF];
};

// The target of n_heads q heads and n_kv_heads k and v heads of k_cache's head_dim; the caller has
// checked the views (rope_qk_cache_write's rules) and the limits (check_rope_limits).
inline RopeCacheTarget rope_cache_target(const TensorView& k_cache, const TensorView& v_cache,
                                         const IndexView& positions, const IndexView& slots, int64_t n_heads,
                                         int64_t n_kv_heads, double theta) {
    RopeCacheTarget t{};
    const int64_t head_dim = k_cache.dim(3), es = int64_t(dtype_size(k_cache.dtype));
    t.k_cache = static_cast<char*>(k_cache.data);
    t.v_cache = static_cast<char*>(v_cache.data);
    copy_strides(t.kc_stride, &k_cache, es);
    copy_strides(t.vc_stride, &v_cache, es);
    t.positions = positions.data;
    t.slots = slots.data;
    t.positions_64 = positions.type == IndexView::Type::I64;
    t.slots_64 = slots.type == IndexView::Type::I64;
    t.block_size = k_cache.dim(1);
    t.capacity = k_cache.dim(0) * t.block_size;
    t.n_heads = int(n_heads);
    t.n_kv_heads = int(n_kv_heads);
    t.half = int(head_dim / 2);
    rope_inv_freq(t.inv_freq, head_dim, theta);
    return t;
}

// Entry i of an int32 or int64 index array (positions, slots) in device memory.
__device__ __forceinline__ int64_t load_index(const void* p, bool is_64, int64_t i) {
    return is_64 ? static_cast<const int64_t*>(p)[i] : int64_t(static_cast<const int32_t*>(p)[i]);
}

__device__ __forceinline__ bool rope_position_bad(int64_t pos) {
    return pos < 0 || pos >= ROPE_MAX_POSITION;
}

// c (sin_part false) or s (true) of one pair at `pos`, rounded to dt. cos and sin in double, rounded
// to fp32: correctly rounded, as glibc's cosf/sinf are; fp32 GPU cosf/sinf may be an ulp or two off.
// Both kernels give each of a token's 2·half values its own thread (the table fills in one round for
// head_dim <= 2 · threads), and never compute sin and cos of one angle in one thread, where a
// compiler may merge them into sincos: one code path for the table, whichever kernel runs.
__device__ __forceinline__ float rope_cos_sin(DType dt, float inv_freq, int64_t pos, bool sin_part) {
    const double angle = double(mul_rn(inv_freq, float(pos)));
    return round_to_dtype(dt, float(sin_part ? sin(angle) : cos(angle)));
}

// The rotated pair (x1, x2) -> (o1, o2); NaN for a token whose position is bad.
__device__ __forceinline__ void rope_rotate(DType dt, float x1, float x2, float c, float s, bool bad, float& o1,
                                            float& o2) {
    o1 = round_to_dtype(dt, mul_rn(x1, c)) - round_to_dtype(dt, mul_rn(x2, s));
    o2 = round_to_dtype(dt, mul_rn(x2, c)) + round_to_dtype(dt, mul_rn(x1, s));
    if (bad) o1 = o2 = NAN;
}

}  // namespace flashport::gpu::ops
