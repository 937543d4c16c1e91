// linear's GEMV on matrix cores, for 2 to GEMV_TC_MAX_TOKENS tokens (batched decode): NVIDIA mma.sync
// m16n8k16 (linear_mma.cu, sm_80+) and AMD's 16x16x16 MFMA (linear_mfma.cu, gfx908/90a/94x) share this
// kernel; each supplies a fragment policy (Frag, below). out[t, n] = epilogue(sum_k x[t, k] · w[n, k] +
// bias[n]) with fp32 sums and the FMA GEMV's rounding points (linear.cu), so both kernels give what
// the composition of matmul and add / swiglu gives, up to the order of the fp32 sums.
//
// Why: a batch of b decode tokens multiplies [b, in] by [rows, in]ᵀ, a stream of the weight with 2·b
// FLOPs per weight element. The FMA GEMV re-reads x for every weight row it meets (it lost to cuBLAS
// at 8 tokens), and cuBLAS's skinny GEMMs read Qwen-7B's weights at 3.1-3.8 TB/s on the H200, against
// 4.2 for the one-token GEMV (docs/perf.md). Here each weight vector is loaded once, straight into
// matrix-instruction registers, and the tokens are the instruction's narrow side: the math is free
// and the kernel is a weight stream.
//
// One warp step covers 16 weight rows × 32 k. Each lane loads 16-byte vectors (8 elements) of the
// weight and reads, per tile of tokens, one 16-byte vector of x at the same k. A dot product does not
// care in which order k is summed, so the instruction's k order is chosen as a permutation of those
// 32 k under which every operand register is a half of such a vector: no shuffles before the
// products. Each vector feeds two instructions (its first and second 8 bytes).
//   NVIDIA (32 lanes, g = lane / 4, c = lane % 4): weight rows g and g + 8 and token g of each 8-token
//     tile, at k offset 8c.
//   AMD (64 lanes, i = lane % 16, j = lane / 16): weight row i and token i of each 16-token tile, at k
//     offset 8j.
//
// Block (second design, 2026-12-04; the first, 16 rows a block with its warps splitting k, read
// 3.3 TB/s at 8 tokens and 2.1 at 16: docs/perf.md, "A matrix-core GEMV for batched decode"): 256
// threads, each warp its own 16 weight rows (SwiGLU: 8 gate rows and their up rows, so that both sums
// meet in one warp), 128 rows a block on NVIDIA and 64 on AMD. The block walks k in chunks of
// TC_CHUNK: each lane requests the chunk's weight vectors (16 on NVIDIA, 8 on AMD) at once, the block
// copies the chunk of x (every token) into shared memory meanwhile, and the warps read x from there.
// So x crosses L2 once per 128 (64) weight rows instead of once per 16, and the bytes in flight are
// bounded by a chunk, not by a round of four steps. Products with few row blocks (Qwen-7B's 3584-row
// o_proj and down) also split k over TcSplit::splits blocks: each writes its fp32 sums to a workspace,
// and the last of a row block's splits to count in (an atomic counter it resets) adds them in split
// order and stores, so a result does not depend on timing. Every warp of a block makes the same
// number of matrix calls (zeros past the end): an MFMA is one instruction of the whole wave, and the
// HIP CPU Runtime's emulation makes it a meeting point of the block.
//
// Requirements (as the FMA GEMV's, gemv_ineligible_reason): x and weight fp16 or bf16 of one dtype, in
// a multiple of 8, rows 16-byte aligned. Launched dependent (runtime.h): a constant weight's first
// chunk is requested before the kernel ahead has finished.
#pragma once

#include <algorithm>
#include <type_traits>

#include "backends/gpu/linear_gemv.h"
#include "backends/gpu/ops_common.cuh"

namespace flashport::gpu {

constexpr int TC_THREADS = 256;  // fixed, never derived from WARP_SIZE (common.cuh)
constexpr int TC_TILE = 16;      // weight rows per warp: the instructions' M
constexpr int TC_STEP_K = 32;    // k per warp step
constexpr int TC_CHUNK = 256;    // k per chunk: 8 steps, whose weight vectors are requested together
constexpr int TC_X_PITCH = TC_CHUNK + 8;  // x's shared row in elements, padded 16 bytes against bank conflicts

// The split of k over blocks (grid.y = splits). splits == 1: no workspace. Else ws holds
// [splits][row blocks][rows a block][tokens a block] fp32 sums and counters one zeroed counter per row
// block (each launch leaves them zero again).
struct TcSplit {
    float* ws;
    unsigned* counters;
    int splits, chunks_per_split;
};

// The weight row behind row r (0-15) of warp w's tile in row block `block` (WARPS warps a block).
template <Epilogue EPI, int WARPS>
__device__ __forceinline__ int64_t tc_tile_row(const GemvArgs& a, int64_t block, int w, int r) {
    if constexpr (EPI == Epilogue::SWIGLU) {  // gate rows c0 .. c0 + 7, then their up rows
        const int64_t c0 = (block * WARPS + w) * (TC_TILE / 2);
        return r < TC_TILE / 2 ? c0 + r : a.n_out + c0 + r - TC_TILE / 2;
    } else {
        return (block * WARPS + w) * TC_TILE + r;
    }
}

// Frag: LANES (the warp the instruction is defined on), W_VECS (weight vectors per lane and step),
// TOK_TILE (tokens per instruction), ACC (accumulator floats per lane and token tile), acc_t, and
//   w_row(lane, v), k_off(lane), x_tok(lane): which weight row, k offset and token a lane loads;
//   mma<DT>(acc, w[W_VECS], x): acc += the step's products; acc_row / acc_tok(lane, i): where acc[i] sits.
// The kernel's body; each vendor file wraps it in a __global__ of its own name (linear_gemv_mma_kernel,
// linear_gemv_mfma_kernel), so the build's kernel list says which vendor's instructions a kernel needs
// (tools/hip_symbols.py). Launched with TC_THREADS threads, grid (row blocks, sp.splits).
template <DType DT, class Frag, int NT, Epilogue EPI>
__device__ __forceinline__ void linear_gemv_tc(const GemvArgs& a, const int tokens, const TcSplit& sp) {
    static_assert(EPI != Epilogue::ROPE_CACHE, "RoPE and the cache write run after the product (rope_qk_cache_write)");
    constexpr int WARPS = TC_THREADS / Frag::LANES, NTOK = NT * Frag::TOK_TILE, WV = Frag::W_VECS;
    constexpr int STEPS = TC_CHUNK / TC_STEP_K, ROWS = WARPS * TC_TILE;
    const int lane = int(threadIdx.x) % Frag::LANES, warp = int(threadIdx.x) / Frag::LANES;
    const int64_t block = int64_t(blockIdx.x);
    const int split = int(blockIdx.y);
    const int64_t last_row = (EPI == Epilogue::SWIGLU ? 2 * a.n_out : a.n_out) - 1;
    const int k_off = Frag::k_off(lane);

    const uint16_t* wrow[WV];  // a past-the-end row re-reads the last; its sums are never stored
#pragma unroll
    for (int v = 0; v < WV; ++v)
        wrow[v] = a.w + min(tc_tile_row<EPI, WARPS>(a, block, warp, Frag::w_row(lane, v)), last_row) * a.ldw + k_off;

    // This block's chunks of k.
    const int64_t chunks = (a.in + TC_CHUNK - 1) / TC_CHUNK;
    const int64_t c_lo = min(chunks, int64_t(split) * sp.chunks_per_split);
    const int64_t c_hi = min(chunks, c_lo + sp.chunks_per_split);

    // A chunk's weight vectors, zeros past in (in is a multiple of 8: a vector is wholly in or out).
    uint4 wv[STEPS][WV];
    const auto load_w = [&](int64_t chunk) {
#pragma unroll
        for (int s = 0; s < STEPS; ++s) {
            const int64_t k = chunk * TC_CHUNK + s * TC_STEP_K;
#pragma unroll
            for (int v = 0; v < WV; ++v)
                wv[s][v] = k + k_off < a.in ? __ldg(reinterpret_cast<const uint4*>(wrow[v] + k))
                                            : make_uint4(0, 0, 0, 0);
        }
    };
    // The chunk of x, every token (zeros for padding tokens and past in), into shared memory.
    __shared__ uint4 xs[NTOK][TC_X_PITCH / 8];  // 16-byte vectors of 8 elements
    const auto load_x = [&](int64_t chunk) {
        constexpr int VECS = NTOK * (TC_CHUNK / 8);
        for (int i = int(threadIdx.x); i < VECS; i += TC_THREADS) {
            const int t = i / (TC_CHUNK / 8), c8 = i % (TC_CHUNK / 8);
            const int64_t k = chunk * TC_CHUNK + c8 * 8;
            const uint4 v = t < tokens && k < a.in ? __ldg(reinterpret_cast<const uint4*>(a.x + t * a.ldx + k))
                                                   : make_uint4(0, 0, 0, 0);
            xs[t][c8] = v;
        }
    };

    typename Frag::acc_t acc[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[t] = typename Frag::acc_t{};
    // A model's weights are no kernel's output: the first chunk is requested while the kernel ahead
    // finishes; x (that kernel's output) and the residual only after it is done.
    if (!a.constant_weight) wait_for_prior_grid();
    if (c_lo < c_hi) load_w(c_lo);
    if (a.constant_weight) wait_for_prior_grid();
    allow_next_grid();
    for (int64_t chunk = c_lo; chunk < c_hi; ++chunk) {  // the same count in every warp of the block
        if (chunk != c_lo) load_w(chunk);
        __syncthreads();  // the previous chunk's x has been read
        load_x(chunk);
        __syncthreads();
#pragma unroll
        for (int s = 0; s < STEPS; ++s)
#pragma unroll
            for (int t = 0; t < NT; ++t) {
                const uint4 x = xs[t * Frag::TOK_TILE + Frag::x_tok(lane)][(s * TC_STEP_K + k_off) / 8];
                Frag::template mma<DT>(acc[t], wv[s], x);
            }
    }

    // Each warp's sums, [warp][row][token], through shared memory (the epilogue pairs rows of other lanes).
    __shared__ float sums[WARPS][TC_TILE][NTOK];
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
        for (int i = 0; i < Frag::ACC; ++i)
            sums[warp][Frag::acc_row(lane, i)][t * Frag::TOK_TILE + Frag::acc_tok(lane, i)] = acc[t][i];
    __syncthreads();

    // Split k: this block's sums to the workspace; the row block's last split to count in adds all
    // splits' in split order and goes on to the epilogue, the others are done.
    float* const ws_block = sp.splits > 1 ? sp.ws + block * (ROWS * NTOK) : nullptr;
    const int64_t split_stride = int64_t(gridDim.x) * ROWS * NTOK;
    if (sp.splits > 1) {  // uniform over the grid
        for (int i = int(threadIdx.x); i < ROWS * NTOK; i += TC_THREADS)
            ws_block[split * split_stride + i] = (&sums[0][0][0])[i];
        __threadfence();  // this thread's sums are visible GPU-wide before the block counts in
        __syncthreads();
        __shared__ int last;
        if (threadIdx.x == 0) {
            const bool is_last = atomicAdd(sp.counters + block, 1u) == unsigned(sp.splits - 1);
            if (is_last) {
                __threadfence();                      // acquire: the counts seen came after the sums
                atomicExch(sp.counters + block, 0u);  // ready for the next launch
            }
            last = is_last;
        }
        __syncthreads();
        if (!last) return;  // uniform over the block
        __threadfence();
    }
    // The value behind tile row r of warp w, token t: this block's sums, or all splits' in order.
    const auto total = [&](int w, int r, int t) {
        if (sp.splits == 1) return sums[w][r][t];
        const float* p = ws_block + (w * TC_TILE + r) * NTOK + t;
        float s = 0.0f;
        for (int k = 0; k < sp.splits; ++k) s += load_from_other_blocks(p + k * split_stride);
        return s;
    };

    const int64_t out_esize = a.out_dtype == DType::F32 ? 4 : 2;
    constexpr int TILE_COLS = EPI == Epilogue::SWIGLU ? TC_TILE / 2 : TC_TILE;  // out columns per warp tile
    for (int o = int(threadIdx.x); o < WARPS * TILE_COLS * tokens; o += TC_THREADS) {
        const int col = o % (WARPS * TILE_COLS), t = o / (WARPS * TILE_COLS);  // neighbours store neighbours
        const int w = col / TILE_COLS, r = col % TILE_COLS;
        const int64_t n = block * (WARPS * TILE_COLS) + col;
        if (n >= a.n_out) continue;
        char* out_row = static_cast<char*>(a.out) + t * a.ldo * out_esize;
        if constexpr (EPI == Epilogue::SWIGLU) {
            // out = round(round(silu(g)) · u) with g, u the rounded products (swiglu after matmul)
            const float bg = a.bias ? ops::load(a.bias, a.bias_dtype, n) : 0.0f;
            const float bu = a.bias ? ops::load(a.bias, a.bias_dtype, n + a.n_out) : 0.0f;
            const float g = ops::round_to_dtype(a.out_dtype, total(w, r, t) + bg);
            const float u = ops::round_to_dtype(a.out_dtype, total(w, r + TILE_COLS, t) + bu);
            ops::store(out_row, a.out_dtype, n, ops::silu_times(a.out_dtype, g, u));
        } else {
            float y = total(w, r, t) + (a.bias ? ops::load(a.bias, a.bias_dtype, n) : 0.0f);
            if constexpr (EPI == Epilogue::RESIDUAL)  // out = round(residual + round(y)); may be in place
                y = ops::load(static_cast<const char*>(a.residual) + t * a.ldr * out_esize, a.out_dtype, n) +
                    ops::round_to_dtype(a.out_dtype, y);
            ops::store(out_row, a.out_dtype, n, y);
        }
    }
}

// Weight rows a block covers: one 16-row tile per warp of Frag's width.
template <class Frag>
constexpr int tc_block_rows() {
    return TC_THREADS / Frag::LANES * TC_TILE;
}

// The split of k for a product: enough blocks for two per SM, each split at least two chunks long.
inline TcSplit tc_split_for(int64_t row_blocks, int64_t in) {
    const int64_t chunks = (in + TC_CHUNK - 1) / TC_CHUNK;
    const int64_t want = ceil_div(int64_t(2) * current_device_info().sm_count, row_blocks);
    const int64_t splits = std::clamp<int64_t>(std::min(want, chunks / 2), 1, 64);
    const int64_t per = ceil_div(chunks, splits);
    return {nullptr, nullptr, int(ceil_div(chunks, per)), int(per)};
}

// Token tiles for `tokens` (1, 2 or 4 of 8 on NVIDIA; 1 or 2 of 16 on AMD), the split and the launch.
// Kernels: the vendor's wrappers, Kernels::get<DT, NT, EPI>(), and Kernels::Frag their fragment policy.
template <DType DT, class Kernels, Epilogue EPI, int NT>
void launch_gemv_tc_tiles(const GemvArgs& a, int64_t tokens, cudaStream_t stream) {
    constexpr int ROWS = tc_block_rows<typename Kernels::Frag>();
    constexpr int NTOK = NT * Kernels::Frag::TOK_TILE;
    const int64_t cols_per_block = EPI == Epilogue::SWIGLU ? ROWS / 2 : ROWS;
    const int64_t row_blocks = ceil_div(a.n_out, cols_per_block);
    TcSplit sp = tc_split_for(row_blocks, a.in);
    const dim3 grid(unsigned(row_blocks), unsigned(sp.splits));
    if (sp.splits == 1) {
        launch_dependent(Kernels::template get<DT, NT, EPI>(), grid, TC_THREADS, 0, stream, a, int(tokens), sp);
        return;
    }
    // [splits][row blocks][ROWS][NTOK] sums, then the row blocks' counters (zeroed here, left zero).
    const size_t sums_bytes = size_t(sp.splits) * size_t(row_blocks) * ROWS * NTOK * sizeof(float);
    const size_t counter_bytes = size_t(row_blocks) * sizeof(unsigned);
    const StreamBuffer ws(sums_bytes + counter_bytes, stream, "linear on GPU: the matrix-core GEMV's split sums");
    sp.ws = static_cast<float*>(ws.data());
    sp.counters = reinterpret_cast<unsigned*>(static_cast<char*>(ws.data()) + sums_bytes);
    FP_GPU_CHECK(cudaMemsetAsync(sp.counters, 0, counter_bytes, stream), "linear on GPU: zeroing split counters");
    launch_dependent(Kernels::template get<DT, NT, EPI>(), grid, TC_THREADS, 0, stream, a, int(tokens), sp);
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
    FP_CHECK(ceil_div(a.n_out, int64_t(TC_TILE / 2)) <= 0x7fffffff, "linear on GPU: too many weight rows");
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
