// GPU decode attention against a paged KV cache, split-KV (FlashDecoding: Dao, Haziza, Massa, Sizov
// 2023): a few query tokens per sequence against a long cache, so the work is reading K and V once at
// full bandwidth, and one sequence must still fill the GPU.
//
// Computes, for every sequence b, query token i < q_len and head h, out = softmax(scale · q kᵀ + causal
// mask) v over the sequence's seq_lens[b] keys, read through the block table; optionally the LSE.
// Layout: flashport/paged_attention.h (PagedAttentionDecodeArgs carries the strides).
// Variants: fp16 / bf16 storage × DecodeHeadDims (head_dim_switch.h; the code is generic, these are the
// instances), fp32 accumulation; causal, GQA ratio, q_len and block size are run-time values.
//
// Two kernels:
//   paged_attention_decode_split_portable_kernel    grid (num_splits · row_chunks, n_kv_heads, batch), 128 threads. A
//       block serves up to DECODE_ROWS query rows that share one KV head (the heads of a GQA group ×
//       the query tokens: Qwen2.5-7B's 7 heads × 1 token fit one block), so each K/V byte read from
//       memory feeds every head of its group. It walks its slice of the keys in tiles of T tokens:
//       16-byte loads through the block table into registers (the next tile's loads are issued before
//       the current tile is computed, so they are in flight during the math), then shared memory;
//       S = Q Kᵀ with 4 lanes per key; an online softmax (m, l per row, one warp per row); O += P V with
//       each thread owning 8 columns of every row. With one split it writes out and LSE directly;
//       otherwise a normalised partial O and its LSE (log2) go to the workspace, and the last of the
//       num_splits blocks of its (sequence, KV head, row chunk) to finish merges them into out and
//       LSE (decode_finish_split: one kernel per decode, no second launch).
//   paged_attention_decode_combine_kernel  one block per (batch, token, head) row: merges the splits,
//       O = Σ_s 2^(lse_s − M) O_s / Σ_s 2^(lse_s − M), and writes out and LSE. Only with
//       DecodeCombine::SEPARATE (FLASHPORT_DECODE_COMBINE=separate), the two-kernel design kept for
//       A/B timing; its body is decode_combine_row, the same code the fused merge runs.
// Which rows, keys and split a block owns, and where its results go, is paged_attention_decode_block.cuh,
// shared with the mma split kernel.
//
// Invalid cache metadata found on the device (seq_len outside [0, capacity], a block id outside
// [0, num_blocks)) is never dereferenced; the affected rows become NaN (out and LSE).
//
// Portable: no inline assembly, no literal warp width; reductions use common.cuh's group/warp/block
// helpers. Shared memory stays under 48 KB (static) for every head dim, within HIP's 64 KB LDS.
// On NVIDIA sm_80+ the tensor-core sibling nvidia_only::paged_attention_decode_split_mma_kernel
// (paged_attention_decode_mma.cuh) replaces the split kernel by default; all split kernels write the
// same partials and merge them the same way.
#pragma once

#include "backends/gpu/attention_common.cuh"
#include "backends/gpu/paged_attention_decode_block.cuh"
#include "backends/gpu/runtime.h"

namespace flashport::gpu {

constexpr int DECODE_THREADS = 128;  // a multiple of every warp size: 4 NVIDIA warps, 2 CDNA wavefronts
constexpr int DECODE_LPT = 4;        // lanes that share one key in S = Q Kᵀ
// The separate combine kernel's block. 256 threads: each row's S partials are read by 256/(D/4) split
// groups at once, and decode_combine_row's loop is unrolled so a thread has several loads in flight
// (the combine is latency-bound: at batch 1 it is 28 blocks reading ~30 KB each from L2).
constexpr int COMBINE_THREADS = 256;

// Tile geometry per head dim. T keys per tile, chosen so K + V tiles, Q and P fit in 48 KB.
template <int D>
struct DecodeTile {
    static constexpr int CHUNKS = D / 8;  // 16-byte chunks per row
    static constexpr int T = decode_portable_tile_tokens(D);
    static constexpr int TP = DECODE_THREADS / DECODE_LPT;  // key slots in Q Kᵀ
    static constexpr int TPT = T / TP;                      // keys per thread in Q Kᵀ
    // K rows padded so the 8 lanes of one 128-byte shared-memory wavefront (2 keys × 4 lanes, 16 bytes
    // each) fall in distinct banks: the pitch is 64 bytes more than a multiple of 128.
    static constexpr int LDK = D + 8 * DECODE_LPT;
    static constexpr int LDV = D + 8;                     // 16-byte aligned rows
    static constexpr int G = DECODE_THREADS / CHUNKS;     // key groups in P V (and loader rows per pass)
    static constexpr int TG = T / G;                      // keys per group, contiguous
    static constexpr int LOADS = T * CHUNKS / DECODE_THREADS;  // 16-byte loads per thread per tile, each of K and V
    static_assert(D % 8 == 0 && CHUNKS % DECODE_LPT == 0 && DECODE_THREADS % CHUNKS == 0, "head_dim");
    static_assert(TPT >= 1 && T % TP == 0 && TG % 4 == 0 && T % G == 0, "tile shape");
};

template <DType DT, int D>
__global__ void __launch_bounds__(DECODE_THREADS)
    paged_attention_decode_split_portable_kernel(PagedAttentionDecodeArgs a) {
    using Tile = DecodeTile<D>;
    constexpr int T = Tile::T, CHUNKS = Tile::CHUNKS, LDK = Tile::LDK, LDV = Tile::LDV, TP = Tile::TP;
    constexpr int TPT = Tile::TPT, G = Tile::G, TG = Tile::TG, LOADS = Tile::LOADS;
    constexpr int NW = DECODE_THREADS / WARP_SIZE;               // warps per block
    constexpr int RPW = (DECODE_ROWS + NW - 1) / NW;             // softmax rows per warp
    constexpr int R = DECODE_ROWS;

    alignas(16) __shared__ uint16_t k_s[T * LDK];
    alignas(16) __shared__ uint16_t v_s[T * LDV];
    alignas(16) __shared__ float q_s[R * D];  // q · scale · log2(e), fp32
    alignas(16) __shared__ float p_s[R * T];  // S, then P, of the current tile
    __shared__ float alpha_s[R], m_s[R], l_s[R];
    static_assert(G * D * sizeof(float) <= sizeof(k_s), "the final reduction reuses the K tile");

    const int tid = int(threadIdx.x), warp = tid / WARP_SIZE, lane = tid % WARP_SIZE;
    const DecodeBlock work = decode_block<R, T>(a);
    const int nr = work.nr, kv_lo = work.kv_lo, kv_hi = work.kv_hi;
    int bad = !work.seq.ok;

    int row_hi[R];  // causal limit of each row
#pragma unroll
    for (int r = 0; r < R; ++r) row_hi[r] = decode_row_key_limit(a, work, r);

    for (int e = tid; e < nr * D; e += DECODE_THREADS) {
        const int r = e / D, d = e % D;
        q_s[r * D + d] = to_float<DT>(decode_q_row(a, work.b, decode_row(a, work, r))[d]) * a.scale_log2;
    }

    // Loader: thread owns chunk c_ld of keys t_ld + u·G (u < LOADS); the same mapping serves P V.
    const int c_ld = tid % CHUNKS, t_ld = tid / CHUNKS;
    const uint16_t* kc = decode_cache_head(a.k_cache, a.k_stride, work.kvh) + c_ld * 8;
    const uint16_t* vc = decode_cache_head(a.v_cache, a.v_stride, work.kvh) + c_ld * 8;
    const int32_t* table = decode_table(a, work.b);
    uint4 kr[LOADS], vr[LOADS];
    auto load_tile = [&](int j0) {
#pragma unroll
        for (int u = 0; u < LOADS; ++u) {
            const int j = j0 + t_ld + u * G;
            kr[u] = make_uint4(0, 0, 0, 0);  // keys past the slice are zeros, never stale or NaN
            vr[u] = make_uint4(0, 0, 0, 0);
            if (j < kv_hi) {
                const int blk = j / a.block_size, slot = j - blk * a.block_size;
                const int page = table[blk];
                if (page >= 0 && page < a.num_blocks) {
                    kr[u] = *reinterpret_cast<const uint4*>(kc + page * a.k_stride[0] + slot * a.k_stride[1]);
                    vr[u] = *reinterpret_cast<const uint4*>(vc + page * a.v_stride[0] + slot * a.v_stride[1]);
                } else {
                    bad = 1;
                }
            }
        }
    };

    float m_w[RPW], l_w[RPW];  // running max (log2 domain) and sum of the rows this warp owns
#pragma unroll
    for (int i = 0; i < RPW; ++i) m_w[i] = -INFINITY, l_w[i] = 0.0f;
    float o[R][8];  // columns c_ld·8 .. +8 of every row, over keys of group t_ld
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int i = 0; i < 8; ++i) o[r][i] = 0.0f;

    const int h_s = tid % DECODE_LPT, tp = tid / DECODE_LPT;
    const int n_tiles = kv_hi > kv_lo ? (kv_hi - kv_lo + T - 1) / T : 0;
    if (n_tiles > 0) load_tile(kv_lo);
    for (int it = 0; it < n_tiles; ++it) {
        const int j0 = kv_lo + it * T;
        __syncthreads();  // the previous tile's K, V and P reads are done
#pragma unroll
        for (int u = 0; u < LOADS; ++u) {
            *reinterpret_cast<uint4*>(k_s + (t_ld + u * G) * LDK + c_ld * 8) = kr[u];
            *reinterpret_cast<uint4*>(v_s + (t_ld + u * G) * LDV + c_ld * 8) = vr[u];
        }
        __syncthreads();
        if (it + 1 < n_tiles) load_tile(j0 + T);  // in flight while this tile is computed

        // S = Q Kᵀ: lane h_s of key slot tp sums chunks h_s, h_s + 4, ... of keys tp + TP·u.
        float s[TPT][R];
#pragma unroll
        for (int u = 0; u < TPT; ++u)
#pragma unroll
            for (int r = 0; r < R; ++r) s[u][r] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < CHUNKS / DECODE_LPT; ++kk) {
            const int c = h_s + DECODE_LPT * kk;
            float kf[TPT][8];
#pragma unroll
            for (int u = 0; u < TPT; ++u)
                unpack8<DT>(*reinterpret_cast<const uint4*>(k_s + (tp + TP * u) * LDK + c * 8), kf[u]);
#pragma unroll
            for (int r = 0; r < R; ++r) {
                if (r < nr) {
                    const float4 qa = *reinterpret_cast<const float4*>(q_s + r * D + c * 8);
                    const float4 qb = *reinterpret_cast<const float4*>(q_s + r * D + c * 8 + 4);
#pragma unroll
                    for (int u = 0; u < TPT; ++u) {
                        float x = s[u][r];
                        x = fmaf(qa.x, kf[u][0], x);
                        x = fmaf(qa.y, kf[u][1], x);
                        x = fmaf(qa.z, kf[u][2], x);
                        x = fmaf(qa.w, kf[u][3], x);
                        x = fmaf(qb.x, kf[u][4], x);
                        x = fmaf(qb.y, kf[u][5], x);
                        x = fmaf(qb.z, kf[u][6], x);
                        x = fmaf(qb.w, kf[u][7], x);
                        s[u][r] = x;
                    }
                }
            }
        }
#pragma unroll
        for (int u = 0; u < TPT; ++u) {
            const int t = tp + TP * u, j = j0 + t;
#pragma unroll
            for (int r = 0; r < R; ++r) {
                if (r < nr) {  // nr is uniform over the block, so every lane of a group reduces
                    const float x = group_sum<DECODE_LPT>(s[u][r]);
                    if (h_s == 0) p_s[r * T + t] = j < kv_hi && j < row_hi[r] ? x : -INFINITY;
                }
            }
        }
        __syncthreads();

        // Online softmax, one warp per row (rows warp, warp + NW, ...). A warp without a live row still
        // takes part in the reductions, so every thread of the block reaches the same shuffles (not
        // needed on a GPU, where only a warp's own lanes must agree, but it keeps the kernel checkable
        // on the HIP CPU Runtime, vendor/hip_cpu.h, at the cost of two idle reductions).
#pragma unroll
        for (int i = 0; i < RPW; ++i) {
            const int r = warp + NW * i;
            const bool live = r < nr;
            float mx = -INFINITY;
            if (live)
                for (int t = lane; t < T; t += WARP_SIZE) mx = fmaxf(mx, p_s[r * T + t]);
            mx = warp_max(mx);
            const float m_new = fmaxf(m_w[i], mx);
            const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // nothing seen yet: all p are 0
            float sum = 0.0f;
            if (live)
                for (int t = lane; t < T; t += WARP_SIZE) {
                    const float p = exp2f(p_s[r * T + t] - m_use);
                    p_s[r * T + t] = p;
                    sum += p;
                }
            sum = warp_sum(sum);
            const float alpha = exp2f(m_w[i] - m_use);
            l_w[i] = l_w[i] * alpha + sum;
            m_w[i] = m_new;
            if (live && lane == 0) alpha_s[r] = alpha;
        }
        __syncthreads();

        // O = alpha · O + P V over this thread's TG contiguous keys.
#pragma unroll
        for (int r = 0; r < R; ++r) {
            if (r < nr) {
                const float al = alpha_s[r];
#pragma unroll
                for (int i = 0; i < 8; ++i) o[r][i] *= al;
            }
        }
#pragma unroll
        for (int t4 = 0; t4 < TG; t4 += 4) {
            const int tb = t_ld * TG + t4;
            float pr[R][4];
#pragma unroll
            for (int r = 0; r < R; ++r) {
                if (r < nr) {
                    const float4 p4 = *reinterpret_cast<const float4*>(p_s + r * T + tb);
                    pr[r][0] = p4.x, pr[r][1] = p4.y, pr[r][2] = p4.z, pr[r][3] = p4.w;
                }
            }
#pragma unroll
            for (int q4 = 0; q4 < 4; ++q4) {
                float vf[8];
                unpack8<DT>(*reinterpret_cast<const uint4*>(v_s + (tb + q4) * LDV + c_ld * 8), vf);
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    if (r < nr) {
#pragma unroll
                        for (int i = 0; i < 8; ++i) o[r][i] = fmaf(pr[r][q4], vf[i], o[r][i]);
                    }
                }
            }
        }
    }

    // Epilogue: sum the G key groups' partial O per row through shared memory, normalise, store.
    bad = __syncthreads_or(bad);
    if (lane == 0) {
#pragma unroll
        for (int i = 0; i < RPW; ++i) {
            const int r = warp + NW * i;
            if (r < nr) m_s[r] = m_w[i], l_s[r] = l_w[i];
        }
    }
    float* red = reinterpret_cast<float*>(k_s);  // [G][D]; the K tile is no longer read
#pragma unroll
    for (int r = 0; r < R; ++r) {
        if (r < nr) {
            __syncthreads();  // m_s/l_s written; the previous row's red reads are done
            *reinterpret_cast<float4*>(red + t_ld * D + c_ld * 8) = make_float4(o[r][0], o[r][1], o[r][2], o[r][3]);
            *reinterpret_cast<float4*>(red + t_ld * D + c_ld * 8 + 4) = make_float4(o[r][4], o[r][5], o[r][6], o[r][7]);
            __syncthreads();
            const DecodeRow row = decode_row(a, work, r);
            const int64_t ws_row = decode_ws_row(a, work.b, row);
            const float l = l_s[r], m = m_s[r];
            for (int d = tid; d < D; d += DECODE_THREADS) {
                float acc = 0.0f;
#pragma unroll
                for (int g = 0; g < G; ++g) acc += red[g * D + d];
                const float val = bad ? NAN : l == 0.0f ? 0.0f : acc / l;  // no key seen: zeros; NaN l: NaN
                if (a.num_splits == 1)
                    decode_out_row(a, work.b, row)[d] = from_float<DT>(val);
                else
                    *decode_partial<D>(a, work, ws_row, d) = val;
            }
            if (tid == 0) decode_store_lse(a, work, row, ws_row, bad ? NAN : softmax_lse2(m, l));
        }
    }
    // num_splits > 1: the group's last block merges the partials, in the K tile (no longer read).
    using Combine = DecodeCombineShared<D, DECODE_THREADS>;
    static_assert(sizeof(Combine) <= sizeof(k_s), "the merge reuses the K tile");
    decode_finish_split<DT, D, DECODE_THREADS>(a, work, k_s);
}

template <DType DT, int D>
__global__ void __launch_bounds__(COMBINE_THREADS) paged_attention_decode_combine_kernel(PagedAttentionDecodeArgs a) {
    __shared__ DecodeCombineShared<D, COMBINE_THREADS> sh;
    wait_for_prior_grid();  // launched dependent (launch_dependent): nothing read before this
    allow_next_grid();      // the next kernel's wait_for_prior_grid still waits for this grid to finish
    const int64_t row = int64_t(blockIdx.x);  // (b · q_len + qi) · n_heads + h
    const int64_t token = row / a.n_heads;
    // A varlen sequence's rows past its own query count have no partials (decode_block).
    if (int(token % a.q_len) >= decode_query_span(a, int(token / a.q_len)).len) return;
    decode_combine_row<DT, D, COMBINE_THREADS>(a, row, sh);
}

template <DType DT, int D>
void launch_paged_attention_decode_split_portable(const PagedAttentionDecodeArgs& a, cudaStream_t stream) {
    const dim3 grid(unsigned(a.num_splits * a.row_chunks), unsigned(a.n_kv_heads), unsigned(a.batch));
    launch_kernel(paged_attention_decode_split_portable_kernel<DT, D>, grid, DECODE_THREADS, 0, stream, a);
    FP_GPU_CHECK_LAUNCH("paged_attention_decode_split_portable_kernel");
}

template <DType DT, int D>
void launch_paged_attention_decode_combine(const PagedAttentionDecodeArgs& a, cudaStream_t stream) {
    const unsigned rows = unsigned(int64_t(a.batch) * a.q_len * a.n_heads);
    launch_dependent(paged_attention_decode_combine_kernel<DT, D>, rows, COMBINE_THREADS, 0, stream, a);
    FP_GPU_CHECK_LAUNCH("paged_attention_decode_combine_kernel");
}

// Queried once per instance (the first call on the current device decides).
template <DType DT, int D>
int split_portable_blocks_per_sm() {
    static const int n = [] {
        int blocks = 0;
        FP_GPU_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                         &blocks, paged_attention_decode_split_portable_kernel<DT, D>, DECODE_THREADS, 0),
                     "querying the occupancy of paged_attention_decode_split_portable_kernel");
        return blocks > 0 ? blocks : 1;
    }();
    return n;
}

// Instantiated once per dtype in paged_attention_decode_{f16,bf16}.cu.
template <DType DT>
void paged_attention_decode_split_portable(const PagedAttentionDecodeArgs& args, int head_dim, void* stream) {
    dispatch_head_dim<DecodeHeadDims>(head_dim, "paged decode attention", [&](auto d) {
        launch_paged_attention_decode_split_portable<DT, decltype(d)::value>(args, as_stream(stream));
    });
}

template <DType DT>
void paged_attention_decode_combine(const PagedAttentionDecodeArgs& args, int head_dim, void* stream) {
    dispatch_head_dim<DecodeHeadDims>(head_dim, "paged decode attention", [&](auto d) {
        launch_paged_attention_decode_combine<DT, decltype(d)::value>(args, as_stream(stream));
    });
}

template <DType DT>
int paged_attention_decode_portable_blocks_per_sm(int head_dim) {
    return dispatch_head_dim<DecodeHeadDims>(head_dim, "paged decode attention", [](auto d) {
        return split_portable_blocks_per_sm<DT, decltype(d)::value>();
    });
}

}  // namespace flashport::gpu
