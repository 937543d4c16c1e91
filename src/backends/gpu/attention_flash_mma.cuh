// GPU flash attention forward on NVIDIA tensor cores (sm_80+): mma.sync m16n8k16 with fp32
// accumulators, ldmatrix fragment loads and cp.async tile copies. CUDA only; its portable sibling is
// attention_flash_portable.cuh, and both are tested on the H200 (the dispatcher can force either).
//
// Computes what the portable kernel computes (see there), FlashAttention-2's forward (Dao 2023): a
// block of 4 warps owns 16·M query rows per warp of one head; it walks KV tiles of Bc keys,
// S = Q K^T and O += P V run on tensor cores, P never leaves registers (an m16n8 accumulator pair is
// exactly an m16k16 A fragment), and the row statistics need a 4-lane reduction. With M = 2 row tiles
// per warp (128-row blocks, the default up to d160) every K and V fragment loaded from shared memory
// feeds two mma instead of one. MmaConfig holds the tile shape and schedule, DefaultMmaConfig the
// measured choice per head dim.
// port-check: ignore-file inline-ptx -- CUDA builds only (attention_flash_mma_*.cu are not in the HIP
// sources); HIP runs attention_flash_portable.cuh and attention_flash_mfma.cuh.
// Layout: AttentionArgs; rows must be 16-byte aligned. Head dims are padded to a multiple of 16 in
// shared memory only (40 -> 48); 64, 80, 96, 128, 160, 256 run unpadded.
// Schedules: one stage (one K and one V buffer: V(j) loads while S(j) computes, K(j+1) while P V(j)
// does, two barriers per tile) or two (tile j+1 loads while all of tile j computes, one barrier).
#pragma once

#include <cstring>
#include <type_traits>

#include "backends/gpu/attention_common.cuh"
#include "backends/gpu/attention_sequence.cuh"
#include "backends/gpu/head_dim_switch.h"
#include "backends/gpu/mma_sync.cuh"
#include "backends/gpu/runtime.h"

#if !defined(FLASHPORT_GPU_CUDA)
#error "attention_flash_mma.cuh is NVIDIA-only; HIP builds use the portable kernel"
#endif

namespace flashport::gpu::nvidia_only {

// mma.sync's fragments are laid out over 32 lanes, so a block is 4 NVIDIA warps; the thread count is
// spelled out, as everywhere launch geometry is (common.cuh), and checked against WARP_SIZE in the kernel.
constexpr int MMA_WARPS = 4;
constexpr int MMA_THREADS = 128;

// Shared-memory row pitch for head dim D: padded to a multiple of 16 (the mma k extent) plus 16
// bytes, so the 8 rows of each ldmatrix hit distinct banks.
__host__ __device__ constexpr int padded16(int d) { return (d + 15) / 16 * 16; }
__host__ __device__ constexpr int smem_pitch(int d) { return padded16(d) + 8; }

// One instance's tile shape and schedule:
//   M          m16 row tiles per warp (block rows BR = 64·M). Two let every K/V fragment loaded from
//              shared memory feed two mma (FlashAttention-2's 128-row blocks), at the cost of registers.
//   BC         keys per K/V tile.
//   STAGES     1: one K and one V buffer, V(j) loading under S(j) and K(j+1) under P·V(j), two barriers
//              per tile; 2: two K/V buffer pairs, tile j+1 loading under all of tile j, one barrier.
//   Q_IN_REGS  Q fragments held in registers for the whole block, or re-read from shared memory.
//   MIN_BLOCKS resident blocks per SM the register allocator must allow.
template <int D_, int M_, int BC_, int STAGES_, bool Q_IN_REGS_, int MIN_BLOCKS_>
struct MmaConfig {
    static_assert(STAGES_ == 1 || STAGES_ == 2, "one or two K/V stages");
    static_assert(BC_ % 16 == 0, "keys per tile: a multiple of the mma k extent");
    static constexpr int D = D_, D16 = padded16(D_), LD = smem_pitch(D_);
    static constexpr int M = M_, BR = 16 * MMA_WARPS * M_, BC = BC_, STAGES = STAGES_;
    static constexpr bool Q_IN_REGS = Q_IN_REGS_;
    static constexpr int MIN_BLOCKS = MIN_BLOCKS_;
    static constexpr int SMEM_BYTES = (BR + 2 * STAGES * BC) * LD * 2;
};
// sm_86 and sm_89 let a block opt in to 99 KB of shared memory (sm_80 and sm_90: 163 / 227 KB); every
// default instance must launch on all of the cuda preset's targets.
constexpr int MMA_SMEM_LIMIT = 99 * 1024;

// What the dispatcher runs per head dim: the fastest candidate of bench/gpu/flash_tiles.cu on the
// H200 (docs/perf.md, "v5: tile shape and schedule chosen by a same-run sweep"). Two m16 row tiles per
// warp (128-row blocks) everywhere but d256, where O alone would take 256 registers; a second K/V stage
// where registers allow it (up to d80); Q fragments in registers only up to d64.
template <int D>
using DefaultMmaConfig =
    std::conditional_t<(D <= 64), MmaConfig<D, 2, 64, 2, true, 2>,
    std::conditional_t<(D <= 80), MmaConfig<D, 2, 64, 2, false, 1>,
    std::conditional_t<(D <= 128), MmaConfig<D, 2, 64, 1, false, 1>,
    std::conditional_t<(D <= 160), MmaConfig<D, 2, 32, 1, false, 1>,
                                   MmaConfig<D, 1, 64, 1, false, 1>>>>>;

// Lets `kernel` take `bytes` of dynamic shared memory (past the default 48 KiB): a one-time attribute
// write per kernel instance, not an allocation; callers keep it behind a static.
template <typename Kernel>
void allow_dynamic_smem(Kernel kernel, int bytes, const char* name) {
    FP_GPU_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), "allowing ", bytes,
                 " bytes of shared memory for ", name);
}

// ---- PTX wrappers. Every target of the CUDA build is sm_80+, so the #else branches only keep a
// compute_75 PTX build (which the dispatcher would never run) compiling. ----
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
#if FP_HAS_CP_ASYNC
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    const int src_bytes = valid ? 16 : 0;  // 0: zero-fill without reading global memory
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes));
#else
    *static_cast<uint4*>(smem) = valid ? *static_cast<const uint4*>(gmem) : make_uint4(0, 0, 0, 0);
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if FP_HAS_CP_ASYNC
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}
__device__ __forceinline__ void cp_async_wait_all() {
#if FP_HAS_CP_ASYNC
    asm volatile("cp.async.wait_group 0;\n" ::);
#endif
}

// Four 8x8 b16 matrices from shared memory; TRANS transposes each (V as the B operand of P V).
template <bool TRANS = false>
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem) {
#if FP_HAS_MMA_SYNC
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    if constexpr (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(s));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(s));
#else
    (void)smem;
    r[0] = r[1] = r[2] = r[3] = 0;
    __trap();
#endif
}

// Two floats rounded to the 16-bit type, low half first (the register order mma expects): one
// paired conversion instruction instead of two conversions and a merge.
template <DType DT>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
    uint32_t u;
    if constexpr (DT == DType::F16) {
        const __half2 h = __floats2half2_rn(lo, hi);
        memcpy(&u, &h, 4);
    } else {
        // port-check: ignore nvidia-type-bf16,hw-bf16 -- CUDA-only file (sm_80+, which has bf16 mma)
        const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
        memcpy(&u, &h, 4);
    }
    return u;
}

// Async copy of `valid` dense rows starting at `src` (row_stride apart, `width` elements each: the
// real head dim, at most D) into shared memory rows of LD; chunks past `width` (a head dim D rounds
// up, and the pad to D16) and rows at or past `valid` are zero-filled.
template <int D, int ROWS>
__device__ __forceinline__ void load_tile_async(uint16_t* dst, const uint16_t* src, int64_t row_stride, int valid,
                                                int width) {
    constexpr int CHUNKS = padded16(D) / 8, LD = smem_pitch(D);
#pragma unroll 4
    for (int e = int(threadIdx.x); e < ROWS * CHUNKS; e += MMA_THREADS) {
        const int r = e / CHUNKS, c = e % CHUNKS;
        const bool ok = r < valid && c < D / 8 && c * 8 < width;
        cp_async_16(dst + r * LD + c * 8, ok ? src + int64_t(r) * row_stride + c * 8 : src, ok);
    }
}

// K or V rows j0 .. j0 + ROWS - 1 of sequence b (base from kv_base): dense, or through the block table.
// A paged row whose block id is out of range is zero-filled and sets `bad`.
template <int D, int ROWS>
__device__ __forceinline__ void load_kv_tile_async(uint16_t* dst, const AttentionArgs& a, const uint16_t* base,
                                                   const int64_t (&stride)[3], int b, int j0, int valid, bool& bad) {
    if (!a.block_table) {
        load_tile_async<D, ROWS>(dst, base + int64_t(j0) * stride[1], stride[1], valid, a.head_dim);
        return;
    }
    constexpr int CHUNKS = padded16(D) / 8, LD = smem_pitch(D);
    for (int e = int(threadIdx.x); e < ROWS * CHUNKS; e += MMA_THREADS) {
        const int r = e / CHUNKS, c = e % CHUNKS;
        const uint16_t* row = r < valid ? paged_row(a, base, stride, b, j0 + r) : nullptr;
        if (r < valid && !row) bad = true;
        const bool ok = row && c < D / 8 && c * 8 < a.head_dim;
        cp_async_16(dst + r * LD + c * 8, ok ? row + c * 8 : base, ok);
    }
}

template <DType DT, class Cfg>
__global__ void __launch_bounds__(MMA_THREADS, Cfg::MIN_BLOCKS) flash_fwd_mma_kernel(AttentionArgs args) {
    constexpr int D = Cfg::D, M = Cfg::M, BR = Cfg::BR, BC = Cfg::BC, LD = Cfg::LD, D16 = Cfg::D16;
    constexpr bool TWO_STAGES = Cfg::STAGES == 2;
    constexpr int KQ = D16 / 16;  // k16 steps of Q K^T
    constexpr int NS = BC / 8;    // n8 tiles of S
    constexpr int NO = D16 / 8;   // n8 tiles of O
    static_assert(MMA_THREADS == MMA_WARPS * WARP_SIZE, "one block: MMA_WARPS warps");
    extern __shared__ __align__(16) uint16_t smem[];
    uint16_t* q_s = smem;
    // Stage s holds K at kv_s + 2·s·BC·LD and V right after it.
    uint16_t* kv_s = q_s + BR * LD;
    const auto k_stage = [&](int st) { return kv_s + 2 * st * BC * LD; };
    const auto v_stage = [&](int st) { return kv_s + (2 * st + 1) * BC * LD; };

    const int tid = int(threadIdx.x), warp = tid / WARP_SIZE, lane = tid % WARP_SIZE;
    const int g = lane / 4, t = lane % 4;  // fragment row group and column pair
    // Last query tiles first: under a causal mask they see the most keys, so the long blocks start early.
    FlashBlock blk;
    if (!enter_flash_block<DT, BR, true>(args, blk)) return;
    const int b = blk.b, i0 = blk.i0, rows_valid = blk.rows, q_len = blk.seq.q_len, kv_len = blk.seq.kv_len;
    const FlashBases base = flash_bases(args, blk);
    bool bad_block = false;
    // The K (or V) tile of keys j .. j + BC - 1, clipped to the sequence.
    const auto load_tile = [&](uint16_t* dst, const uint16_t* base, const int64_t(&stride)[3], int64_t j) {
        load_kv_tile_async<D, BC>(dst, args, base, stride, b, int(j), int(min(int64_t(BC), kv_len - j)), bad_block);
    };
    const auto load_k = [&](uint16_t* dst, int64_t j) { load_tile(dst, base.k, args.k_stride, j); };
    const auto load_v = [&](uint16_t* dst, int64_t j) { load_tile(dst, base.v, args.v_stride, j); };

    const DeviceKeyRange first = device_visible_keys(i0, q_len, kv_len, args.causal, args.window_left);
    const DeviceKeyRange last = device_visible_keys(i0 + rows_valid - 1, q_len, kv_len, args.causal, args.window_left);
    const int64_t j_begin = first.lo / BC * BC, key_hi = last.hi;

    // This thread's rows: g and g + 8 of each of its warp's M m16 tiles.
    const int warp_row0 = i0 + warp * 16 * M;

    load_tile_async<D, BR>(q_s, base.q + int64_t(i0) * args.q_stride[1], args.q_stride[1], rows_valid,
                           args.head_dim);
    if (j_begin < key_hi) {
        load_k(k_stage(0), j_begin);
        if constexpr (TWO_STAGES) load_v(v_stage(0), j_begin);
    }
    cp_async_commit();
    cp_async_wait_all();
    __syncthreads();
    // Scores are scaled inside the exponent, p = 2^(s·c − m) with c = |scale|·log2(e) > 0, one FFMA per
    // score. A negative scale is s·scale = (−q)·k·|scale|: Q is negated once here (a sign flip, exact).
    const float c = fabsf(args.scale_log2);
    if (args.scale_log2 < 0.0f) {
        for (int e = tid; e < BR * LD / 8; e += MMA_THREADS) {
            uint4* x = reinterpret_cast<uint4*>(q_s) + e;
            x->x ^= 0x80008000u, x->y ^= 0x80008000u, x->z ^= 0x80008000u, x->w ^= 0x80008000u;
        }
        __syncthreads();
    }

    // ldmatrix addressing: lane -> (row, column) of the 8x8 matrix it names.
    const int mi = lane / 8, mr = lane % 8;
    const uint16_t* q_frag = q_s + (warp * 16 * M + lane % 16) * LD + (lane / 16) * 8;
    uint32_t qf[Cfg::Q_IN_REGS ? M : 1][Cfg::Q_IN_REGS ? KQ : 1][4];
    if constexpr (Cfg::Q_IN_REGS) {
#pragma unroll
        for (int mt = 0; mt < M; ++mt)
#pragma unroll
            for (int kk = 0; kk < KQ; ++kk) ldmatrix_x4(qf[mt][kk], q_frag + mt * 16 * LD + kk * 16);
    }

    float o[M][NO][4] = {};
    float m[M][2], l[M][2];  // l: this thread's partial row sums
#pragma unroll
    for (int mt = 0; mt < M; ++mt) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.0f;

    int stage = 0;
    for (int64_t j0 = j_begin; j0 < key_hi; j0 += BC) {
        const bool has_next = j0 + BC < key_hi;
        const uint16_t* k_s = k_stage(stage);
        const uint16_t* v_s = v_stage(stage);
        if constexpr (TWO_STAGES) {
            // Tile j landed (the prologue waited for the first), and every warp is done with tile
            // j − 1, whose buffers now take tile j + 1: one barrier per tile.
            if (j0 != j_begin) {
                cp_async_wait_all();
                __syncthreads();
            }
            if (has_next) {
                load_k(k_stage(stage ^ 1), j0 + BC);
                load_v(v_stage(stage ^ 1), j0 + BC);
                cp_async_commit();
            }
        } else {
            load_v(v_stage(0), j0);
            cp_async_commit();
        }

        // S = Q K^T: each K fragment serves all M row tiles.
        float s[M][NS][4] = {};
#pragma unroll
        for (int kk = 0; kk < KQ; ++kk) {
            uint32_t a[M][4];
#pragma unroll
            for (int mt = 0; mt < M; ++mt) {
                if constexpr (Cfg::Q_IN_REGS) {
#pragma unroll
                    for (int x = 0; x < 4; ++x) a[mt][x] = qf[mt][kk][x];
                } else {
                    ldmatrix_x4(a[mt], q_frag + mt * 16 * LD + kk * 16);
                }
            }
#pragma unroll
            for (int nn = 0; nn < NS / 2; ++nn) {
                uint32_t bk[4];
                ldmatrix_x4(bk, k_s + (nn * 16 + mr + (mi / 2) * 8) * LD + kk * 16 + (mi % 2) * 8);
#pragma unroll
                for (int mt = 0; mt < M; ++mt) {
                    mma_16816<DT>(s[mt][2 * nn], a[mt], bk[0], bk[1]);
                    mma_16816<DT>(s[mt][2 * nn + 1], a[mt], bk[2], bk[3]);
                }
            }
        }

        // Mask only tiles that cross a boundary: every row of the block sees all of a full tile. One
        // block-uniform branch around the whole pass, not a test per score (which the compiler turns
        // into predicated instructions that full tiles would still issue).
        // The rows' key bounds are recomputed here rather than held for the whole loop: only the few
        // boundary tiles need them, and at M = 2 the registers are worth more (32-bit: the dispatcher
        // caps lengths at 2^31 - 1).
        if (!(j0 >= last.lo && j0 + BC <= first.hi)) {
#pragma unroll
            for (int mt = 0; mt < M; ++mt)
#pragma unroll
                for (int r = 0; r < 2; ++r) {
                    const DeviceKeyRange kr = device_visible_keys(warp_row0 + mt * 16 + g + 8 * r, q_len, kv_len,
                                                                  args.causal, args.window_left);
                    const int lo = int(kr.lo), hi = int(kr.hi);
#pragma unroll
                    for (int n = 0; n < NS; ++n)
#pragma unroll
                        for (int e = 2 * r; e < 2 * r + 2; ++e) {
                            const int j = int(j0) + n * 8 + 2 * t + (e & 1);
                            if (j < lo || j >= hi) s[mt][n][e] = -INFINITY;
                        }
                }
        }
        uint32_t pf[M][BC / 16][4];  // P in registers, already in A-fragment order for P V
#pragma unroll
        for (int mt = 0; mt < M; ++mt) {
            float row_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
            for (int n = 0; n < NS; ++n)
#pragma unroll
                for (int e = 0; e < 4; ++e) row_max[e / 2] = fmaxf(row_max[e / 2], s[mt][n][e]);
            float m_use[2];  // m is in scaled log2 units
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                const float m_new = fmaxf(m[mt][r], group_max<4>(row_max[r]) * c);
                m_use[r] = m_new == -INFINITY ? 0.0f : m_new;  // nothing seen yet: keep exp2 finite
                const float alpha = fast_exp2(m[mt][r] - m_use[r]);
                m[mt][r] = m_new;
                l[mt][r] *= alpha;
#pragma unroll
                for (int n = 0; n < NO; ++n) o[mt][n][2 * r] *= alpha, o[mt][n][2 * r + 1] *= alpha;
            }
#pragma unroll
            for (int kk = 0; kk < BC / 16; ++kk)
#pragma unroll
                for (int half = 0; half < 2; ++half) {
                    float p[4];
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        p[e] = fast_exp2(fmaf(s[mt][2 * kk + half][e], c, -m_use[e / 2]));
                        l[mt][e / 2] += p[e];
                    }
                    pf[mt][kk][2 * half] = pack2<DT>(p[0], p[1]);
                    pf[mt][kk][2 * half + 1] = pack2<DT>(p[2], p[3]);
                }
        }

        if constexpr (!TWO_STAGES) {
            cp_async_wait_all();
            __syncthreads();  // V(j) has landed, and every warp is done reading K(j)
            if (has_next) {
                load_k(k_stage(0), j0 + BC);
                cp_async_commit();
            }
        }

        // O += P V: each V fragment serves all M row tiles.
#pragma unroll
        for (int kk = 0; kk < BC / 16; ++kk)
#pragma unroll
            for (int dd = 0; dd < NO / 2; ++dd) {
                uint32_t bv[4];
                ldmatrix_x4<true>(bv, v_s + (kk * 16 + mr + (mi % 2) * 8) * LD + dd * 16 + (mi / 2) * 8);
#pragma unroll
                for (int mt = 0; mt < M; ++mt) {
                    mma_16816<DT>(o[mt][2 * dd], pf[mt][kk], bv[0], bv[1]);
                    mma_16816<DT>(o[mt][2 * dd + 1], pf[mt][kk], bv[2], bv[3]);
                }
            }
        if constexpr (TWO_STAGES) {
            stage ^= 1;
        } else {
            if (has_next) cp_async_wait_all();
            __syncthreads();  // every warp is done with V(j) before it is overwritten; K(j+1) is visible
        }
    }

    // A paged block id out of range anywhere in the block's keys: every row of the block reports it.
    const bool poisoned = __syncthreads_or(bad_block);
    // Row sums were kept per thread; the 4 lanes of a row add theirs now.
    uint16_t* out = static_cast<uint16_t*>(args.out) + b * args.o_stride[0] + blk.seq.q_row0 * args.o_stride[1] +
                    blk.h * args.o_stride[2];
#pragma unroll
    for (int mt = 0; mt < M; ++mt)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const float row_l = group_sum<4>(l[mt][r]);
            const int i = warp_row0 + mt * 16 + g + 8 * r;
            if (i >= q_len) continue;
            const float inv_l = poisoned ? __int_as_float(0x7fc00000) : softmax_inv_sum(row_l);
            uint16_t* orow = out + int64_t(i) * args.o_stride[1];
#pragma unroll
            for (int n = 0; n < D / 8; ++n)  // tiles past D are the zero pad
                if (n * 8 < args.head_dim)   // and past the head dim, which D may round up
                    *reinterpret_cast<uint32_t*>(orow + n * 8 + 2 * t) =
                        pack2<DT>(o[mt][n][2 * r] * inv_l, o[mt][n][2 * r + 1] * inv_l);
            if (args.lse && t == 0)
                args.lse[b * args.lse_stride[0] + blk.h * args.lse_stride[1] + (blk.seq.q_row0 + i) * args.lse_stride[2]] =
                    poisoned ? inv_l : softmax_lse2(m[mt][r], row_l) * LN2;
        }
}

template <DType DT, class Cfg>
void launch_flash_fwd_mma(const AttentionArgs& args, cudaStream_t stream) {
    static const bool attribute_set =
        (allow_dynamic_smem(flash_fwd_mma_kernel<DT, Cfg>, Cfg::SMEM_BYTES, "flash_fwd_mma_kernel"), true);
    (void)attribute_set;
    const dim3 grid(unsigned(ceil_div(args.q_len, Cfg::BR)), unsigned(args.n_heads), unsigned(args.batch));
    launch_kernel(flash_fwd_mma_kernel<DT, Cfg>, grid, MMA_THREADS, Cfg::SMEM_BYTES, stream, args);
    FP_GPU_CHECK_LAUNCH("flash_fwd_mma_kernel");
}

}  // namespace flashport::gpu::nvidia_only

namespace flashport::gpu {

// The dispatcher's instance for head dim D, checked at compile time to launch on every target of the
// cuda preset.
template <DType DT, int D>
void launch_default_flash_fwd_mma(const AttentionArgs& args, cudaStream_t stream) {
    using Cfg = nvidia_only::DefaultMmaConfig<D>;
    static_assert(Cfg::SMEM_BYTES <= nvidia_only::MMA_SMEM_LIMIT,
                  "a default flash mma instance needs more shared memory than sm_86/sm_89 allow");
    nvidia_only::launch_flash_fwd_mma<DT, Cfg>(args, stream);
}

// Instantiated once per dtype in attention_flash_mma_{f16,bf16}.cu.
template <DType DT>
void flash_fwd_mma(const AttentionArgs& args, int head_dim, void* stream) {
    dispatch_head_dim_up<FlashHeadDims>(head_dim, "flash attention (mma)", [&](auto d) {
        launch_default_flash_fwd_mma<DT, decltype(d)::value>(args, as_stream(stream));
    });
}

}  // namespace flashport::gpu
