// linear's GPU kernel (flashport/linear.h, the op named in every layer: "gpu.linear.gemv"): one GEMV
// that streams the weight, out[t, n] = round(sum_k x[t, k] * w[n, k] + bias[n]) for up to
// GEMV_MAX_TOKENS tokens, fp32 accumulation, one rounding (the CPU kernels' epilogue, so a bias costs
// nothing extra and needs no staging buffer). For one token it runs `linear`'s fused forms: an RMSNorm
// of x before the product, a residual add or SwiGLU after it. matmul's single-token path
// (matmul.cu, impl GEMV) launches the same kernel without the fusions.
//
// Why not the BLAS: with few tokens the product is a stream of the weight (2 bytes per multiply-add
// per token row), and what matters is bytes in flight, not math. Each block of 128 threads (4 warps,
// or 2 wavefronts of 64) owns GEMV_ROWS weight rows and walks them in 16-byte vectors (8 elements per
// thread, the block's threads side by side along k), converting each vector to fp32 once and using
// it for every token; x rows are re-read from L1/L2. Each thread requests 4 steps' vectors before
// using any; with one token, x's vectors for those steps (and the norm weight's) go out with them,
// so a round waits for one memory latency, not two. Warp reductions and one pass through shared
// memory give each (token, row) sum.
//
// Why the fusions: a Qwen2.5-7B decode step is ~330 launches, and the one-token RMSNorm, SwiGLU and
// add launches cost 5-8 µs each of mostly latency (0.7 ms of a 5.5 ms step, docs/perf.md); in the
// GEMV they cost a few extra L1/L2 reads per block. The norm prologue: every block sums x's squares
// itself (x is one row of a few KB, in L2 after the first block) from the vectors it requested with
// its first weight vectors, so the weight stream starts at once; each x vector is then normalised
// with rms_norm's rounding points just before its FMAs. SwiGLU: the weight
// is [gate; up] and a block's two rows are gate row n and up row n, so the activation is computed
// where both sums meet. RoPE and the cache write (the qkv projection, LinearParams::rope_cache): a
// block's two rows are rows i and i + head_dim/2 of one head, a rotation pair, so the rotated pair
// (and the k or v pair's cache copy) is stored where both sums meet; two threads of other warps
// compute the pair's cos and sin (rope.cuh) while the block's first weight vectors are in flight.
// The bits are rope_qk_cache_write's after the plain GEMV.
//
// At 8 tokens the x re-reads make it slower than cuBLAS, so AUTO takes it for one token only. Its
// designs and their H200 figures: docs/perf.md ("Decode: GEMV v2").
//
// Portable: no inline PTX, warp width from common.cuh, so the HIP build compiles the same kernel.
// Requirements (gemv_ineligible_reason): x and weight fp16 or bf16 (one dtype), in a multiple of 8,
// x and weight rows 16-byte aligned; the fused forms add theirs (linear_gemv_ineligible_reason).
#include <type_traits>

#include "backends/gpu/gpu_arch.h"
#include "backends/gpu/linear_gemv.h"
#include "backends/gpu/ops_common.cuh"
#include "backends/gpu/ops_gpu.h"
#include "backends/gpu/rope.cuh"
#include "backends/gpu/view_strides.h"
#include "flashport/linear.h"

namespace flashport::gpu {
namespace {

using namespace ops;

// A fixed thread count, never derived from WARP_SIZE: HIP compiles the launcher in a host pass where
// WARP_SIZE is 32, and the kernel for gfx9 where it is 64 (common.cuh). 4 warps of 32 on NVIDIA and
// RDNA, 2 wavefronts of 64 on GCN/CDNA; the kernel counts its warps itself.
constexpr int GEMV_THREADS = 128;
constexpr int GEMV_ROWS = 2;  // weight rows per block: two independent streams per thread
constexpr int CHUNK = 8;      // elements per 16-byte vector
constexpr int UNROLL = 4;     // steps whose weight vectors are requested before any is used

// ROPE_CACHE's arguments: the GEMV's and the cache write's (rope.cuh), a type of their own so that
// the 2 KB inv_freq table travels with that kernel only. out's row is [q heads | k heads | v heads]
// of head_dim = 2 · half; positions and slots have one entry, the token's.
struct GemvRopeArgs : GemvArgs, RopeCacheTarget {};

template <Epilogue EPI>
using GemvArgsFor = std::conditional_t<EPI == Epilogue::ROPE_CACHE, GemvRopeArgs, GemvArgs>;

// Loads step u of this round for every row (zeros past the row's end).
template <int R>
__device__ __forceinline__ void load_round(const uint16_t* const (&wrow)[R], int64_t k0, int64_t in,
                                           uint4 (&wv)[UNROLL][R]) {
    constexpr int64_t STEP = int64_t(GEMV_THREADS) * CHUNK;
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
#pragma unroll
        for (int r = 0; r < R; ++r)
            wv[u][r] = k0 + u * STEP < in ? __ldg(reinterpret_cast<const uint4*>(wrow[r] + k0 + u * STEP))
                                          : make_uint4(0, 0, 0, 0);
}
// The same steps of one vector of [in] values (one token's x, the norm weight), requested with the
// round's weight vectors (zeros past the end).
__device__ __forceinline__ void load_vec_round(const uint16_t* v, int64_t k0, int64_t in, uint4 (&out)[UNROLL]) {
    constexpr int64_t STEP = int64_t(GEMV_THREADS) * CHUNK;
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
        out[u] = k0 + u * STEP < in ? __ldg(reinterpret_cast<const uint4*>(v + k0 + u * STEP)) : make_uint4(0, 0, 0, 0);
}

// ROPE_CACHE: the block's pair is pair i of head `head` (q heads, then k, then v): rows n and n + half.
struct RopePair {
    int64_t head, i, n;
};
__device__ __forceinline__ RopePair rope_pair(const GemvRopeArgs& a) {
    const int64_t head = int64_t(blockIdx.x) / a.half, i = int64_t(blockIdx.x) % a.half;
    return {head, i, head * 2 * a.half + i};
}

template <DType DT, int T, bool NORM, Epilogue EPI>
__global__ void __launch_bounds__(GEMV_THREADS) linear_gemv_kernel(const GemvArgsFor<EPI> a) {
    constexpr int GEMV_WARPS = GEMV_THREADS / WARP_SIZE;
    const int lane = int(threadIdx.x) % WARP_SIZE, warp = int(threadIdx.x) / WARP_SIZE;
    // SWIGLU: block n takes gate row n and up row n; ROPE_CACHE rows n and n + half of a head; else
    // rows n0, n0 + 1.
    int64_t n0 = EPI == Epilogue::SWIGLU ? int64_t(blockIdx.x) : int64_t(blockIdx.x) * GEMV_ROWS;
    int64_t row_step = EPI == Epilogue::SWIGLU ? a.n_out : 1;
    if constexpr (EPI == Epilogue::ROPE_CACHE) {
        n0 = rope_pair(a).n;
        row_step = a.half;
    }
    const uint16_t* wrow[GEMV_ROWS];
#pragma unroll
    for (int r = 0; r < GEMV_ROWS; ++r)  // a past-the-end row re-reads the last
        wrow[r] = a.w + min(n0 + r * row_step, EPI == Epilogue::SWIGLU ? 2 * a.n_out - 1 : a.n_out - 1) * a.ldw;

    // The block's threads interleave along k (thread i takes chunks i, i + GEMV_THREADS, ...), so each
    // row is read by the whole block in coalesced 16-byte vectors.
    constexpr int64_t STEP = int64_t(GEMV_THREADS) * CHUNK;
    const int64_t k_first = int64_t(threadIdx.x) * CHUNK;
    uint4 wv[UNROLL][GEMV_ROWS];
    // One token: x's vectors travel with the weight's (load_vec_round), and with the norm gamma's
    // too, so a round's FMAs wait for one memory latency. More tokens re-read x from L1/L2 per step.
    constexpr bool X_IN_REGS = T == 1;
    static_assert(!NORM || T == 1, "the norm prologue serves one token");
    [[maybe_unused]] uint4 xv[UNROLL], gv[UNROLL];
    // Launched dependent (launch_dependent): a model's weights (norm weight included) are no kernel's
    // output, so their first vectors are requested while the kernel ahead of this one finishes; x,
    // the residual and out only after that kernel is done. Any other weight waits too.
    if (!a.constant_weight) wait_for_prior_grid();
    load_round(wrow, k_first, a.in, wv);
    if constexpr (NORM) load_vec_round(a.norm_w, k_first, a.in, gv);
    if (a.constant_weight) wait_for_prior_grid();
    allow_next_grid();
    if constexpr (X_IN_REGS) load_vec_round(a.x, k_first, a.in, xv);  // x is the kernel ahead's output

    // ROPE_CACHE: the pair's cos and sin, for q and k heads, by the first thread of warps 0 and 1 (never
    // both in one thread: rope.cuh), while the weight vectors are in flight. Read after the
    // __syncthreads that precedes the epilogue.
    [[maybe_unused]] __shared__ float rope_cs[2];
    if constexpr (EPI == Epilogue::ROPE_CACHE) {
        const RopePair pr = rope_pair(a);
        if (lane == 0 && warp < 2 && pr.head < a.n_heads + a.n_kv_heads)
            rope_cs[warp] = rope_cos_sin(DT, a.inv_freq[pr.i], load_index(a.positions, a.positions_64, 0), warp == 1);
    }

    // NORM: inv = 1 / sqrt(mean(x²) + eps), each block on its own (the same sum in every block), while
    // the weight vectors are in flight: the first round's x from the registers it arrived in (all of
    // x for in ≤ UNROLL · STEP = 4096), the rest from L2.
    [[maybe_unused]] float inv = 0.0f;
    if constexpr (NORM) {
        __shared__ float squares[GEMV_WARPS];
        float ss = 0.0f;
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            float xf[CHUNK];
            unpack8<DT>(xv[u], xf);  // zeros past in
#pragma unroll
            for (int i = 0; i < CHUNK; ++i) ss += xf[i] * xf[i];
        }
        for (int64_t k = k_first + UNROLL * STEP; k < a.in; k += STEP) {
            float xf[CHUNK];
            unpack8<DT>(__ldg(reinterpret_cast<const uint4*>(a.x + k)), xf);
#pragma unroll
            for (int i = 0; i < CHUNK; ++i) ss += xf[i] * xf[i];
        }
        ss = group_sum<WARP_SIZE>(ss);
        if (lane == 0) squares[warp] = ss;
        __syncthreads();
        ss = 0.0f;
#pragma unroll
        for (int w = 0; w < GEMV_WARPS; ++w) ss += squares[w];
        inv = 1.0f / sqrtf(ss / float(a.in) + a.eps);  // as rms_norm (norm.cu)
    }

    float acc[T][GEMV_ROWS] = {};
    for (int64_t k0 = k_first; k0 < a.in; k0 += UNROLL * STEP) {
        if (k0 != k_first) {
            load_round(wrow, k0, a.in, wv);
            if constexpr (NORM) load_vec_round(a.norm_w, k0, a.in, gv);
            if constexpr (X_IN_REGS) load_vec_round(a.x, k0, a.in, xv);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const int64_t k = k0 + u * STEP;
            if (k >= a.in) break;
            float wf[GEMV_ROWS][CHUNK];
#pragma unroll
            for (int r = 0; r < GEMV_ROWS; ++r) unpack8<DT>(wv[u][r], wf[r]);
#pragma unroll
            for (int t = 0; t < T; ++t) {
                float xf[CHUNK];
                if constexpr (X_IN_REGS) {
                    unpack8<DT>(xv[u], xf);
                } else {
                    unpack8<DT>(__ldg(reinterpret_cast<const uint4*>(a.x + t * a.ldx + k)), xf);
                }
                if constexpr (NORM) {  // rms_norm's rounding points: round(gamma · round(x · inv))
                    float gamma[CHUNK];
                    unpack8<DT>(gv[u], gamma);
#pragma unroll
                    for (int i = 0; i < CHUNK; ++i)
                        xf[i] = to_float<DT>(from_float<DT>(gamma[i] * to_float<DT>(from_float<DT>(xf[i] * inv))));
                }
#pragma unroll
                for (int r = 0; r < GEMV_ROWS; ++r)
#pragma unroll
                    for (int i = 0; i < CHUNK; ++i) acc[t][r] = fmaf(xf[i], wf[r][i], acc[t][r]);
            }
        }
    }
    // Each warp's partial sums, then the block's: T · GEMV_ROWS values per warp through shared memory.
    __shared__ float partial[GEMV_WARPS][T][GEMV_ROWS];
#pragma unroll
    for (int t = 0; t < T; ++t)
#pragma unroll
        for (int r = 0; r < GEMV_ROWS; ++r) {
            const float sum = group_sum<WARP_SIZE>(acc[t][r]);
            if (lane == 0) partial[warp][t][r] = sum;
        }
    __syncthreads();
    const auto row_sum = [&](int t, int r) {
        float sum = 0.0f;
#pragma unroll
        for (int w = 0; w < GEMV_WARPS; ++w) sum += partial[w][t][r];
        return sum;
    };
    const int out_esize = a.out_dtype == DType::F32 ? 4 : 2;
    if constexpr (EPI == Epilogue::SWIGLU) {
        // out = round(round(silu(g)) · u) with g, u the rounded products (swiglu after two matmuls).
        if (int(threadIdx.x) < T) {
            const int t = int(threadIdx.x);
            const int64_t n = n0;
            const float bg = a.bias ? load(a.bias, a.bias_dtype, n) : 0.0f;
            const float bu = a.bias ? load(a.bias, a.bias_dtype, n + a.n_out) : 0.0f;
            const float g = round_to_dtype(a.out_dtype, row_sum(t, 0) + bg);
            const float u = round_to_dtype(a.out_dtype, row_sum(t, 1) + bu);
            store(static_cast<char*>(a.out) + t * a.ldo * out_esize, a.out_dtype, n, silu_times(a.out_dtype, g, u));
        }
    } else if constexpr (EPI == Epilogue::ROPE_CACHE) {
        // One token: what the plain GEMV stores (x1, x2), rotated for q and k as rope_qk_cache_write
        // rotates them; k and v pairs also to the token's slot (skipped when the slot is not a slot).
        if (threadIdx.x == 0) {
            const RopePair pr = rope_pair(a);
            const int64_t n1 = pr.n, n2 = pr.n + a.half;
            const float b1 = a.bias ? load(a.bias, a.bias_dtype, n1) : 0.0f;
            const float b2 = a.bias ? load(a.bias, a.bias_dtype, n2) : 0.0f;
            float o1 = round_to_dtype(DT, row_sum(0, 0) + b1), o2 = round_to_dtype(DT, row_sum(0, 1) + b2);
            const int rotated = a.n_heads + a.n_kv_heads;
            if (pr.head < rotated) {
                const bool bad = rope_position_bad(load_index(a.positions, a.positions_64, 0));
                rope_rotate(DT, o1, o2, rope_cs[0], rope_cs[1], bad, o1, o2);
            }
            store(a.out, DT, n1, o1);
            store(a.out, DT, n2, o2);
            const int64_t slot = load_index(a.slots, a.slots_64, 0);
            if (pr.head >= a.n_heads && slot >= 0 && slot < a.capacity) {
                const bool is_k = pr.head < rotated;
                const int64_t h = is_k ? pr.head - a.n_heads : pr.head - rotated;
                const int64_t* st = is_k ? a.kc_stride : a.vc_stride;
                char* row = (is_k ? a.k_cache : a.v_cache) + (slot / a.block_size) * st[0] +
                            (slot % a.block_size) * st[1] + h * st[2];
                store(row, DT, pr.i, o1);
                store(row, DT, pr.i + a.half, o2);
            }
        }
    } else if (int(threadIdx.x) < T * GEMV_ROWS) {
        const int t = int(threadIdx.x) / GEMV_ROWS, r = int(threadIdx.x) % GEMV_ROWS;
        const int64_t n = n0 + r;
        if (n < a.n_out) {
            const float b = a.bias ? load(a.bias, a.bias_dtype, n) : 0.0f;
            float y = row_sum(t, r) + b;
            if constexpr (EPI == Epilogue::RESIDUAL)  // out = round(residual + round(y)); this thread's element only
                y = load(static_cast<const char*>(a.residual) + t * a.ldr * out_esize, a.out_dtype, n) +
                    round_to_dtype(a.out_dtype, y);
            store(static_cast<char*>(a.out) + t * a.ldo * out_esize, a.out_dtype, n, y);
        }
    }
}

template <DType DT, bool NORM, Epilogue EPI>
void launch_fused(const GemvArgsFor<EPI>& a, unsigned grid, cudaStream_t stream) {
    launch_dependent(linear_gemv_kernel<DT, 1, NORM, EPI>, grid, GEMV_THREADS, 0, stream, a);
}

// RoPE and the cache write in the epilogue (one token), with or without the norm prologue.
template <DType DT>
void launch_rope_cache(const GemvRopeArgs& a, bool norm, cudaStream_t stream) {
    const unsigned grid = unsigned(a.n_out / 2);  // one block per rotation pair
    if (norm)
        launch_fused<DT, true, Epilogue::ROPE_CACHE>(a, grid, stream);
    else
        launch_fused<DT, false, Epilogue::ROPE_CACHE>(a, grid, stream);
    FP_GPU_CHECK_LAUNCH("linear_gemv_kernel (rope_cache)");
}

template <DType DT>
void launch_gemv(const GemvArgs& a, int64_t tokens, bool norm, Epilogue epi, cudaStream_t stream) {
    const unsigned grid = unsigned(epi == Epilogue::SWIGLU ? a.n_out : ceil_div(a.n_out, GEMV_ROWS));
    if (norm || epi != Epilogue::PLAIN) {  // the fused forms: one token (linear_gemv_ineligible_reason)
        FP_CHECK(tokens == 1, "linear on GPU: the fused GEMV takes one token, got ", tokens);
        FP_CHECK(epi != Epilogue::ROPE_CACHE, "linear on GPU: RoPE in the epilogue launches through launch_rope_cache");
        if (norm)
            switch (epi) {
                case Epilogue::PLAIN: launch_fused<DT, true, Epilogue::PLAIN>(a, grid, stream); break;
                case Epilogue::RESIDUAL: launch_fused<DT, true, Epilogue::RESIDUAL>(a, grid, stream); break;
                case Epilogue::SWIGLU: launch_fused<DT, true, Epilogue::SWIGLU>(a, grid, stream); break;
                case Epilogue::ROPE_CACHE: break;  // checked above
            }
        else if (epi == Epilogue::RESIDUAL)
            launch_fused<DT, false, Epilogue::RESIDUAL>(a, grid, stream);
        else
            launch_fused<DT, false, Epilogue::SWIGLU>(a, grid, stream);
        FP_GPU_CHECK_LAUNCH("linear_gemv_kernel (fused)");
        return;
    }
    switch (tokens) {
#define FP_GEMV_CASE(T)                                                                              \
    case T:                                                                                          \
        launch_dependent(linear_gemv_kernel<DT, T, false, Epilogue::PLAIN>, grid, GEMV_THREADS, 0, stream, a); \
        break;
        FP_GEMV_CASE(1)
        FP_GEMV_CASE(2)
        FP_GEMV_CASE(3)
        FP_GEMV_CASE(4)
        FP_GEMV_CASE(5)
        FP_GEMV_CASE(6)
        FP_GEMV_CASE(7)
        FP_GEMV_CASE(8)
#undef FP_GEMV_CASE
        default: fail("gemv on GPU: ", tokens, " tokens (at most ", GEMV_MAX_TOKENS, ")");
    }
    FP_GPU_CHECK_LAUNCH("linear_gemv_kernel");
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The matrix-core GEMV (linear_tc.cuh) for 2 to GEMV_TC_MAX_TOKENS tokens, plain or with its epilogue.
void run_tc(const GemvArgs& a, DType dtype, int64_t tokens, Epilogue epi, void* stream) {
#if defined(FLASHPORT_GPU_CUDA)
    gemv_mma(a, dtype, tokens, epi, as_stream(stream));
#else
    gemv_mfma(a, dtype, tokens, epi, as_stream(stream));
#endif
}

GemvArgs make_args(const TensorView& out, const TensorView& x, const TensorView& weight, const TensorView* bias) {
    GemvArgs a{};
    a.out = out.data;
    a.out_dtype = out.dtype;
    a.ldo = out.stride[0];
    a.x = static_cast<const uint16_t*>(x.data);
    a.ldx = x.stride[0];
    a.w = static_cast<const uint16_t*>(weight.data);
    a.ldw = weight.stride[0];
    a.bias = bias ? bias->data : nullptr;
    a.bias_dtype = bias ? bias->dtype : DType::F32;
    a.n_out = weight.dim(0);
    a.in = x.dim(1);
    return a;
}

void run(const GemvArgs& a, DType dtype, int64_t tokens, bool norm, Epilogue epi, void* stream) {
    if (a.n_out == 0) return;
    if (dtype == DType::F16)
        launch_gemv<DType::F16>(a, tokens, norm, epi, as_stream(stream));
    else
        launch_gemv<DType::BF16>(a, tokens, norm, epi, as_stream(stream));
}

}  // namespace

bool gemv_tc_serves(DType dtype) {
    if (dtype == DType::F32) return false;
#if defined(FLASHPORT_GPU_CUDA)
    return current_device_info().major >= 8;  // mma.sync with fp16 and bf16 inputs
#else
    return matrix_cores_cover(current_device_info().matrix_cores, dtype);
#endif
}

const char* gemv_kernel_name(DType dtype, int64_t tokens) {
    if (tokens <= 1 || !gemv_tc_serves(dtype)) return "gemv";
#if defined(FLASHPORT_GPU_CUDA)
    return "gemv.mma";
#else
    return "gemv.mfma";
#endif
}

std::string gemv_ineligible_reason(const TensorView& x, const TensorView& weight) {
    const int64_t tokens = x.dim(0), in = x.dim(1);
    if (x.dtype == DType::F32) return "it takes fp16 or bf16 inputs, got fp32";
    const int64_t max_tokens = gemv_tc_serves(x.dtype) ? GEMV_TC_MAX_TOKENS : GEMV_MAX_TOKENS;
    if (tokens < 1 || tokens > max_tokens)
        return "it takes 1 to " + std::to_string(max_tokens) + " tokens, got " + std::to_string(tokens);
    if (in == 0 || in % CHUNK != 0) return "in (" + std::to_string(in) + ") must be a positive multiple of 8";
    if (!aligned16(x.data) || !aligned16(weight.data)) return "x and weight must start on 16-byte boundaries";
    if ((tokens > 1 && x.stride[0] % CHUNK != 0) || (weight.dim(0) > 1 && weight.stride[0] % CHUNK != 0))
        return "x's and weight's row strides must be multiples of 8 elements";
    if (ceil_div(weight.dim(0), GEMV_ROWS) > 0x7fffffff)
        return "too many weight rows";
    return {};
}

void gemv(const TensorView& out, const TensorView& x, const TensorView& weight, const TensorView* bias, void* stream) {
    const GemvArgs a = make_args(out, x, weight, bias);
    if (x.dim(0) > 1 && gemv_tc_serves(x.dtype))
        run_tc(a, x.dtype, x.dim(0), Epilogue::PLAIN, stream);
    else
        run(a, x.dtype, x.dim(0), false, Epilogue::PLAIN, stream);
}

std::string linear_gemv_ineligible_reason(const TensorView& out, const TensorView& x, const TensorView& weight,
                                          const LinearParams& p) {
    if (x.dim(0) != 1) {  // the matrix-core GEMV: the norm runs in its own launch (the op layer's part)
        if (!gemv_tc_serves(x.dtype))
            return "the fused GEMV takes one token where the GPU has no matrix instructions for " +
                   std::string(dtype_name(x.dtype)) + ", got " + std::to_string(x.dim(0));
        if (p.rope_cache) return "RoPE and the cache write in the GEMV's epilogue take one token";
    }
    std::string why = gemv_ineligible_reason(x, weight);
    if (!why.empty()) return why;
    if (out.dtype != x.dtype) return "out must have x's dtype";
    if (p.bias && p.bias->dtype != out.dtype) return "the bias must have out's dtype";
    if (p.norm_weight && (p.norm_weight->dtype != x.dtype || !aligned16(p.norm_weight->data)))
        return "the norm weight must have x's dtype and start on a 16-byte boundary";
    if (p.residual && p.residual->dtype != out.dtype) return "the residual must have out's dtype";
    return {};
}

const char* linear_gemv(const TensorView& out, const TensorView& x, const TensorView& weight, const LinearParams& p,
                        void* stream) {
    GemvArgs a = make_args(out, x, weight, p.bias);
    a.constant_weight = p.constant_weight;
    if (p.swiglu) a.n_out = weight.dim(0) / 2;
    if (p.norm_weight) {
        a.norm_w = static_cast<const uint16_t*>(p.norm_weight->data);
        a.eps = p.eps;
    }
    if (p.residual) {
        a.residual = p.residual->data;
        a.ldr = p.residual->stride[0];
    }
    if (p.rope_cache) {  // linear has checked the caches, positions and slots (rope_qk_cache_write's rules)
        const RopeCacheWrite& rc = *p.rope_cache;
        GemvRopeArgs r{};
        static_cast<GemvArgs&>(r) = a;
        // rope_qk_cache_write's GPU limit, so that rope_cache never decides between fused and composed
        // (the workspace a caller sizes without it stays right).
        check_rope_limits("linear (rope_cache)", rc.n_heads + 2 * rc.n_kv_heads, rc.k_cache.dim(3), out);
        static_cast<RopeCacheTarget&>(r) = rope_cache_target(rc.k_cache, rc.v_cache, rc.positions, rc.slots,
                                                             rc.n_heads, rc.n_kv_heads, rc.rope.theta);
        if (r.n_out == 0) return "gemv";
        if (x.dtype == DType::F16)
            launch_rope_cache<DType::F16>(r, p.norm_weight != nullptr, as_stream(stream));
        else
            launch_rope_cache<DType::BF16>(r, p.norm_weight != nullptr, as_stream(stream));
        return "gemv";
    }
    const Epilogue epi = p.swiglu ? Epilogue::SWIGLU : p.residual ? Epilogue::RESIDUAL : Epilogue::PLAIN;
    if (x.dim(0) > 1) {
        FP_CHECK(!p.norm_weight, "linear on GPU: the matrix-core GEMV takes x normalised (the norm's own launch)");
        run_tc(a, x.dtype, x.dim(0), epi, stream);
        return gemv_kernel_name(x.dtype, x.dim(0));
    }
    run(a, x.dtype, 1, p.norm_weight != nullptr, epi, stream);
    return "gemv";
}

}  // namespace flashport::gpu
