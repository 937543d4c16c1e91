// Rotary position embedding on the GPU, half-split, with the CPU kernel's rounding points
// (backends/cpu/rope.cpp, flashport/ops.h); the arithmetic is in rope.cuh, shared with the fused
// rope_qk_cache_write (rope_cache.cu):
//   angle      = inv_freq[i] · float(pos)                  fp32
//   c, s       = round_x(cos(angle)), round_x(sin(angle))
//   out[i]     = round_x(round_x(x[i] · c) − round_x(x[i+d/2] · s))        first half
//   out[i+d/2] = round_x(round_x(x[i+d/2] · c) + round_x(x[i] · s))        second half
// Layout: x, out [tokens..., n_heads, head_dim] (any strides outside head_dim); positions on the GPU,
// one per token. One block per token (grid-stride) and slice of its heads: its threads first compute
// the token's c and s into shared memory, then rotate the slice's (head, pair)s.
//
// Matching the CPU bit for bit:
// - inv_freq comes from the host, computed there with the CPU kernel's expression (libm powf, which
//   a GPU's pow does not reproduce to the last bit; at position 10^6 one ulp of inv_freq moves the
//   angle by ~0.06 rad). It travels in the kernel arguments, which bounds head_dim (ROPE_MAX_HALF).
// - cos and sin are evaluated in double and rounded to fp32, i.e. correctly rounded, as glibc's
//   cosf/sinf are (they too work in double); fp32 GPU cosf/sinf may be an ulp or two off.
// - Products are rounded on their own (mul_rn): no FMA may fuse x·c − x'·s.
// A position outside [0, 2^24) (not checkable on the host) makes the token's rows NaN.
#include "backends/gpu/ops_gpu.h"
#include "backends/gpu/rope.cuh"

namespace flashport::gpu {
namespace {

using namespace ops;

constexpr int THREADS = 256;

struct RopeArgs {
    RowView out, x;                          // rows = tokens
    int64_t head_stride_out, head_stride_x;  // elements between heads
    const void* positions;
    bool positions_64;
    int64_t tokens;
    int n_heads, half;
    int heads_per_block;  // a token's heads are split over gridDim.y blocks
    float inv_freq[ROPE_MAX_HALF];
};

__global__ void __launch_bounds__(THREADS) rope_kernel(const RopeArgs a) {
    FP_DYNAMIC_SHARED(float, cs);  // c[half], then s[half], of the current token
    float* c = cs;
    float* s = cs + a.half;
    const DType dt = a.x.dtype;
    for (int64_t t = blockIdx.x; t < a.tokens; t += gridDim.x) {
        const int64_t pos = load_index(a.positions, a.positions_64, t);
        const bool bad = rope_position_bad(pos);
        __syncthreads();  // the previous token's c, s are no longer read
        for (int j = int(threadIdx.x); j < 2 * a.half; j += THREADS) {
            const int i = j < a.half ? j : j - a.half;
            cs[j] = rope_cos_sin(dt, a.inv_freq[i], pos, j >= a.half);
        }
        __syncthreads();
        const char* xt = a.x.row(t);
        char* ot = a.out.row(t);
        // This block's heads of the token: blockIdx.y of gridDim.y slices.
        const int h0 = int(blockIdx.y) * a.heads_per_block, h1 = min(a.n_heads, h0 + a.heads_per_block);
        const int pairs = (h1 - h0) * a.half;
        for (int e = int(threadIdx.x); e < pairs; e += THREADS) {
            const int h = h0 + e / a.half, i = e % a.half;
            const char* xh = xt + h * a.head_stride_x * a.x.esize;
            char* oh = ot + h * a.head_stride_out * a.out.esize;
            float o1, o2;
            rope_rotate(dt, load(xh, dt, i), load(xh, dt, i + a.half), c[i], s[i], bad, o1, o2);
            store(oh, a.out.dtype, i, o1);
            store(oh, a.out.dtype, i + a.half, o2);
        }
    }
}

}  // namespace

void rope(const TensorView& out, const TensorView& x, const IndexView& positions, double theta, void* stream) {
    check_current_device("rope", x.device);
    const int64_t n_heads = x.shape[size_t(x.ndim - 2)], head_dim = x.shape[size_t(x.ndim - 1)];
    check_rope_limits("rope", n_heads, head_dim, x);
    RopeArgs a{};
    a.out = row_view(out, 2);
    a.x = row_view(x, 2);
    a.head_stride_out = out.stride[size_t(out.ndim - 2)];
    a.head_stride_x = x.stride[size_t(x.ndim - 2)];
    a.positions = positions.data;
    a.positions_64 = positions.type == IndexView::Type::I64;
    a.tokens = positions.size;
    a.n_heads = int(n_heads);
    a.half = int(head_dim / 2);
    if (a.tokens == 0 || n_heads == 0) return;
    rope_inv_freq(a.inv_freq, head_dim, theta);
    const size_t smem = 2 * size_t(a.half) * sizeof(float);
    // Few tokens (decode): one block per token would leave the GPU idle and the token's whole
    // rotation on one block's latency (measured 9.9 µs for one Qwen2.5-7B token), so the heads are
    // spread over up to 8 blocks per token, each computing the token's cos/sin itself.
    const int slices = a.tokens >= 64 ? 1 : std::min(8, a.n_heads);
    a.heads_per_block = int(ceil_div(int64_t(a.n_heads), int64_t(slices)));
    const dim3 grid(grid_size(a.tokens), unsigned(ceil_div(int64_t(a.n_heads), int64_t(a.heads_per_block))));
    launch_kernel(rope_kernel, grid, THREADS, smem, as_stream(stream), a);
    FP_GPU_CHECK_LAUNCH("rope");
}

}  // namespace flashport::gpu
