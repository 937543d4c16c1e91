// GPU flash attention forward for fp16 on gfx906 (the MI50), on v_dot2_f32_f16 through mfma.cuh's
// fp_dot2_f32_f16: two fp16 products and an fp32 accumulation per instruction.
//
// Why: gfx906 has no matrix cores (no MFMA), so its fast fp16 path is the dot2 instruction, which does
// two multiply-adds of fp16 inputs into an fp32 sum per lane and cycle where the portable kernel's
// fp32 FMA does one, with no loss of accumulation precision. The operands stay 16-bit in shared memory,
// half the bytes of the portable kernel's fp32 K/V tiles. No AMD GPU was available: the kernel has run
// only under the HIP CPU Runtime (wave64, the instruction emulated per lane by vendor/hip_cpu_mfma.h);
// the hip preset compiles it for every target (dot2 code on gfx906 and CDNA, a trap body where
// FP_HAS_DOT2_F16 is 0). Nothing here claims AMD speed.
//
// Same contract as the portable kernel (attention_flash_portable.cuh): AttentionArgs (dense, varlen and
// paged rows), online softmax in the log2 domain, causal/window/GQA, LSE, the NaN rules, every
// FlashHeadDims head dim (D % 8 == 0, so 40, 80 and 96 too); it reuses that kernel's block entry, Q/K
// loaders, tile sizes (BR x BC) and thread map. fp16 only: gfx906 has no bf16 dot2, and bf16 runs the
// portable kernel there.
//
// Work split (128 threads, warp-size agnostic: a row's lanes are 8 consecutive threads, as in the
// portable kernel): thread t owns rows rg + 16 i (rg = t / 8), and cg = t % 8 picks its columns.
//   S = Q K^T: keys in pairs, pair kp = cg + 8 c (keys 2 kp, 2 kp + 1). Q and K are [rows][LD] fp16 in
//     shared memory; one 8-byte read gives two packed head-dim pairs, so each S entry is D / 2 dot2s.
//   P: exp2 of the scaled scores, rounded to fp16 (as the MFMA and mma kernels round P to the input
//     dtype) and stored as words [row][key pair]: the two keys of a pair are this thread's own.
//   O += P V: V is staged as key pairs (load_v_pairs): word [kp][col] = (V[2 kp][col], V[2 kp + 1][col]),
//     so dot2(P word, V word) is the two keys' contribution to one O column. Thread t's O columns are
//     PortableOCols' runs of E (<= 4) words, read with one load each.
#pragma once

#include "backends/gpu/attention_flash_portable.cuh"
#include "backends/gpu/mfma.cuh"

namespace flashport::gpu {

constexpr int DOT2_THREADS = PORTABLE_THREADS;  // the tile loaders stride by PORTABLE_THREADS

// Shapes of one block's tiles: the portable kernel's BR x BC, with 16-bit K and a key-paired V in one
// buffer (K: BC rows of LD halves; V: BC / 2 rows of VLD words, no larger).
template <int D>
struct Dot2Tile {
    static constexpr int BR = PortableTile<D>::BR;
    static constexpr int BC = PortableTile<D>::BC;
    static constexpr int LD = D + 8;        // Q and K row stride in halves: 16-byte rows
    static constexpr int VLD = D + 4;       // paired-V row stride in words: 16-byte rows
    static constexpr int PLD = BC / 2 + 1;  // P row stride in words (a row's lanes read one word: broadcast)
    static constexpr int KV_WORDS = BC * LD / 2;
    static_assert(BC % 16 == 0 && BC / 2 * VLD <= KV_WORDS, "V pairs fit in the K tile's buffer");
    static_assert(BR * LD * 2 + KV_WORDS * 4 + BR * PLD * 4 <= 48 * 1024, "static shared memory within 48 KB");
};

// N (1, 2 or 4) consecutive 32-bit words from shared memory in one load (4N-byte aligned).
template <int N>
__device__ __forceinline__ void load_words(const uint32_t* p, uint32_t* w) {
    static_assert(N == 1 || N == 2 || N == 4, "1, 2 or 4 words");
    if constexpr (N == 4) {
        const uint4 v = *reinterpret_cast<const uint4*>(p);
        w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
    } else if constexpr (N == 2) {
        const uint2 v = *reinterpret_cast<const uint2*>(p);
        w[0] = v.x, w[1] = v.y;
    } else {
        w[0] = *p;
    }
}

// V rows j0 .. j0 + ROWS - 1 of sequence b as key pairs: word (kp, c) of dst holds V[2 kp][c] in bits
// 15:0 and V[2 kp + 1][c] in bits 31:16, so one word is dot2's second operand for one O column. Each
// item reads the same 16-byte chunk of both rows and interleaves them into 8 words. Rows at or past
// `valid` are zero; a paged row whose block id is out of range is zero and sets `bad`.
template <int D, int ROWS, int VLD>
__device__ __forceinline__ void load_v_pairs(uint32_t* __restrict__ dst, const AttentionArgs& a, const uint16_t* base,
                                             const int64_t (&stride)[3], int b, int j0, int valid, bool& bad) {
    static_assert(ROWS % 2 == 0, "whole key pairs");
    constexpr int CHUNKS = D / 8;
    for (int e = int(threadIdx.x); e < ROWS / 2 * CHUNKS; e += DOT2_THREADS) {
        const int kp = e / CHUNKS, c = e % CHUNKS;
        uint4 rows[2] = {make_uint4(0, 0, 0, 0), make_uint4(0, 0, 0, 0)};
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = 2 * kp + h;
            if (r >= valid || c * 8 >= a.head_dim) continue;  // columns past the head dim stay zero
            const uint16_t* row =
                a.block_table ? paged_row(a, base, stride, b, j0 + r) : base + int64_t(j0 + r) * stride[1];
            if (row)
                rows[h] = *reinterpret_cast<const uint4*>(row + c * 8);
            else
                bad = true;
        }
        const uint32_t lo[4] = {rows[0].x, rows[0].y, rows[0].z, rows[0].w};  // key 2 kp: columns 2i, 2i + 1
        const uint32_t hi[4] = {rows[1].x, rows[1].y, rows[1].z, rows[1].w};  // key 2 kp + 1
        uint32_t w[8];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            w[2 * i] = (lo[i] & 0xffffu) | (hi[i] << 16);
            w[2 * i + 1] = (lo[i] >> 16) | (hi[i] & 0xffff0000u);
        }
        uint4* out = reinterpret_cast<uint4*>(dst + kp * VLD + 8 * c);
        out[0] = make_uint4(w[0], w[1], w[2], w[3]);
        out[1] = make_uint4(w[4], w[5], w[6], w[7]);
    }
}

// Two fp16 values as one dot2 operand, a in bits 15:0.
__device__ __forceinline__ uint32_t pack_f16x2(float a, float b) {
    return uint32_t(from_float<DType::F16>(a)) | uint32_t(from_float<DType::F16>(b)) << 16;
}

template <DType DT, int D>
__global__ void __launch_bounds__(DOT2_THREADS) flash_fwd_dot2_kernel(AttentionArgs args) {
    static_assert(DT == DType::F16, "v_dot2_f32_f16 takes fp16; bf16 runs the portable kernel");
#if defined(FLASHPORT_HIP_CPU) || FP_HAS_DOT2_F16
    using Tile = Dot2Tile<D>;
    constexpr int BR = Tile::BR, BC = Tile::BC, LD = Tile::LD, VLD = Tile::VLD, PLD = Tile::PLD;
    using OCols = PortableOCols<D, 4>;                // runs of at most 4 words: one 16-byte load
    constexpr int RM = BR / 16;                       // rows per thread
    constexpr int CP = BC / 2 / PORTABLE_COL_GROUPS;  // key pairs per thread
    constexpr int DN = OCols::DN;                     // O columns per thread
    static_assert(D % 8 == 0 && BR % 16 == 0, "tile shape");

    alignas(16) __shared__ uint16_t q_s[BR * LD];
    alignas(16) __shared__ uint32_t kv_s[Tile::KV_WORDS];  // K (16-bit rows), then V of the same tile (pairs)
    __shared__ uint32_t p_s[BR * PLD];
    uint16_t* const k_s = reinterpret_cast<uint16_t*>(kv_s);

    const int tid = int(threadIdx.x), rg = tid / PORTABLE_COL_GROUPS, cg = tid % PORTABLE_COL_GROUPS;
    FlashBlock blk;
    if (!enter_flash_block<DT, BR, false>(args, blk)) return;
    const int b = blk.b, i0 = blk.i0, rows_valid = blk.rows, q_len = blk.seq.q_len, kv_len = blk.seq.kv_len;
    const FlashBases base = flash_bases(args, blk);
    bool bad_block = false;
    load_tile_16b<D, BR, LD>(q_s, base.q + int64_t(i0) * args.q_stride[1], args.q_stride[1], rows_valid,
                             args.head_dim);

    // Keys any row of this block can see: the first row bounds hi from below, the last bounds lo.
    const DeviceKeyRange first = device_visible_keys(i0, q_len, kv_len, args.causal, args.window_left);
    const DeviceKeyRange last = device_visible_keys(i0 + rows_valid - 1, q_len, kv_len, args.causal, args.window_left);
    const int64_t key_lo = first.lo, key_hi = last.hi;

    DeviceKeyRange row_keys[RM];
    float m[RM], l[RM], o[RM][DN];
#pragma unroll
    for (int r = 0; r < RM; ++r) {
        row_keys[r] = device_visible_keys(i0 + rg + 16 * r, q_len, kv_len, args.causal, args.window_left);
        m[r] = -INFINITY;
        l[r] = 0.0f;
#pragma unroll
        for (int c = 0; c < DN; ++c) o[r][c] = 0.0f;
    }

    for (int64_t j0 = key_lo / BC * BC; j0 < key_hi; j0 += BC) {
        const int cols_valid = int(min(int64_t(BC), int64_t(kv_len) - j0));
        __syncthreads();  // the previous tile's V reads are done before K overwrites kv_s
        load_kv_tile_16b<D, BC, LD>(k_s, args, base.k, args.k_stride, b, int(j0), cols_valid, bad_block);
        __syncthreads();

        // S = Q K^T for rows rg + 16 r and keys 2 (cg + 8 c) + e: two dot2s per 8-byte read of each side.
        float s[RM][CP][2] = {};
        for (int d = 0; d < D; d += 4) {
            uint2 qw[RM], kw[CP][2];
#pragma unroll
            for (int r = 0; r < RM; ++r) qw[r] = *reinterpret_cast<const uint2*>(q_s + (rg + 16 * r) * LD + d);
#pragma unroll
            for (int c = 0; c < CP; ++c)
#pragma unroll
                for (int e = 0; e < 2; ++e)
                    kw[c][e] = *reinterpret_cast<const uint2*>(k_s + (2 * (cg + 8 * c) + e) * LD + d);
#pragma unroll
            for (int r = 0; r < RM; ++r)
#pragma unroll
                for (int c = 0; c < CP; ++c)
#pragma unroll
                    for (int e = 0; e < 2; ++e)
                        s[r][c][e] =
                            fp_dot2_f32_f16(qw[r].y, kw[c][e].y, fp_dot2_f32_f16(qw[r].x, kw[c][e].x, s[r][c][e]));
        }

        // Online softmax in the log2 domain (the portable kernel's); masked entries are -inf.
#pragma unroll
        for (int r = 0; r < RM; ++r) {
            float row_max = -INFINITY;
#pragma unroll
            for (int c = 0; c < CP; ++c)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int64_t j = j0 + 2 * (cg + 8 * c) + e;
                    const bool visible = j >= row_keys[r].lo && j < row_keys[r].hi;
                    s[r][c][e] = visible ? s[r][c][e] * args.scale_log2 : -INFINITY;
                    row_max = fmaxf(row_max, s[r][c][e]);
                }
            row_max = group_max<PORTABLE_COL_GROUPS>(row_max);
            const float m_new = fmaxf(m[r], row_max);
            const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // a row with nothing seen yet stays at 0
            const float alpha = fast_exp2(m[r] - m_use);
            float row_sum = 0.0f;
#pragma unroll
            for (int c = 0; c < CP; ++c) {
                const float p0 = fast_exp2(s[r][c][0] - m_use), p1 = fast_exp2(s[r][c][1] - m_use);
                row_sum += p0 + p1;
                p_s[(rg + 16 * r) * PLD + cg + 8 * c] = pack_f16x2(p0, p1);
            }
            l[r] = l[r] * alpha + group_sum<PORTABLE_COL_GROUPS>(row_sum);
            m[r] = m_new;
#pragma unroll
            for (int c = 0; c < DN; ++c) o[r][c] *= alpha;
        }
        __syncthreads();  // all K reads are done and P is complete
        load_v_pairs<D, BC, VLD>(kv_s, args, base.v, args.v_stride, b, int(j0), cols_valid, bad_block);
        __syncthreads();

        // O += P V, one key pair per step: this thread's V columns in RUNS loads of E words.
        for (int kp = 0; kp < BC / 2; ++kp) {
            uint32_t vw[DN];
#pragma unroll
            for (int k = 0; k < OCols::RUNS; ++k)
                load_words<OCols::E>(kv_s + kp * VLD + OCols::col(cg, k, 0), vw + k * OCols::E);
#pragma unroll
            for (int r = 0; r < RM; ++r) {
                const uint32_t pw = p_s[(rg + 16 * r) * PLD + kp];
#pragma unroll
                for (int c = 0; c < DN; ++c) o[r][c] = fp_dot2_f32_f16(pw, vw[c], o[r][c]);
            }
        }
    }

    // Normalise and store (the portable kernel's rules: zeros and LSE -inf for a row that saw no key,
    // NaN for a NaN score, every row NaN when a paged block id was out of range).
    const bool poisoned = __syncthreads_or(bad_block);
    uint16_t* out = static_cast<uint16_t*>(args.out) + b * args.o_stride[0] + blk.seq.q_row0 * args.o_stride[1] +
                    blk.h * args.o_stride[2];
#pragma unroll
    for (int r = 0; r < RM; ++r) {
        const int i = i0 + rg + 16 * r;
        if (i >= q_len) continue;
        const float inv_l = poisoned ? __int_as_float(0x7fc00000) : softmax_inv_sum(l[r]);
#pragma unroll
        for (int k = 0; k < OCols::RUNS; ++k)
#pragma unroll
            for (int e = 0; e < OCols::E; ++e)
                if (OCols::col(cg, k, e) < args.head_dim)  // D may round the head dim up
                    out[int64_t(i) * args.o_stride[1] + OCols::col(cg, k, e)] =
                        from_float<DT>(o[r][k * OCols::E + e] * inv_l);
        if (args.lse && cg == 0)
            args.lse[b * args.lse_stride[0] + blk.h * args.lse_stride[1] + (blk.seq.q_row0 + i) * args.lse_stride[2]] =
                poisoned ? inv_l : softmax_lse2(m[r], l[r]) * LN2;
    }
#else
    (void)args;
    __builtin_trap();  // no v_dot2_f32_f16 on this target; the dispatcher never picks it here
#endif
}

template <DType DT, int D>
void launch_flash_fwd_dot2(const AttentionArgs& args, cudaStream_t stream) {
    const dim3 grid(unsigned(ceil_div(args.q_len, Dot2Tile<D>::BR)), unsigned(args.n_heads), unsigned(args.batch));
    launch_kernel(flash_fwd_dot2_kernel<DT, D>, grid, DOT2_THREADS, 0, stream, args);
    FP_GPU_CHECK_LAUNCH("flash_fwd_dot2_kernel");
}

// Instantiated for fp16 in attention_flash_dot2_f16.cu.
template <DType DT>
void flash_fwd_dot2(const AttentionArgs& args, int head_dim, void* stream) {
    dispatch_head_dim_up<FlashHeadDims>(head_dim, "flash attention (dot2)", [&](auto d) {
        launch_flash_fwd_dot2<DT, decltype(d)::value>(args, as_stream(stream));
    });
}

}  // namespace flashport::gpu
