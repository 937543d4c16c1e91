// GPU flash attention forward on AMD matrix cores (CDNA: gfx908, gfx90a, gfx940), through mfma.cuh's
// v_mfma_f32_16x16x16 (f16, and bf16 `_1k` on gfx90a/940). First version: correctness over speed.
// No AMD GPU was available: the kernel has run only under the HIP CPU Runtime, whose MFMA emulation
// follows AMD's published lane layouts (tests/gpu/test_mfma_emulation.cpp); the hip preset compiles it
// for every target (MFMA code on gfx908/90a/940, a trap body on gfx906/gfx1030) and the dispatcher
// picks it by the device's arch (attention_gpu.h). Nothing here claims AMD speed.
//
// Same contract as the portable kernel (attention_flash_portable.cuh): AttentionArgs, online softmax in
// the log2 domain, causal/window/GQA/varlen/paged, LSE, NaN rows for broken metadata; it reuses that
// kernel's tile loaders and block entry.
//
// Work split: a block of 128 threads (two 64-lane waves) owns BR = 32 query rows, 16 per wave, and
// walks the keys in tiles of BC = 64 (four 16-key MFMA tiles). Per wave and 16-key tile:
//   S^T (16 keys x 16 queries) = K (16 x D) . Q^T (D x 16): D/16 MFMAs. Computing the transpose puts
//     lane L's four scores (query L % 16, keys 4 (L / 16) + r) exactly where the next MFMA wants P:
//     the A operand's lane i + 16 (k / 4), element k % 4 (mfma.cuh's layouts).
//   O (16 queries x D) += P (16 x 16) . V (16 x D): D/16 MFMAs, lane L holding O[4 (L / 16) + r][16 c + L % 16].
// A query's statistics (m, l) live in the four lanes L % 16 == q, reduced with XOR shuffles over 16
// and 32; an O row's scale factor comes from lane q by one shuffle per register. P is rounded to the
// input dtype before PV, as in the NVIDIA mma kernel. Head dims that are not a multiple of 16 (40) run
// padded to the next one (DP), the pad columns zero in shared memory.
#pragma once

#include "backends/gpu/attention_flash_portable.cuh"
#include "backends/gpu/mfma.cuh"

namespace flashport::gpu {

constexpr int MFMA_WAVE = 64;                   // MFMA instructions are defined on 64-lane waves
constexpr int MFMA_THREADS = PORTABLE_THREADS;  // two waves; the portable tile loaders assume 128 threads

template <int D>
struct MfmaTile {
    static constexpr int DP = (D + 15) / 16 * 16;  // head dim padded to whole 16-wide MFMA chunks
    static constexpr int BR = 2 * 16;              // two waves of 16 query rows
    static constexpr int BC = 64;                  // keys per tile: four 16-key MFMA tiles
    static constexpr int LD = DP + 8;              // shared-memory row stride (16-byte rows)
};

// v_mfma_f32_16x16x16 in the storage dtype.
template <DType DT>
__device__ __forceinline__ fp_f32x4 mfma_16x16x16(fp_i16x4 a, fp_i16x4 b, fp_f32x4 c) {
    if constexpr (DT == DType::BF16)
        return fp_mfma_16x16x16_bf16(a, b, c);
    else
        return fp_mfma_16x16x16_f16(a, b, c);
}

// Both reductions of a query's statistics: its four lanes are L, L ^ 16, L ^ 32, L ^ 48.
__device__ __forceinline__ float mfma_row_max(float x) {
    x = fmaxf(x, FP_SHFL_XOR(static_cast<unsigned>(full_warp_mask()), x, 16, MFMA_WAVE));
    return fmaxf(x, FP_SHFL_XOR(static_cast<unsigned>(full_warp_mask()), x, 32, MFMA_WAVE));
}
__device__ __forceinline__ float mfma_row_sum(float x) {
    x += FP_SHFL_XOR(static_cast<unsigned>(full_warp_mask()), x, 16, MFMA_WAVE);
    return x + FP_SHFL_XOR(static_cast<unsigned>(full_warp_mask()), x, 32, MFMA_WAVE);
}

template <DType DT, int D>
__global__ void __launch_bounds__(MFMA_THREADS) flash_fwd_mfma_kernel(AttentionArgs args) {
#if defined(FLASHPORT_HIP_CPU) || FP_HAS_MFMA
    using Tile = MfmaTile<D>;
    constexpr int DP = Tile::DP, BR = Tile::BR, BC = Tile::BC, LD = Tile::LD;
    constexpr int DC = DP / 16, KT = BC / 16;  // MFMA chunks of the head dim, 16-key tiles per key tile
    static_assert(D % 8 == 0 && BR == 16 * (MFMA_THREADS / MFMA_WAVE), "tile shape");

    alignas(16) __shared__ uint16_t q_s[BR * LD];
    alignas(16) __shared__ uint16_t kv_s[BC * LD];  // K, then V of the same tile

    const int tid = int(threadIdx.x), wave = tid / MFMA_WAVE, lane = tid % MFMA_WAVE;
    const int col = lane % 16, grp = lane / 16;  // the MFMA layouts' lane coordinates
    FlashBlock blk;
    if (!enter_flash_block<DT, BR, false>(args, blk)) return;
    const int b = blk.b, i0 = blk.i0, rows_valid = blk.rows, q_len = blk.seq.q_len, kv_len = blk.seq.kv_len;
    const FlashBases base = flash_bases(args, blk);
    bool bad_block = false;
    if constexpr (DP != D) {  // the loaders write D columns; the pad stays zero for the whole call
        for (int e = tid; e < BR * (DP - D); e += MFMA_THREADS) q_s[e / (DP - D) * LD + D + e % (DP - D)] = 0;
        for (int e = tid; e < BC * (DP - D); e += MFMA_THREADS) kv_s[e / (DP - D) * LD + D + e % (DP - D)] = 0;
    }
    load_tile_16b<D, BR, LD>(q_s, base.q + int64_t(i0) * args.q_stride[1], args.q_stride[1], rows_valid,
                             args.head_dim);

    const DeviceKeyRange first = device_visible_keys(i0, q_len, kv_len, args.causal, args.window_left);
    const DeviceKeyRange last = device_visible_keys(i0 + rows_valid - 1, q_len, kv_len, args.causal, args.window_left);
    const int64_t key_lo = first.lo, key_hi = last.hi;

    // This lane keeps the statistics of query row `row` (wave's row col); O holds rows 4 grp + r.
    const int row = i0 + 16 * wave + col;
    const DeviceKeyRange keys = device_visible_keys(row, q_len, kv_len, args.causal, args.window_left);
    float m = -INFINITY, l = 0.0f;
    fp_f32x4 o[DC];
#pragma unroll
    for (int c = 0; c < DC; ++c) o[c] = fp_f32x4{};
    const uint16_t* q_row = q_s + (16 * wave + col) * LD + 4 * grp;  // B = Q^T: query col, d 16 c + 4 grp + e

    for (int64_t j0 = key_lo / BC * BC; j0 < key_hi; j0 += BC) {
        const int cols_valid = int(min(int64_t(BC), int64_t(kv_len) - j0));
        __syncthreads();  // the previous tile's V reads are done before K overwrites kv_s
        load_kv_tile_16b<D, BC, LD>(kv_s, args, base.k, args.k_stride, b, int(j0), cols_valid, bad_block);
        __syncthreads();

        // S^T per 16-key tile t: lane L gets keys j0 + 16 t + 4 grp + r of query `row`, scaled and masked.
        float p[KT][4];
        float tile_max = -INFINITY;
#pragma unroll
        for (int t = 0; t < KT; ++t) {
            fp_f32x4 s{};
            const uint16_t* k_row = kv_s + (16 * t + col) * LD + 4 * grp;  // A = K: key 16 t + col
#pragma unroll
            for (int c = 0; c < DC; ++c) {
                fp_i16x4 kf, qf;
#pragma unroll
                for (int e = 0; e < 4; ++e) kf[e] = short(k_row[16 * c + e]), qf[e] = short(q_row[16 * c + e]);
                s = mfma_16x16x16<DT>(kf, qf, s);
            }
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int64_t j = j0 + 16 * t + 4 * grp + r;
                p[t][r] = j >= keys.lo && j < keys.hi ? s[r] * args.scale_log2 : -INFINITY;
                tile_max = fmaxf(tile_max, p[t][r]);
            }
        }

        // Online softmax (as the portable kernel: a row with nothing seen yet keeps m_use = 0).
        const float m_new = fmaxf(m, mfma_row_max(tile_max));
        const float m_use = m_new == -INFINITY ? 0.0f : m_new;
        const float alpha = fast_exp2(m - m_use);
        float row_sum = 0.0f;
#pragma unroll
        for (int t = 0; t < KT; ++t)
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                p[t][r] = fast_exp2(p[t][r] - m_use);
                row_sum += p[t][r];
            }
        l = l * alpha + mfma_row_sum(row_sum);
        m = m_new;
#pragma unroll
        for (int r = 0; r < 4; ++r) {  // O row 4 grp + r is the statistics of lane 4 grp + r
            const float a = FP_SHFL(static_cast<unsigned>(full_warp_mask()), alpha, 4 * grp + r, MFMA_WAVE);
#pragma unroll
            for (int c = 0; c < DC; ++c) o[c][r] *= a;
        }

        __syncthreads();  // all K reads are done
        load_kv_tile_16b<D, BC, LD>(kv_s, args, base.v, args.v_stride, b, int(j0), cols_valid, bad_block);
        __syncthreads();

        // O += P V: A = P (query col, keys 4 grp + e of tile t), B = V (keys 16 t + 4 grp + e, column 16 c + col).
#pragma unroll
        for (int t = 0; t < KT; ++t) {
            fp_i16x4 pf;
#pragma unroll
            for (int e = 0; e < 4; ++e) pf[e] = short(from_float<DT>(p[t][e]));
            const uint16_t* v_rows = kv_s + (16 * t + 4 * grp) * LD + col;
#pragma unroll
            for (int c = 0; c < DC; ++c) {
                fp_i16x4 vf;
#pragma unroll
                for (int e = 0; e < 4; ++e) vf[e] = short(v_rows[e * LD + 16 * c]);
                o[c] = mfma_16x16x16<DT>(pf, vf, o[c]);
            }
        }
    }

    // Normalise and store (the portable kernel's rules: zeros and LSE -inf for a row that saw no key,
    // NaN for a NaN score, every row NaN when a paged block id was out of range).
    const bool poisoned = __syncthreads_or(bad_block);
    const float inv_l = poisoned ? __int_as_float(0x7fc00000) : softmax_inv_sum(l);
    uint16_t* out = static_cast<uint16_t*>(args.out) + b * args.o_stride[0] + blk.seq.q_row0 * args.o_stride[1] +
                    blk.h * args.o_stride[2];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        const float scale = FP_SHFL(static_cast<unsigned>(full_warp_mask()), inv_l, 4 * grp + r, MFMA_WAVE);
        const int i = i0 + 16 * wave + 4 * grp + r;
        if (i >= q_len) continue;
#pragma unroll
        for (int c = 0; c < DC; ++c)
            if (16 * c + col < args.head_dim)  // D may round the head dim up
                out[int64_t(i) * args.o_stride[1] + 16 * c + col] = from_float<DT>(o[c][r] * scale);
    }
    if (args.lse && grp == 0 && row < q_len)
        args.lse[b * args.lse_stride[0] + blk.h * args.lse_stride[1] + (blk.seq.q_row0 + row) * args.lse_stride[2]] =
            poisoned ? inv_l : softmax_lse2(m, l) * LN2;
#else
    (void)args;
    __builtin_trap();  // no matrix cores on this target (gfx906, RDNA); the dispatcher never picks it here
#endif
}

template <DType DT, int D>
void launch_flash_fwd_mfma(const AttentionArgs& args, cudaStream_t stream) {
    const dim3 grid(unsigned(ceil_div(args.q_len, MfmaTile<D>::BR)), unsigned(args.n_heads), unsigned(args.batch));
    launch_kernel(flash_fwd_mfma_kernel<DT, D>, grid, MFMA_THREADS, 0, stream, args);
    FP_GPU_CHECK_LAUNCH("flash_fwd_mfma_kernel");
}

// Instantiated once per dtype in attention_flash_mfma_{f16,bf16}.cu.
template <DType DT>
void flash_fwd_mfma_cdna(const AttentionArgs& args, int head_dim, void* stream) {
    dispatch_head_dim_up<FlashHeadDims>(head_dim, "flash attention (MFMA)", [&](auto d) {
        launch_flash_fwd_mfma<DT, decltype(d)::value>(args, as_stream(stream));
    });
}

}  // namespace flashport::gpu
