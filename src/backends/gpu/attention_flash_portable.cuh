// GPU flash attention forward, portable variant: the kernel that is correct on every target (CUDA
// sm_80+, every HIP target) and the sibling that keeps the NVIDIA mma path honest.
//
// Computes out = softmax(scale * q k^T + mask) v and the optional LSE with an online softmax over KV
// tiles (FlashAttention-2, Dao 2023: m = running max, l = running sum, Br x Bc tiles), so extra memory
// is O(1) per call. Layout: AttentionArgs (any strides; head_dim contiguous and 16-byte aligned rows).
// Variants: fp16 / bf16 storage x FlashHeadDims (head_dim_switch.h); causal, window and GQA are
// run-time flags so the instance count stays small.
//
// Work split: one block of 128 threads per (Br query rows, head, batch). Thread t owns rows
// rg + 16 i (rg = t / 8) of both the S tile and the O accumulator; of S, columns cg + 8 j (cg = t % 8);
// of O, runs of E contiguous columns (PortableOCols), so a row's softmax statistics need a reduction
// over 8 consecutive lanes only, which holds for warps of 32 and of 64. No tensor cores and no inline
// assembly: plain fp32 FMAs from shared memory.
//
// What bounds it is the instructions around the FMAs, every operand coming from shared memory. So
// K and V are converted to fp32 once, as each tile is copied in (PortableTile::KV_F32), Q and K are
// read four head-dim elements per load, and each V row E elements per load (up to 16 bytes): at d64
// that is 10.7 FMAs per load in QK^T and 6.4 in PV, where element-by-element reads gave 2.7 in both,
// with a conversion per load (docs/perf.md, "The portable flash kernel").
#pragma once

#include <type_traits>

#include "backends/gpu/attention_common.cuh"
#include "backends/gpu/attention_sequence.cuh"
#include "backends/gpu/head_dim_switch.h"
#include "backends/gpu/runtime.h"

namespace flashport::gpu {

constexpr int PORTABLE_THREADS = 128;  // a multiple of every warp size: 4 NVIDIA warps, 2 CDNA wavefronts
constexpr int PORTABLE_COL_GROUPS = 8;  // lanes that share a row

// Tile sizes per head dim: keep static shared memory under 48 KB on every target (HIP's LDS is 64 KB)
// and the accumulators (Br/16 x D/8 floats per thread) at or under 64 registers.
template <int D>
struct PortableTile {
    static constexpr int BR = D <= 128 ? 64 : 32;
    static constexpr int BC = D <= 64 ? 64 : 32;
    static constexpr int LD = D + 8;   // 16-bit row stride in shared memory: 16-byte rows, staggered banks
    static constexpr int LDF = D + 4;  // fp32 row stride: 16-byte rows, rows 4 banks apart
    // K and V are converted to fp32 once, as the tile is copied in (not by each of the 16 row groups
    // that read a value), wherever that fits in 48 KB with Q (16-bit) and P: every head dim but 256.
    static constexpr bool KV_F32 = BC * LDF * 4 + BR * LD * 2 + BR * (BC + 1) * 4 <= 48 * 1024;
    using kv_t = std::conditional_t<KV_F32, float, uint16_t>;
    static constexpr int KV_LD = KV_F32 ? LDF : LD;
};

// The O columns of lane group cg: DN = D / 8 of them, in runs of E contiguous ones (E the largest of
// 8, 4, 2, 1 dividing DN, and at most 16 bytes of V: MAX_E), run k at E * cg + 8 E k. A V row's E
// values then come in one load, and the 8 lanes of a row read 8 E contiguous elements, free of bank
// conflicts.
template <int D, int MAX_E>
struct PortableOCols {
    static constexpr int DN = D / PORTABLE_COL_GROUPS;
    static constexpr int E = DN % 8 == 0 && MAX_E >= 8 ? 8 : DN % 4 == 0 ? 4 : DN % 2 == 0 ? 2 : 1;
    static constexpr int RUNS = DN / E;
    static __device__ __forceinline__ int col(int cg, int k, int e) { return E * cg + 8 * E * k + e; }
};

// N (1, 2, 4 or 8) contiguous 16-bit values of type DT from shared memory, in one load of 2N bytes
// (the address is 2N-byte aligned), as floats.
template <DType DT, int N>
__device__ __forceinline__ void load_floats(const uint16_t* p, float* f) {
    if constexpr (N == 8) {
        unpack8<DT>(*reinterpret_cast<const uint4*>(p), f);
    } else if constexpr (N == 4 || N == 2) {
        uint32_t w[N / 2];
        if constexpr (N == 4) {
            const uint2 raw = *reinterpret_cast<const uint2*>(p);
            w[0] = raw.x;
            w[1] = raw.y;
        } else {
            w[0] = *reinterpret_cast<const uint32_t*>(p);
        }
#pragma unroll
        for (int i = 0; i < N / 2; ++i) {
            f[2 * i] = to_float<DT>(uint16_t(w[i] & 0xffffu));
            f[2 * i + 1] = to_float<DT>(uint16_t(w[i] >> 16));
        }
    } else {
        static_assert(N == 1, "1, 2, 4 or 8 values");
        f[0] = to_float<DT>(*p);
    }
}

// N (1, 2 or 4) contiguous fp32 values from shared memory, in one load of 4N bytes (4N-byte aligned).
template <DType DT, int N>
__device__ __forceinline__ void load_floats(const float* p, float* f) {
    static_assert(N == 1 || N == 2 || N == 4, "1, 2 or 4 values");
    if constexpr (N == 4) {
        const float4 v = *reinterpret_cast<const float4*>(p);
        f[0] = v.x, f[1] = v.y, f[2] = v.z, f[3] = v.w;
    } else if constexpr (N == 2) {
        const float2 v = *reinterpret_cast<const float2*>(p);
        f[0] = v.x, f[1] = v.y;
    } else {
        f[0] = *p;
    }
}

// Copies `valid` dense rows starting at `src` (row_stride apart, `width` of the tile's D 16-bit
// elements each: the real head dim, a multiple of 8) into shared memory with 16-byte loads; rows at or
// past `valid` and columns at or past `width` are zero-filled, so masked lanes never read stale data
// and a head dim rounded up to D adds nothing to q·k.
template <int D, int ROWS, int LD>
__device__ __forceinline__ void load_tile_16b(uint16_t* __restrict__ dst, const uint16_t* __restrict__ src,
                                              int64_t row_stride, int valid, int width) {
    constexpr int CHUNKS = D / 8;  // 16-byte chunks per row
    for (int e = int(threadIdx.x); e < ROWS * CHUNKS; e += PORTABLE_THREADS) {
        const int r = e / CHUNKS, c = e % CHUNKS;
        uint4 val = make_uint4(0, 0, 0, 0);
        if (r < valid && c * 8 < width) val = *reinterpret_cast<const uint4*>(src + int64_t(r) * row_stride + c * 8);
        *reinterpret_cast<uint4*>(dst + r * LD + c * 8) = val;
    }
}

// K or V rows j0 .. j0 + ROWS - 1 of sequence b (base from kv_base): dense, or through the block table.
// A paged row whose block id is out of range is zero-filled and sets `bad`.
template <int D, int ROWS, int LD>
__device__ __forceinline__ void load_kv_tile_16b(uint16_t* __restrict__ dst, const AttentionArgs& a,
                                                 const uint16_t* base, const int64_t (&stride)[3], int b, int j0,
                                                 int valid, bool& bad) {
    if (!a.block_table) {
        load_tile_16b<D, ROWS, LD>(dst, base + int64_t(j0) * stride[1], stride[1], valid, a.head_dim);
        return;
    }
    constexpr int CHUNKS = D / 8;
    for (int e = int(threadIdx.x); e < ROWS * CHUNKS; e += PORTABLE_THREADS) {
        const int r = e / CHUNKS, c = e % CHUNKS;
        uint4 val = make_uint4(0, 0, 0, 0);
        if (r < valid && c * 8 < a.head_dim) {
            const uint16_t* row = paged_row(a, base, stride, b, j0 + r);
            if (row)
                val = *reinterpret_cast<const uint4*>(row + c * 8);
            else
                bad = true;
        }
        *reinterpret_cast<uint4*>(dst + r * LD + c * 8) = val;
    }
}

// As load_kv_tile_16b, converting each value to fp32 on its way into shared memory (LDF floats a row).
template <DType DT, int D, int ROWS, int LDF>
__device__ __forceinline__ void load_kv_tile_f32(float* __restrict__ dst, const AttentionArgs& a,
                                                 const uint16_t* base, const int64_t (&stride)[3], int b, int j0,
                                                 int valid, bool& bad) {
    constexpr int CHUNKS = D / 8;
    for (int e = int(threadIdx.x); e < ROWS * CHUNKS; e += PORTABLE_THREADS) {
        const int r = e / CHUNKS, c = e % CHUNKS;
        uint4 val = make_uint4(0, 0, 0, 0);
        if (r < valid && c * 8 < a.head_dim) {
            const uint16_t* row = a.block_table ? paged_row(a, base, stride, b, j0 + r)
                                                : base + int64_t(j0 + r) * stride[1];
            if (row)
                val = *reinterpret_cast<const uint4*>(row + c * 8);
            else
                bad = true;
        }
        float f[8];
        unpack8<DT>(val, f);
        float4* out = reinterpret_cast<float4*>(dst + r * LDF + c * 8);
        out[0] = make_float4(f[0], f[1], f[2], f[3]);
        out[1] = make_float4(f[4], f[5], f[6], f[7]);
    }
}

// K or V rows j0 .. of the tile, in the tile's K/V storage (PortableTile::KV_F32).
template <DType DT, int D, int ROWS, typename Tile>
__device__ __forceinline__ void load_kv_tile(typename Tile::kv_t* dst, const AttentionArgs& a, const uint16_t* base,
                                             const int64_t (&stride)[3], int b, int j0, int valid, bool& bad) {
    if constexpr (Tile::KV_F32)
        load_kv_tile_f32<DT, D, ROWS, Tile::LDF>(dst, a, base, stride, b, j0, valid, bad);
    else
        load_kv_tile_16b<D, ROWS, Tile::LD>(dst, a, base, stride, b, j0, valid, bad);
}

template <DType DT, int D>
__global__ void __launch_bounds__(PORTABLE_THREADS) flash_fwd_portable_kernel(AttentionArgs args) {
    using Tile = PortableTile<D>;
    constexpr int BR = Tile::BR, BC = Tile::BC, LD = Tile::LD, KV_LD = Tile::KV_LD;
    using kv_t = typename Tile::kv_t;
    using OCols = PortableOCols<D, 16 / int(sizeof(kv_t))>;
    constexpr int RM = BR / 16;                   // rows per thread
    constexpr int CN = BC / PORTABLE_COL_GROUPS;  // S columns per thread
    constexpr int DN = OCols::DN;                 // O columns per thread
    static_assert(D % 8 == 0 && BR % 16 == 0 && BC % 8 == 0, "tile shape");

    alignas(16) __shared__ uint16_t q_s[BR * LD];
    alignas(16) __shared__ kv_t kv_s[BC * KV_LD];  // K, then V of the same tile
    __shared__ float p_s[BR][BC + 1];

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
        load_kv_tile<DT, D, BC, Tile>(kv_s, args, base.k, args.k_stride, b, int(j0), cols_valid, bad_block);
        __syncthreads();

        // S = Q K^T for this thread's RM x CN entries, four elements of d per shared-memory read.
        float s[RM][CN] = {};
        for (int d = 0; d < D; d += 4) {
            float qv[RM][4], kv[CN][4];
#pragma unroll
            for (int r = 0; r < RM; ++r) load_floats<DT, 4>(q_s + (rg + 16 * r) * LD + d, qv[r]);
#pragma unroll
            for (int c = 0; c < CN; ++c) load_floats<DT, 4>(kv_s + (cg + 8 * c) * KV_LD + d, kv[c]);
#pragma unroll
            for (int r = 0; r < RM; ++r)
#pragma unroll
                for (int c = 0; c < CN; ++c)
#pragma unroll
                    for (int e = 0; e < 4; ++e) s[r][c] = fmaf(qv[r][e], kv[c][e], s[r][c]);
        }

        // Online softmax in the log2 domain; masked entries are -inf and contribute exp2(-inf) = 0.
#pragma unroll
        for (int r = 0; r < RM; ++r) {
            float row_max = -INFINITY;
#pragma unroll
            for (int c = 0; c < CN; ++c) {
                const int64_t j = j0 + cg + 8 * c;
                const bool visible = j >= row_keys[r].lo && j < row_keys[r].hi;
                s[r][c] = visible ? s[r][c] * args.scale_log2 : -INFINITY;
                row_max = fmaxf(row_max, s[r][c]);
            }
            row_max = group_max<PORTABLE_COL_GROUPS>(row_max);
            const float m_new = fmaxf(m[r], row_max);
            const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // a row with nothing seen yet stays at 0
            const float alpha = fast_exp2(m[r] - m_use);
            float row_sum = 0.0f;
#pragma unroll
            for (int c = 0; c < CN; ++c) {
                const float p = fast_exp2(s[r][c] - m_use);
                row_sum += p;
                p_s[rg + 16 * r][cg + 8 * c] = p;
            }
            l[r] = l[r] * alpha + group_sum<PORTABLE_COL_GROUPS>(row_sum);
            m[r] = m_new;
#pragma unroll
            for (int c = 0; c < DN; ++c) o[r][c] *= alpha;
        }
        __syncthreads();  // all K reads are done and P is complete
        load_kv_tile<DT, D, BC, Tile>(kv_s, args, base.v, args.v_stride, b, int(j0), cols_valid, bad_block);
        __syncthreads();

        // O += P V; this thread's V columns of row j in RUNS loads of E values.
        for (int j = 0; j < BC; ++j) {
            float vv[DN];
#pragma unroll
            for (int k = 0; k < OCols::RUNS; ++k)
                load_floats<DT, OCols::E>(kv_s + j * KV_LD + OCols::col(cg, k, 0), vv + k * OCols::E);
#pragma unroll
            for (int r = 0; r < RM; ++r) {
                const float p = p_s[rg + 16 * r][j];
#pragma unroll
                for (int c = 0; c < DN; ++c) o[r][c] = fmaf(p, vv[c], o[r][c]);
            }
        }
    }

    // Normalise and store; a row that saw no key writes zeros and an LSE of -inf, a row with a NaN score
    // NaN (softmax_inv_sum, softmax_lse2). A paged block id out
    // of range anywhere in the block's keys makes every row of the block NaN.
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
}

template <DType DT, int D>
void launch_flash_fwd_portable(const AttentionArgs& args, cudaStream_t stream) {
    const dim3 grid(unsigned(ceil_div(args.q_len, PortableTile<D>::BR)), unsigned(args.n_heads), unsigned(args.batch));
    launch_kernel(flash_fwd_portable_kernel<DT, D>, grid, PORTABLE_THREADS, 0, stream, args);
    FP_GPU_CHECK_LAUNCH("flash_fwd_portable_kernel");
}

// Instantiated once per dtype in attention_flash_portable_{f16,bf16}.cu.
template <DType DT>
void flash_fwd_portable(const AttentionArgs& args, int head_dim, void* stream) {
    dispatch_head_dim_up<FlashHeadDims>(head_dim, "flash attention (portable)", [&](auto d) {
        launch_flash_fwd_portable<DT, decltype(d)::value>(args, as_stream(stream));
    });
}

}  // namespace flashport::gpu
