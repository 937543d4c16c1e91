// linear's GEMV on matrix cores, for 2 to GEMV_TC_MAX_TOKENS tokens (batched decode): NVIDIA mma.sync
// m16n8k16 (linear_mma.cu, sm_80+) and AMD's 16x16x16 MFMA (linear_mfma.cu, gfx908/90a/94x) share this
// kernel; each supplies a fragment policy (Frag, below). out[t, n] = epilogue(sum_k x[t, k] · w[n, k] +
// bias[n]) with fp32 sums and the FMA GEMV's rounding points (linear.cu), so both kernels give what
// the composition of matmul and add / swiglu gives, up to the order of the fp32 sums.
//
// Why: a batch of b decode tokens multiplies [b, in] by [rows, in]ᵀ, a stream of the weight with 2·b
// FLOPs per weight element. The FMA GEMV re-reads x for every weight row it meets (it lost to cuBLAS
// at 8 tokens), and cuBLAS's skinny GEMMs read Qwen-7B's weights at 3.5-3.7 TB/s on the H200, against
// 4.2 for the one-token GEMV (docs/perf.md). Here each weight vector is loaded once, straight into
// matrix-instruction registers, and the tokens are the instruction's narrow side: the math is free
// and the kernel is a weight stream again.
//
// One warp step covers 16 weight rows × 32 k. Each lane loads 16-byte vectors (8 elements) of the
// weight and, per tile of tokens, one 16-byte vector of x at the same k. A dot product does not care
// in which order k is summed, so the instruction's k order is chosen as a permutation of those 32 k
// under which every operand register is a half of such a vector: no shared memory and no shuffles
// before the products. Each vector feeds two instructions (its first and second 8 bytes).
//   NVIDIA (32 lanes, g = lane / 4, c = lane % 4): weight rows g and g + 8 and token g of each 8-token
//     tile, at k offset 8c.
//   AMD (64 lanes, i = lane % 16, j = lane / 16): weight row i and token i of each 16-token tile, at k
//     offset 8j.
// A block of 256 threads (8 warps of 32, or 4 wavefronts of 64) owns 16 weight rows (SwiGLU: 8 gate
// rows and their 8 up rows, so that both sums meet in one block); its warps split k (warp w takes steps
// w, w + W, ..., with TC_UNROLL steps' loads in flight before the first product) and meet in shared
// memory, summed in warp order, so a result does not depend on timing. Every warp makes the same
// number of matrix calls (zeros past the end): an MFMA is one instruction of the whole wave, and the
// HIP CPU Runtime's emulation makes it a meeting point of the block.
//
// Requirements (as the FMA GEMV's, gemv_ineligible_reason): x and weight fp16 or bf16 of one dtype, in
// a multiple of 8, rows 16-byte aligned. Launched dependent (runtime.h): a constant weight's first
// round is requested before the kernel ahead has finished.
#pragma once

#include <type_traits>

#include "backends/gpu/linear_gemv.h"
#include "backends/gpu/ops_common.cuh"

namespace flashport::gpu {

constexpr int TC_THREADS = 256;  // fixed, never derived from WARP_SIZE (common.cuh)
constexpr int TC_ROWS = 16;      // weight rows per block: the instructions' M
constexpr int TC_STEP_K = 32;    // k per warp step
constexpr int TC_UNROLL = 4;     // steps per round; two rounds of weight vectors are in flight
// Blocks per SM the kernel is compiled for: two with one token tile (~110 registers a thread), so an
// SM keeps 16 warps' loads in flight; more tiles need the registers.
template <int TOKEN_TILES>
constexpr int TC_MIN_BLOCKS = TOKEN_TILES == 1 ? 2 : 1;

// The weight row behind row r (0-15) of block `block`'s tile, and the number of rows in all.
template <Epilogue EPI>
__device__ __forceinline__ int64_t tc_tile_row(const GemvArgs& a, int64_t block, int r) {
    if constexpr (EPI == Epilogue::SWIGLU)  // gate rows c0 .. c0 + 7, then their up rows
        return r < TC_ROWS / 2 ? block * (TC_ROWS / 2) + r : a.n_out + block * (TC_ROWS / 2) + r - TC_ROWS / 2;
    else
        return block * TC_ROWS + r;
}

// Frag: LANES (the warp the instruction is defined on), W_VECS (weight vectors per lane and step),
// TOK_TILE (tokens per instruction), ACC (accumulator floats per lane and token tile), acc_t, and
//   w_row(lane, v), k_off(lane), x_tok(lane): which weight row, k offset and token a lane loads;
//   mma<DT>(acc, w[W_VECS], x): acc += the step's products; acc_row / acc_tok(lane, i): where acc[i] sits.
// The kernel's body; each vendor file wraps it in a __global__ of its own name (linear_gemv_mma_kernel,
// linear_gemv_mfma_kernel), so the build's kernel list says which vendor's instructions a kernel needs
// (tools/hip_symbols.py). Launched with TC_THREADS threads.
template <DType DT, class Frag, int NT, Epilogue EPI>
__device__ __forceinline__ void linear_gemv_tc(const GemvArgs& a, const int tokens) {
    static_assert(EPI != Epilogue::ROPE_CACHE, "RoPE and the cache write run after the product (rope_qk_cache_write)");
    constexpr int WARPS = TC_THREADS / Frag::LANES, NTOK = NT * Frag::TOK_TILE, WV = Frag::W_VECS;
    const int lane = int(threadIdx.x) % Frag::LANES, warp = int(threadIdx.x) / Frag::LANES;
    const int64_t block = int64_t(blockIdx.x);
    const int64_t last_row = (EPI == Epilogue::SWIGLU ? 2 * a.n_out : a.n_out) - 1;
    const int k_off = Frag::k_off(lane);

    const uint16_t* wrow[WV];  // a past-the-end row re-reads the last; its sums are never stored
#pragma unroll
    for (int v = 0; v < WV; ++v)
        wrow[v] = a.w + min(tc_tile_row<EPI>(a, block, Frag::w_row(lane, v)), last_row) * a.ldw + k_off;
    const uint16_t* xrow[NT];
    bool x_real[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        const int tok = t * Frag::TOK_TILE + Frag::x_tok(lane);
        x_real[t] = tok < tokens;
        xrow[t] = a.x + int64_t(min(tok, tokens - 1)) * a.ldx + k_off;
    }

    // Round `base`'s vectors: step base + u · WARPS + warp, zeros past in (in is a multiple of 8, so a
    // vector is wholly inside or wholly past it).
    using WeightRound = uint4[TC_UNROLL][WV];
    const auto load_w = [&](int64_t base, WeightRound& wv) {
#pragma unroll
        for (int u = 0; u < TC_UNROLL; ++u) {
            const int64_t k = (base + u * WARPS + warp) * TC_STEP_K;
#pragma unroll
            for (int v = 0; v < WV; ++v)
                wv[u][v] = k + k_off < a.in ? __ldg(reinterpret_cast<const uint4*>(wrow[v] + k)) : make_uint4(0, 0, 0, 0);
        }
    };
    uint4 xv[TC_UNROLL][NT];
    const auto load_x = [&](int64_t base) {
#pragma unroll
        for (int u = 0; u < TC_UNROLL; ++u) {
            const int64_t k = (base + u * WARPS + warp) * TC_STEP_K;
#pragma unroll
            for (int t = 0; t < NT; ++t)
                xv[u][t] = x_real[t] && k + k_off < a.in ? __ldg(reinterpret_cast<const uint4*>(xrow[t] + k))
                                                         : make_uint4(0, 0, 0, 0);
        }
    };

    // A model's weights are no kernel's output: their first round is requested while the kernel ahead
    // finishes; x (that kernel's output) and the residual only after it is done.
    WeightRound wv, next{};
    if (!a.constant_weight) wait_for_prior_grid();
    load_w(0, wv);
    if (a.constant_weight) wait_for_prior_grid();
    allow_next_grid();

    // Two rounds of weight vectors in flight: round r + 1's are requested before round r's products,
    // so the stream never waits for a whole memory latency between rounds. x's vectors (L1 hits after
    // the first block of the SM) come per round.
    typename Frag::acc_t acc[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[t] = typename Frag::acc_t{};
    const int64_t steps = (a.in + TC_STEP_K - 1) / TC_STEP_K, round = int64_t(WARPS) * TC_UNROLL;
    for (int64_t base = 0; base < steps; base += round) {  // the same count in every warp
        if (base + round < steps) load_w(base + round, next);
        load_x(base);
#pragma unroll
        for (int u = 0; u < TC_UNROLL; ++u)
#pragma unroll
            for (int t = 0; t < NT; ++t) Frag::template mma<DT>(acc[t], wv[u], xv[u][t]);
#pragma unroll
        for (int u = 0; u < TC_UNROLL; ++u)
#pragma unroll
            for (int v = 0; v < WV; ++v) wv[u][v] = next[u][v];
    }

    // The warps' partial sums, then each output from all of them in warp order.
    __shared__ float partial[WARPS][TC_ROWS][NTOK];
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
        for (int i = 0; i < Frag::ACC; ++i)
            partial[warp][Frag::acc_row(lane, i)][t * Frag::TOK_TILE + Frag::acc_tok(lane, i)] = acc[t][i];
    __syncthreads();
    const auto sum = [&](int r, int t) {
        float s = 0.0f;
#pragma unroll
        for (int w = 0; w < WARPS; ++w) s += partial[w][r][t];
        return s;
    };
    const int64_t out_esize = a.out_dtype == DType::F32 ? 4 : 2;
    constexpr int COLS = EPI == Epilogue::SWIGLU ? TC_ROWS / 2 : TC_ROWS;  // out columns per block
    for (int o = int(threadIdx.x); o < COLS * tokens; o += TC_THREADS) {
        const int r = o % COLS, t = o / COLS;  // neighbouring threads store neighbouring columns
        const int64_t n = block * COLS + r;
        if (n >= a.n_out) continue;
        char* out_row = static_cast<char*>(a.out) + t * a.ldo * out_esize;
        if constexpr (EPI == Epilogue::SWIGLU) {
            // out = round(round(silu(g)) · u) with g, u the rounded products (swiglu after matmul)
            const float bg = a.bias ? ops::load(a.bias, a.bias_dtype, n) : 0.0f;
            const float bu = a.bias ? ops::load(a.bias, a.bias_dtype, n + a.n_out) : 0.0f;
            const float g = ops::round_to_dtype(a.out_dtype, sum(r, t) + bg);
            const float u = ops::round_to_dtype(a.out_dtype, sum(r + COLS, t) + bu);
            ops::store(out_row, a.out_dtype, n, ops::silu_times(a.out_dtype, g, u));
        } else {
            float y = sum(r, t) + (a.bias ? ops::load(a.bias, a.bias_dtype, n) : 0.0f);
            if constexpr (EPI == Epilogue::RESIDUAL)  // out = round(residual + round(y)); may be in place
                y = ops::load(static_cast<const char*>(a.residual) + t * a.ldr * out_esize, a.out_dtype, n) +
                    ops::round_to_dtype(a.out_dtype, y);
            ops::store(out_row, a.out_dtype, n, y);
        }
    }
}

// Token tiles for `tokens` (1, 2 or 4 of 8 on NVIDIA; 1 or 2 of 16 on AMD) and the launch. Kernels:
// the vendor's wrappers, Kernels::get<DT, NT, EPI>(), and Kernels::Frag their fragment policy.
template <DType DT, class Kernels, Epilogue EPI, int NT>
void launch_gemv_tc_tiles(const GemvArgs& a, int64_t tokens, cudaStream_t stream) {
    const int64_t cols_per_block = EPI == Epilogue::SWIGLU ? TC_ROWS / 2 : TC_ROWS;
    const auto grid = unsigned(ceil_div(a.n_out, cols_per_block));
    launch_dependent(Kernels::template get<DT, NT, EPI>(), grid, TC_THREADS, 0, stream, a, int(tokens));
}

template <DType DT, class Kernels, Epilogue EPI>
void launch_gemv_tc(const GemvArgs& a, int64_t tokens, cudaStream_t stream) {
    constexpr int TOK_TILE = Kernels::Frag::TOK_TILE;
    static_assert(GEMV_TC_MAX_TOKENS <= 4 * TOK_TILE, "at most four token tiles");
    const int64_t tiles = ceil_div(tokens, int64_t(TOK_TILE));
    if (tiles <= 1) {
        launch_gemv_tc_tiles<DT, Kernels, EPI, 1>(a, tokens, stream);
    } else if (tiles <= 2) {
        launch_gemv_tc_tiles<DT, Kernels, EPI, 2>(a, tokens, stream);
    } else {
        if constexpr (2 * TOK_TILE < GEMV_TC_MAX_TOKENS)  // NVIDIA's 8-token tiles only
            launch_gemv_tc_tiles<DT, Kernels, EPI, 4>(a, tokens, stream);
    }
}

// The vendor file's entry point: validates what the launcher can't take and dispatches the dtype and
// epilogue. A kernel fault is reported under `name`.
template <class Kernels>
void run_gemv_tc(const GemvArgs& a, DType dtype, int64_t tokens, Epilogue epi, cudaStream_t stream, const char* name) {
    FP_CHECK(tokens >= 1 && tokens <= GEMV_TC_MAX_TOKENS, "linear on GPU: the matrix-core GEMV takes 1 to ",
             GEMV_TC_MAX_TOKENS, " tokens, got ", tokens);
    FP_CHECK(epi != Epilogue::ROPE_CACHE, "linear on GPU: the matrix-core GEMV has no RoPE epilogue");
    FP_CHECK(ceil_div(a.n_out, int64_t(TC_ROWS / 2)) <= 0x7fffffff, "linear on GPU: too many weight rows");
    if (a.n_out == 0) return;
    const auto go = [&](auto dt_tag) {
        constexpr DType DT = decltype(dt_tag)::value;
        switch (epi) {
            case Epilogue::RESIDUAL: launch_gemv_tc<DT, Kernels, Epilogue::RESIDUAL>(a, tokens, stream); break;
            case Epilogue::SWIGLU: launch_gemv_tc<DT, Kernels, Epilogue::SWIGLU>(a, tokens, stream); break;
            default: launch_gemv_tc<DT, Kernels, Epilogue::PLAIN>(a, tokens, stream); break;
        }
    };
    if (dtype == DType::BF16)
        go(std::integral_constant<DType, DType::BF16>{});
    else
        go(std::integral_constant<DType, DType::F16>{});
    FP_GPU_CHECK_LAUNCH(name);
}

}  // namespace flashport::gpu
