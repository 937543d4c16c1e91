// Flash attention forward on Hopper's warpgroup MMA (sm_90a; issue 17, item 1, its first kernel):
// FlashAttention-2's algorithm (attention_flash_mma.cuh) with both products on wgmma.mma_async.
// Compiled for sm_90a only (the flashport_sm90a objects); run on compute capability 9.0 when asked for
// (FLASHPORT_GPU_FLASH=wgmma, FlashVariant::WGMMA). Its siblings: the mma.sync kernel (sm_80+) and the
// portable one, which the dispatcher keeps for everything else and for HIP.
// port-check: ignore-file inline-ptx -- CUDA builds only (the sm_90a sources are not in the HIP build)
//
// A block is NWG warpgroups of 128 threads; warpgroup w owns query rows [64w, 64w + 64) of the block's
// BR = 64 · NWG rows of one (sequence, head), and all of them share each tile of BC = 64 keys:
//   S (64 x 64, fp32, 32 registers a thread) = Q_w K^T: D / 16 wgmma m64n64k16, Q and K from shared
//     memory (both K-major: head dim contiguous);
//   the online softmax on S where it sits (wgmma.cuh's accumulator map is mma.sync's m16n8 fragment, so
//     the masking and row statistics are the mma kernel's, 4 lanes a row);
//   O (64 x D, D / 64 accumulators of 32 registers) += P V: P stays in registers (an accumulator's column
//     blocks 2u, 2u + 1 are the A fragment of keys [16u, 16u + 16)), V from shared memory.
// wgmma's B operand must be K-major, keys contiguous for P V, so V is stored transposed (Vᵀ, [D][BC]) as
// it is copied in; Q and K go in with cp.async. Every operand is a stack of 16-wide k slabs in
// wgmma.cuh's no-swizzle core-matrix layout, the layout the probe (wgmma_probe.cu) checked on the H200.
//
// Not yet here (the issue's item 1, next steps): TMA copies on an mbarrier pipeline, a producer warp and
// consumer warpgroups with setmaxnreg, softmax overlapped with the next tile's products, and the
// swizzled layouts that let V go in untransposed. This kernel waits for each tile's copies and for each
// product before the next step: it checks the layouts, the fragments and the masking end to end.
// On the H200 (2026-12-04) it passes the flash grid's wgmma cases (171 of 171) at 0.41x the mma.sync
// kernel's speed (docs/perf.md, "The first wgmma kernel").
//
// Shared memory of one block (bytes): Q BR · D · 2, K BC · D · 2, Vᵀ BC · D · 2 (D = 128, two
// warpgroups: 64 KB).
#include "backends/gpu/attention_flash_mma.cuh"  // cp_async_16, pack2 (the mma kernel's helpers)
#include "backends/gpu/sm90.h"
#include "backends/gpu/wgmma.cuh"

namespace flashport::gpu {
namespace nvidia_only {

// One instance: head dim D (a multiple of 64: the O accumulators are n64 tiles), NWG warpgroups.
template <int D_, int NWG_>
struct WgmmaConfig {
    static_assert(D_ % 64 == 0, "the O accumulators are m64n64 tiles");
    static constexpr int D = D_, NWG = NWG_, BR = 64 * NWG_, BC = 64, THREADS = WGMMA_THREADS * NWG_;
    static constexpr int KQ = D / 16;                // k16 slabs of Q and K (S's products)
    static constexpr int NO = D / 64;                // n64 accumulators of O
    static constexpr uint32_t SLAB = 64 * 16 * 2;    // bytes of one 64-row x 16-wide slab (Q and K)
    static constexpr uint32_t VT_SLAB = D * 16 * 2;  // bytes of one Vᵀ slab: D rows x 16 keys
    static constexpr uint32_t Q_BYTES = BR * D * 2, K_BYTES = BC * D * 2, V_BYTES = BC * D * 2;
    static constexpr int SMEM_BYTES = int(Q_BYTES + K_BYTES + V_BYTES);
};
// Two warpgroups (128-row blocks) up to d128; at d256 O alone takes 128 registers a thread: one.
template <int D>
using DefaultWgmmaConfig = WgmmaConfig<D, (D <= 128 ? 2 : 1)>;

// Byte offset of element (r, k) of a stack of R-row x 16-wide K-major slabs (slab k / 16 of slab_bytes).
__device__ __forceinline__ uint32_t slab_offset(int r, int k, uint32_t slab_bytes) {
    return uint32_t(k / 16) * slab_bytes + wgmma_core_offset(r, k % 16);
}

// Row r (of `rows` valid) of a K or V tile starting at key j0: dense, or through the block table (null
// when the row is past the tile's valid rows or its block id is out of range, which sets `bad`).
__device__ __forceinline__ const uint16_t* tile_row(const AttentionArgs& a, const uint16_t* base,
                                                   const int64_t (&stride)[3], int b, int j0, int r, int rows,
                                                   bool& bad) {
    if (r >= rows) return nullptr;
    if (!a.block_table) return base + int64_t(j0 + r) * stride[1];
    const uint16_t* row = paged_row(a, base, stride, b, j0 + r);
    if (!row) bad = true;
    return row;
}

// Async copy of `rows` rows (the rest zero-filled) into R-row K-major slabs: 16-byte chunks of 8
// columns, each a core-matrix row. Columns at or past `width` (the real head dim) are zero-filled.
// Q: dense rows of `src`, row_stride apart; R = 64 per warpgroup, so row r lands in warpgroup r / 64's
// slab stack (`group_bytes` apart).
template <int D, int R, int THREADS>
__device__ __forceinline__ void load_q_slabs(uint8_t* dst, const uint16_t* src, int64_t row_stride, int rows,
                                             int width, uint32_t group_bytes) {
    constexpr int CHUNKS = D / 8;
#pragma unroll 4
    for (int e = int(threadIdx.x); e < R * CHUNKS; e += THREADS) {
        const int r = e / CHUNKS, c = e % CHUNKS;
        const bool ok = r < rows && c * 8 < width;
        uint8_t* d = dst + uint32_t(r / 64) * group_bytes + slab_offset(r % 64, c * 8, 64 * 16 * 2);
        cp_async_16(d, ok ? src + int64_t(r) * row_stride + c * 8 : src, ok);
    }
}

// K tile: keys j0 .. j0 + BC - 1 as 64-row slabs (rows = keys, K-major along the head dim).
template <int D, int BC, int THREADS>
__device__ __forceinline__ void load_k_slabs(uint8_t* dst, const AttentionArgs& a, const uint16_t* base, int b,
                                             int j0, int rows, bool& bad) {
    constexpr int CHUNKS = D / 8;
#pragma unroll 4
    for (int e = int(threadIdx.x); e < BC * CHUNKS; e += THREADS) {
        const int r = e / CHUNKS, c = e % CHUNKS;
        const uint16_t* row = tile_row(a, base, a.k_stride, b, j0, r, rows, bad);
        const bool ok = row && c * 8 < a.head_dim;
        cp_async_16(dst + slab_offset(r, c * 8, 64 * 16 * 2), ok ? row + c * 8 : base, ok);
    }
}

// V tile, transposed as it is stored: element (key r, column d) at (row d, k r) of D-row slabs, so that
// keys are contiguous (K-major for P V). Consecutive threads take consecutive keys of one 8-column
// chunk: their 2-byte stores fall in 4 banks' words, not all in one.
template <int D, int BC, int THREADS>
__device__ __forceinline__ void store_vt_slabs(uint8_t* dst, const AttentionArgs& a, const uint16_t* base, int b,
                                               int j0, int rows, bool& bad) {
    constexpr int CHUNKS = D / 8;
    for (int e = int(threadIdx.x); e < BC * CHUNKS; e += THREADS) {
        const int r = e % BC, c = e / BC;
        const uint16_t* row = tile_row(a, base, a.v_stride, b, j0, r, rows, bad);
        uint4 v = make_uint4(0, 0, 0, 0);  // zeros past the valid keys: P is 0 there, and 0 · garbage may be NaN
        if (row && c * 8 < a.head_dim) v = *reinterpret_cast<const uint4*>(row + c * 8);
        const uint16_t* x = reinterpret_cast<const uint16_t*>(&v);
#pragma unroll
        for (int i = 0; i < 8; ++i)
            *reinterpret_cast<uint16_t*>(dst + slab_offset(c * 8 + i, r, D * 16 * 2)) = x[i];
    }
}

template <DType DT, class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, 1) flash_fwd_wgmma_kernel(AttentionArgs args) {
    constexpr int D = Cfg::D, BR = Cfg::BR, BC = Cfg::BC, THREADS = Cfg::THREADS, NO = Cfg::NO;
    extern __shared__ __align__(128) uint8_t smem_raw[];
    uint8_t* q_s = smem_raw;
    uint8_t* k_s = q_s + Cfg::Q_BYTES;
    uint8_t* vt_s = k_s + Cfg::K_BYTES;

    const int tid = int(threadIdx.x), wg = tid / WGMMA_THREADS, wtid = tid % WGMMA_THREADS;
    const int lane = tid % WARP_SIZE, g = lane / 4, t = lane % 4;
    FlashBlock blk;
    if (!enter_flash_block<DT, D, BR, true>(args, blk)) return;
    const int b = blk.b, i0 = blk.i0, rows_valid = blk.rows, q_len = blk.seq.q_len, kv_len = blk.seq.kv_len;
    const FlashBases base = flash_bases(args, blk);
    bool bad_block = false;

    const DeviceKeyRange first = device_visible_keys(i0, q_len, kv_len, args.causal, args.window_left);
    const DeviceKeyRange last = device_visible_keys(i0 + rows_valid - 1, q_len, kv_len, args.causal, args.window_left);
    const int64_t j_begin = first.lo / BC * BC, key_hi = last.hi;
    // This thread's rows: g and g + 8 of its warp's 16 in its warpgroup's 64.
    const int warp_row0 = i0 + wg * 64 + (wtid / WARP_SIZE) * 16;

    load_q_slabs<D, BR, THREADS>(q_s, base.q + int64_t(i0) * args.q_stride[1], args.q_stride[1], rows_valid,
                                 args.head_dim, 64 * D * 2);
    cp_async_commit();
    cp_async_wait_all();
    // Scores are scaled inside the exponent (the mma kernel's rule): a negative scale negates Q once.
    const float c = fabsf(args.scale_log2);
    if (args.scale_log2 < 0.0f) {
        __syncthreads();  // every thread's part of Q has landed
        for (int e = tid; e < int(Cfg::Q_BYTES / 16); e += THREADS) {
            uint4* x = reinterpret_cast<uint4*>(q_s) + e;
            x->x ^= 0x80008000u, x->y ^= 0x80008000u, x->z ^= 0x80008000u, x->w ^= 0x80008000u;
        }
    }
    const uint8_t* q_wg = q_s + uint32_t(wg) * 64 * D * 2;

    float o[NO][32];
#pragma unroll
    for (int h = 0; h < NO; ++h)
#pragma unroll
        for (int i = 0; i < 32; ++i) o[h][i] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // l: this thread's partial row sums

    for (int64_t j0 = j_begin; j0 < key_hi; j0 += BC) {
        const int rows = int(min(int64_t(BC), kv_len - j0));
        load_k_slabs<D, BC, THREADS>(k_s, args, base.k, b, int(j0), rows, bad_block);
        cp_async_commit();
        store_vt_slabs<D, BC, THREADS>(vt_s, args, base.v, b, int(j0), rows, bad_block);
        cp_async_wait_all();
        fence_proxy_async();  // the threads' copies and stores (Q's too) become visible to the wgmma
        __syncthreads();

        // S = Q K^T over the head dim's k16 slabs.
        float s[32] = {};  // the first product overwrites it (scale-d 0); zeroed so nothing reads garbage
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < Cfg::KQ; ++kk)
            wgmma_m64n64k16<DT>(s, wgmma_descriptor(q_wg + kk * Cfg::SLAB), wgmma_descriptor(k_s + kk * Cfg::SLAB),
                                kk > 0);
        wgmma_commit();
        wgmma_wait<0>();

        // Masks only on tiles that cross a row's boundary (the mma kernel's block-uniform test).
        if (!(j0 >= last.lo && j0 + BC <= first.hi)) {
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                const DeviceKeyRange kr =
                    device_visible_keys(warp_row0 + g + 8 * r, q_len, kv_len, args.causal, args.window_left);
                const int lo = int(kr.lo), hi = int(kr.hi);
#pragma unroll
                for (int n = 0; n < BC / 8; ++n)
#pragma unroll
                    for (int e = 2 * r; e < 2 * r + 2; ++e) {
                        const int j = int(j0) + n * 8 + 2 * t + (e & 1);
                        if (j < lo || j >= hi) s[4 * n + e] = -INFINITY;
                    }
            }
        }
        float row_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int i = 0; i < 32; ++i) row_max[(i % 4) / 2] = fmaxf(row_max[(i % 4) / 2], s[i]);
        float m_use[2];  // m is in scaled log2 units
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const float m_new = fmaxf(m[r], group_max<4>(row_max[r]) * c);
            m_use[r] = m_new == -INFINITY ? 0.0f : m_new;  // nothing seen yet: keep exp2 finite
            const float alpha = fast_exp2(m[r] - m_use[r]);
            m[r] = m_new;
            l[r] *= alpha;
#pragma unroll
            for (int h = 0; h < NO; ++h)
#pragma unroll
                for (int n = 0; n < 8; ++n) o[h][4 * n + 2 * r] *= alpha, o[h][4 * n + 2 * r + 1] *= alpha;
        }
        uint32_t pf[BC / 16][4];  // P as the A fragments of keys [16u, 16u + 16)
#pragma unroll
        for (int u = 0; u < BC / 16; ++u)
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                float p[4];
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    p[e] = fast_exp2(fmaf(s[4 * (2 * u + half) + e], c, -m_use[e / 2]));
                    l[e / 2] += p[e];
                }
                pf[u][2 * half] = pack2<DT>(p[0], p[1]);
                pf[u][2 * half + 1] = pack2<DT>(p[2], p[3]);
            }

        // O += P V: Vᵀ's slab u holds keys [16u, 16u + 16) for all D rows; accumulator h takes rows
        // [64h, 64h + 64), 8 core-matrix row groups (2048 bytes) further on.
        wgmma_fence();  // the rescaled O registers are the accumulators
#pragma unroll
        for (int u = 0; u < BC / 16; ++u)
#pragma unroll
            for (int h = 0; h < NO; ++h)
                wgmma_m64n64k16_rs<DT>(o[h], pf[u], wgmma_descriptor(vt_s + u * Cfg::VT_SLAB + h * 2048), true);
        wgmma_commit();
        wgmma_wait<0>();
        __syncthreads();  // every warpgroup is done with this tile's K and Vᵀ before they are overwritten
    }

    // A paged block id out of range anywhere in the block's keys: every row of the block reports it.
    const bool poisoned = __syncthreads_or(bad_block);
    uint16_t* out = static_cast<uint16_t*>(args.out) + b * args.o_stride[0] + blk.seq.q_row0 * args.o_stride[1] +
                    blk.h * args.o_stride[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const float row_l = group_sum<4>(l[r]);
        const int i = warp_row0 + g + 8 * r;
        if (i >= q_len) continue;
        const float inv_l = poisoned ? __int_as_float(0x7fc00000) : softmax_inv_sum(row_l);
        uint16_t* orow = out + int64_t(i) * args.o_stride[1];
#pragma unroll
        for (int h = 0; h < NO; ++h)
#pragma unroll
            for (int n = 0; n < 8; ++n)
                if (h * 64 + n * 8 < args.head_dim)  // D may round the head dim up: those columns are never stored
                    *reinterpret_cast<uint32_t*>(orow + h * 64 + n * 8 + 2 * t) =
                        pack2<DT>(o[h][4 * n + 2 * r] * inv_l, o[h][4 * n + 2 * r + 1] * inv_l);
        if (args.lse && t == 0)
            args.lse[b * args.lse_stride[0] + blk.h * args.lse_stride[1] + (blk.seq.q_row0 + i) * args.lse_stride[2]] =
                poisoned ? inv_l : softmax_lse2(m[r], row_l) * LN2;
    }
}

template <DType DT, class Cfg>
void launch_flash_fwd_wgmma(const AttentionArgs& args, cudaStream_t stream) {
    static const bool attribute_set = [] {
        FP_GPU_CHECK(cudaFuncSetAttribute(flash_fwd_wgmma_kernel<DT, Cfg>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          Cfg::SMEM_BYTES),
                     "allowing ", Cfg::SMEM_BYTES, " bytes of shared memory for flash_fwd_wgmma_kernel");
        return true;
    }();
    (void)attribute_set;
    const dim3 grid(unsigned(ceil_div(args.q_len, Cfg::BR)), unsigned(args.n_heads), unsigned(args.batch));
    launch_kernel(flash_fwd_wgmma_kernel<DT, Cfg>, grid, Cfg::THREADS, Cfg::SMEM_BYTES, stream, args);
    FP_GPU_CHECK_LAUNCH("flash_fwd_wgmma_kernel");
}

}  // namespace nvidia_only

void flash_fwd_wgmma(const AttentionArgs& args, DType dtype, int head_dim, void* stream) {
    FP_CHECK(sm90_available(), "attention: the wgmma flash kernel needs an NVIDIA GPU of compute capability 9.0");
    dispatch_head_dim_up<WgmmaHeadDims>(head_dim, "flash attention (wgmma)", [&](auto d) {
        using Cfg = nvidia_only::DefaultWgmmaConfig<decltype(d)::value>;
        dtype == DType::F16 ? nvidia_only::launch_flash_fwd_wgmma<DType::F16, Cfg>(args, as_stream(stream))
                            : nvidia_only::launch_flash_fwd_wgmma<DType::BF16, Cfg>(args, as_stream(stream));
    });
}

}  // namespace flashport::gpu
