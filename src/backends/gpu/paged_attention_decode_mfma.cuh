// Paged-KV split-KV decode on AMD matrix cores (CDNA: gfx908 fp16, gfx90a/940 fp16 and bf16), through
// mfma.cuh's v_mfma_f32_16x16x16. AMD-only; its portable sibling is paged_attention_decode_split_portable_kernel
// (paged_attention_decode.cuh), the kernel every other target runs. The workspace layout, the block's
// work and the merge of the splits by each group's last block (paged_attention_decode_block.cuh) are
// shared with both other split kernels.
//
// No AMD GPU was available: the kernel has run only under the HIP CPU Runtime, whose MFMA emulation
// follows AMD's published lane layouts (tests/gpu/test_mfma_emulation.cpp); the hip preset compiles it
// for every target (MFMA code on gfx908/90a/940, a trap body on gfx906/gfx1030, where the planner never
// picks it). Nothing here claims AMD speed.
//
// Why matrix cores in a memory-bound kernel: the FP32 kernel spends most of its issue slots on FMAs,
// conversions and shared-memory reads (docs/perf.md, decode); here a 16-key step of one wave is D/16
// MFMAs for S and D/16 for P V, and the 16 query rows of a GQA group (heads × query tokens, padded)
// are one MFMA tile, so every K/V byte feeds all of them.
//
// Work split: a block of 128 threads (two 64-lane waves) owns the 16 rows of decode_block<16, T> and a
// split's keys, in tiles of T (decode_portable_tile_tokens: 64, 32 at d256) copied to shared memory
// through the block table by all threads. Within a tile, wave w takes the 16-key steps w, w + 2, ...
// and keeps its own online softmax (m, l per row) and O; the two waves' results are merged through
// shared memory at the end. Per wave and 16-key step, as in attention_flash_mfma.cuh:
//   S^T (16 keys x 16 rows) = K (16 x D) . Q^T (D x 16): lane L gets row L % 16's scores of keys
//     4 (L / 16) + r, which is where the next MFMA wants P (its A operand);
//   O (16 rows x D) += P (16 x 16) . V (16 x D): lane L holds O[4 (L / 16) + r][16 c + L % 16].
// A row's statistics live in the four lanes L % 16 == row (XOR shuffles over 16 and 32). P is rounded
// to the input dtype before P V, as in the MFMA flash kernel. Keys past the slice are zero-filled, so
// the NaN the tests put in unused cache slots never reaches an MFMA; the mask makes their scores -inf.
// An invalid block id or seq_len makes the sequence's rows NaN, as in the portable kernel.
#pragma once

#include "backends/gpu/attention_flash_mfma.cuh"  // MFMA_WAVE, mfma_16x16x16, the row reductions
#include "backends/gpu/paged_attention_decode_block.cuh"

namespace flashport::gpu {

constexpr int DECODE_MFMA_THREADS = 128;  // two 64-lane waves
constexpr int DECODE_MFMA_ROWS = 16;      // one MFMA tile of query rows

template <int D>
struct DecodeMfmaTile {
    static constexpr int T = decode_portable_tile_tokens(D);  // keys per tile: the split granularity
    static constexpr int STEPS = T / 16;                      // 16-key MFMA steps per tile
    static constexpr int LD = D + 8;                          // 16-bit row stride: 16-byte rows
    static constexpr int CHUNKS = D / 8;                      // 16-byte chunks per row
    static constexpr int RP = D + 4;                          // fp32 row stride of the final merge
    static_assert(D % 16 == 0 && STEPS % 2 == 0, "whole MFMA chunks; the two waves take equal steps");
    static_assert(DECODE_MFMA_ROWS * RP * 4 <= T * LD * 2, "the merge reuses the K tile");
    static_assert((2 * T + DECODE_MFMA_ROWS) * LD * 2 <= 64 * 1024, "within the 64 KB LDS");
};

template <DType DT, int D>
__global__ void __launch_bounds__(DECODE_MFMA_THREADS)
    paged_attention_decode_split_mfma_kernel(PagedAttentionDecodeArgs a) {
#if defined(FLASHPORT_HIP_CPU) || FP_HAS_MFMA
    using Tile = DecodeMfmaTile<D>;
    constexpr int T = Tile::T, LD = Tile::LD, CHUNKS = Tile::CHUNKS, RP = Tile::RP, R = DECODE_MFMA_ROWS;
    constexpr int DC = D / 16;  // MFMA chunks of the head dim
    static_assert(DECODE_MFMA_THREADS == 2 * MFMA_WAVE, "two waves");

    alignas(16) __shared__ uint16_t q_s[R * LD];  // rows past nr are zero
    alignas(16) __shared__ uint16_t k_s[T * LD];
    alignas(16) __shared__ uint16_t v_s[T * LD];
    __shared__ float m_s[R], l_s[R];

    const int tid = int(threadIdx.x), wave = tid / MFMA_WAVE, lane = tid % MFMA_WAVE;
    const int col = lane % 16, grp = lane / 16;  // the MFMA layouts' lane coordinates
    const DecodeBlock work = decode_block<R, T>(a);
    const int nr = work.nr, kv_lo = work.kv_lo, kv_hi = work.kv_hi;
    int bad = !work.seq.ok;

    for (int e = tid; e < R * CHUNKS; e += DECODE_MFMA_THREADS) {
        const int r = e / CHUNKS, c = e % CHUNKS;
        uint4 val = make_uint4(0, 0, 0, 0);
        if (r < nr) val = *reinterpret_cast<const uint4*>(decode_q_row(a, work.b, decode_row(a, work, r)) + c * 8);
        *reinterpret_cast<uint4*>(q_s + r * LD + c * 8) = val;
    }
    // This lane's softmax row is `col`; padding rows (col >= nr) run like the others and are never stored.
    const int row_hi = col < nr ? decode_row_key_limit(a, work, col) : kv_hi;

    const uint16_t* kc = decode_cache_head(a.k_cache, a.k_stride, work.kvh);
    const uint16_t* vc = decode_cache_head(a.v_cache, a.v_stride, work.kvh);
    const int32_t* table = decode_table(a, work.b);

    float m = -INFINITY, l = 0.0f;
    fp_f32x4 o[DC];
#pragma unroll
    for (int c = 0; c < DC; ++c) o[c] = fp_f32x4{};
    const uint16_t* q_frag = q_s + col * LD + 4 * grp;  // B = Q^T: row col, d 16 c + 4 grp + e

    for (int j0 = kv_lo; j0 < kv_hi; j0 += T) {
        __syncthreads();  // the previous tile's K and V reads are done
        for (int e = tid; e < T * CHUNKS; e += DECODE_MFMA_THREADS) {
            const int t = e / CHUNKS, c = e % CHUNKS, j = j0 + t;
            uint4 kv = make_uint4(0, 0, 0, 0), vv = kv;  // keys past the slice are zeros, never stale or NaN
            if (j < kv_hi) {
                const int blk = j / a.block_size, slot = j - blk * a.block_size;
                const int page = table[blk];
                if (page >= 0 && page < a.num_blocks) {
                    kv = *reinterpret_cast<const uint4*>(kc + page * a.k_stride[0] + slot * a.k_stride[1] + c * 8);
                    vv = *reinterpret_cast<const uint4*>(vc + page * a.v_stride[0] + slot * a.v_stride[1] + c * 8);
                } else {
                    bad = 1;
                }
            }
            *reinterpret_cast<uint4*>(k_s + t * LD + c * 8) = kv;
            *reinterpret_cast<uint4*>(v_s + t * LD + c * 8) = vv;
        }
        __syncthreads();

        for (int step = wave; step < Tile::STEPS; step += 2) {
            const int t0 = 16 * step;
            fp_f32x4 s{};
            const uint16_t* k_frag = k_s + (t0 + col) * LD + 4 * grp;  // A = K: key t0 + col
#pragma unroll
            for (int c = 0; c < DC; ++c) {
                fp_i16x4 kf, qf;
#pragma unroll
                for (int e = 0; e < 4; ++e) kf[e] = short(k_frag[16 * c + e]), qf[e] = short(q_frag[16 * c + e]);
                s = mfma_16x16x16<DT>(kf, qf, s);
            }
            float p[4], step_max = -INFINITY;
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int j = j0 + t0 + 4 * grp + r;
                p[r] = j < kv_hi && j < row_hi ? s[r] * a.scale_log2 : -INFINITY;
                step_max = fmaxf(step_max, p[r]);
            }
            // Online softmax; a row with nothing seen yet keeps m_use = 0 (all its p are 0).
            const float m_new = fmaxf(m, mfma_row_max(step_max));
            const float m_use = m_new == -INFINITY ? 0.0f : m_new;
            const float alpha = fast_exp2(m - m_use);
            float sum = 0.0f;
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                p[r] = fast_exp2(p[r] - m_use);
                sum += p[r];
            }
            l = l * alpha + mfma_row_sum(sum);
            m = m_new;
            fp_i16x4 pf;
#pragma unroll
            for (int e = 0; e < 4; ++e) pf[e] = short(from_float<DT>(p[e]));
            const uint16_t* v_rows = v_s + (t0 + 4 * grp) * LD + col;  // B = V: keys t0 + 4 grp + e, column col
#pragma unroll
            for (int r = 0; r < 4; ++r) {  // O row 4 grp + r is scaled by that row's alpha
                const float al = FP_SHFL(static_cast<unsigned>(full_warp_mask()), alpha, 4 * grp + r, MFMA_WAVE);
#pragma unroll
                for (int c = 0; c < DC; ++c) o[c][r] *= al;
            }
#pragma unroll
            for (int c = 0; c < DC; ++c) {
                fp_i16x4 vf;
#pragma unroll
                for (int e = 0; e < 4; ++e) vf[e] = short(v_rows[e * LD + 16 * c]);
                o[c] = mfma_16x16x16<DT>(pf, vf, o[c]);
            }
        }
    }

    // Merge the two waves: wave 1 leaves its statistics and O (scaled to its own max) in shared memory
    // (the K tile, no longer read); wave 0 rescales both to the common max, normalises and stores.
    bad = __syncthreads_or(bad);
    float* o_s = reinterpret_cast<float*>(k_s);  // [R][RP]
    if (wave == 1) {
        if (grp == 0) m_s[col] = m, l_s[col] = l;
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
            for (int c = 0; c < DC; ++c) o_s[(4 * grp + r) * RP + 16 * c + col] = o[c][r];
    }
    __syncthreads();
    // Both waves run the merge's shuffles (every thread of a block reaches the same barriers and
    // shuffles: the HIP CPU Runtime checks it); only wave 0's results are stored.
    const bool store = wave == 0;
    const float m1 = m_s[col], l1 = l_s[col];
    const float m_all = fmaxf(m, m1);
    const float m_use = m_all == -INFINITY ? 0.0f : m_all;
    const float w0 = fast_exp2(m - m_use), w1 = fast_exp2(m1 - m_use);
    const float l_all = l * w0 + l1 * w1;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        const int row = 4 * grp + r;  // this lane's O rows; their statistics are in lane `row`
        const float a0 = FP_SHFL(static_cast<unsigned>(full_warp_mask()), w0, row, MFMA_WAVE);
        const float a1 = FP_SHFL(static_cast<unsigned>(full_warp_mask()), w1, row, MFMA_WAVE);
        const float lr = FP_SHFL(static_cast<unsigned>(full_warp_mask()), l_all, row, MFMA_WAVE);
        if (!store || row >= nr) continue;
        const DecodeRow dr = decode_row(a, work, row);
        const int64_t ws_row = decode_ws_row(a, work.b, dr);
#pragma unroll
        for (int c = 0; c < DC; ++c) {
            const int d = 16 * c + col;
            const float acc = o[c][r] * a0 + o_s[row * RP + d] * a1;
            const float val = bad ? NAN : lr == 0.0f ? 0.0f : acc / lr;  // no key seen: zeros; NaN l: NaN
            if (a.num_splits == 1)
                decode_out_row(a, work.b, dr)[d] = from_float<DT>(val);
            else
                *decode_partial<D>(a, work, ws_row, d) = val;
        }
    }
    if (store && grp == 0 && col < nr) {
        const DecodeRow dr = decode_row(a, work, col);
        decode_store_lse(a, work, dr, decode_ws_row(a, work.b, dr), bad ? NAN : softmax_lse2(m_all, l_all));
    }
    // num_splits > 1: the group's last block merges the partials, in the K tile (as the merge above).
    using Combine = DecodeCombineShared<D, DECODE_MFMA_THREADS>;
    static_assert(sizeof(Combine) <= sizeof(k_s), "the merge reuses the K tile");
    decode_finish_split<DT, D, DECODE_MFMA_THREADS>(a, work, k_s);
#else
    (void)a;
    __builtin_trap();  // no matrix cores on this target (gfx906, RDNA); the planner never picks it here
#endif
}

template <DType DT, int D>
void launch_paged_attention_decode_split_mfma(const PagedAttentionDecodeArgs& a, cudaStream_t stream) {
    const dim3 grid(unsigned(a.num_splits * a.row_chunks), unsigned(a.n_kv_heads), unsigned(a.batch));
    launch_kernel(paged_attention_decode_split_mfma_kernel<DT, D>, grid, DECODE_MFMA_THREADS, 0, stream, a);
    FP_GPU_CHECK_LAUNCH("paged_attention_decode_split_mfma_kernel");
}

// Instantiated once per dtype in paged_attention_decode_mfma_{f16,bf16}.cu (HIP builds only).
template <DType DT>
void paged_attention_decode_split_mfma(const PagedAttentionDecodeArgs& args, int head_dim, void* stream) {
    dispatch_head_dim<DecodeHeadDims>(head_dim, "paged decode attention (MFMA)", [&](auto d) {
        launch_paged_attention_decode_split_mfma<DT, decltype(d)::value>(args, as_stream(stream));
    });
}

template <DType DT>
int paged_attention_decode_mfma_blocks_per_sm(int head_dim) {
    return dispatch_head_dim<DecodeHeadDims>(head_dim, "paged decode attention (MFMA)", [](auto d) {
        static const int n = [] {
            int blocks = 0;
            FP_GPU_CHECK(
                cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                    &blocks, paged_attention_decode_split_mfma_kernel<DT, decltype(d)::value>, DECODE_MFMA_THREADS, 0),
                "querying the occupancy of paged_attention_decode_split_mfma_kernel");
            return blocks > 0 ? blocks : 1;
        }();
        return n;
    });
}

}  // namespace flashport::gpu
