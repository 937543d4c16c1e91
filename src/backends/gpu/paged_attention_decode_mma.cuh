// Paged-KV split-KV decode on NVIDIA tensor cores (sm_80+): mma.sync m16n8k16 with fp32 accumulators,
// ldmatrix fragment loads, and cp.async copies of K/V straight from the paged cache into a per-warp
// ring of shared-memory stages. CUDA only; its portable sibling is paged_attention_decode_split_portable_kernel
// (paged_attention_decode.cuh), which HIP runs, and both are tested on the H200 (set_decode_variant,
// FLASHPORT_GPU_DECODE=portable). The workspace layout and the merge of the splits (the last block of a
// group does it: decode_finish_split, paged_attention_decode_block.cuh) are shared.
//
// Computes what the portable split kernel computes (see paged_attention_decode.cuh): for one (split, KV head,
// sequence) and up to 16 query rows of that KV head's GQA group (heads of the group × query tokens,
// padded to one m16 tile), the attention of the rows over the split's slice of keys.
// port-check: ignore-file inline-ptx -- CUDA builds only (paged_attention_decode_mma_*.cu are not in the
// HIP sources); HIP runs the portable split kernel.
// Layout: PagedAttentionDecodeArgs; rows 16-byte aligned. Variants: fp16 / bf16 × DecodeHeadDims.
//
// Why tensor cores in a memory-bound kernel: the FP32 kernel spends ~3000 issue slots per warp per
// 64-key tile on FMAs, conversions and shared-memory reads, which caps it far below the bandwidth
// (docs/perf.md, GPU, decode). Here a 16-key step of one warp is 2·D/16 mma for S = Q Kᵀ and D/8 for
// P V (32 + 16 ldmatrix at d128), so the math is ~10% of the issue budget and the kernel streams.
//
// Schedule. The block's 4 warps each own a ring of `kv_stages` stages (16 keys of K and of V each)
// and take interleaved 16-key steps of the split (warp w: keys kv_lo + 64·i + 16·w ... + 15), so a
// warp never waits for another: a step's copies are issued by the warp that consumes them, and
// cp.async.wait_group + __syncwarp are the only synchronisation in the main loop. Each warp keeps
// kv_stages − 1 steps in flight while it computes one, and its own online softmax (m, l per row: Dao
// 2023's FlashAttention-2 notation) and O accumulator; the 4 partial results are merged through
// shared memory at the end. A 16-key step never crosses a cache block (block_size is a multiple of 16
// and steps start at multiples of 16), so one block-table read serves a step; it is loaded one step
// ahead, so its latency does not delay the next copies.
// Keys past the slice, and keys of an invalid cache block, are zero-filled by cp.async (never read),
// so the NaN the tests put in unused cache slots cannot reach the mma; the mask turns their scores
// into −inf. An invalid block id or seq_len makes the sequence's rows NaN, as in the portable kernel.
#pragma once

#include <cstdlib>

#include "backends/gpu/attention_flash_mma.cuh"  // cp.async, ldmatrix and mma wrappers
#include "backends/gpu/paged_attention_decode_block.cuh"

#if !defined(FLASHPORT_GPU_CUDA)
#error "paged_attention_decode_mma.cuh is NVIDIA-only; HIP builds use the portable decode kernel"
#endif

namespace flashport::gpu::nvidia_only {

template <int D>
struct DecodeMmaTile {
    static constexpr int STEP = DECODE_MMA_STEP;  // keys per warp step
    static constexpr int LD = decode_mma_pitch(D);
    static constexpr int CHUNKS = D / 8;          // 16-byte chunks per row
    static constexpr int STAGE_ELEMS = 2 * STEP * LD;  // K then V of one step
    static constexpr int Q_ELEMS = DECODE_MMA_ROWS * LD;
    // Stages per warp: the most that still leaves the residency the streaming needs. d128: 3 stages,
    // 106 KB, 2 blocks (8 warps, 2 steps = 16 KB in flight each) per H200 SM; d64: 4 stages, 74 KB,
    // 3 blocks; d256: 2 stages, 140 KB, 1 block. The launcher lowers it to what the device allows
    // (sm_86/89 have 99 KB per block) and refuses fewer than 2.
    static constexpr int MAX_STAGES = D <= 64 ? 4 : D <= 128 ? 3 : 2;
    static constexpr int smem_bytes(int stages) { return decode_mma_smem_bytes(D, stages); }
    // Q fragments stay in registers up to d128 (32 registers); at d256 they are re-read from shared
    // memory, which keeps O (128 registers) and Q from crowding the register file.
    static constexpr bool Q_IN_REGS = D <= 128;
    static constexpr int RP = D + 8;  // fp32 pitch of the final merge rows (float2 stores spread over banks)
    static_assert(D % 16 == 0 && LD == smem_pitch(D), "head_dim; the flash kernel's bank-spreading pitch");
    static_assert(smem_bytes(1) == (Q_ELEMS + DECODE_MMA_WARPS * STAGE_ELEMS) * 2, "Q, then the warps' rings");
    static_assert(4 * DECODE_MMA_ROWS * RP * 4 <= DECODE_MMA_WARPS * 2 * STAGE_ELEMS * 2,
                  "the final merge reuses the K/V rings (2 stages at least)");
};

// cp.async.wait_group takes an immediate; the stage count is a run-time value (device dependent).
// Above 3 it waits for more groups than needed, which is safe (stages > 5 only in tuning runs).
__device__ __forceinline__ void cp_async_wait_pending(int n) {
#if FP_HAS_CP_ASYNC
    if (n <= 0) asm volatile("cp.async.wait_group 0;\n" ::);
    else if (n == 1) asm volatile("cp.async.wait_group 1;\n" ::);
    else if (n == 2) asm volatile("cp.async.wait_group 2;\n" ::);
    else asm volatile("cp.async.wait_group 3;\n" ::);
#else
    (void)n;
#endif
}

template <DType DT, int D>
__global__ void __launch_bounds__(DECODE_MMA_THREADS)
    paged_attention_decode_split_mma_kernel(PagedAttentionDecodeArgs a) {
    using Tile = DecodeMmaTile<D>;
    constexpr int LD = Tile::LD, STEP = Tile::STEP, CHUNKS = Tile::CHUNKS, RP = Tile::RP;
    constexpr int NW = DECODE_MMA_WARPS, R = DECODE_MMA_ROWS;
    static_assert(DECODE_MMA_THREADS == NW * WARP_SIZE, "one block: DECODE_MMA_WARPS warps");
    static_assert((STEP * CHUNKS) % WARP_SIZE == 0, "a step's 16-byte copies spread evenly over the lanes");
    constexpr int KQ = D / 16;  // k16 steps of Q Kᵀ
    constexpr int NO = D / 8;   // n8 tiles of O
    constexpr int T = DECODE_MMA_TILE_TOKENS;  // keys per block step (STEP · NW): the split granularity
    constexpr int COPIES = STEP * CHUNKS / WARP_SIZE;  // 16-byte copies per lane per step, each of K and V
    extern __shared__ __align__(16) uint16_t smem[];
    __shared__ float m_s[NW][R], l_s[NW][R];

    const int tid = int(threadIdx.x), warp = tid / WARP_SIZE, lane = tid % WARP_SIZE;
    const int g = lane / 4, t = lane % 4;  // fragment row group and column pair
    wait_for_prior_grid();  // launched dependent (launch_dependent): nothing read before this
    allow_next_grid();      // the next kernel's wait_for_prior_grid still waits for this whole grid,
                            // the merge of the splits by the last blocks included
    const DecodeBlock work = decode_block<R, T>(a);  // splits are whole block steps
    const int nr = work.nr, len = work.seq.kv_len, kv_lo = work.kv_lo, kv_hi = work.kv_hi;
    int bad = !work.seq.ok;
    const int stages = a.kv_stages;
    uint16_t* q_s = smem;
    uint16_t* ring = smem + Tile::Q_ELEMS + warp * stages * Tile::STAGE_ELEMS;

    // Causal limits. This thread's rows are g and g + 8; `full_hi` is the least limit over the block's
    // rows, below which no key needs a mask.
    auto row_limit = [&](int r) {
        return r < nr ? decode_row_key_limit(a, work, r) : len;  // padding rows: computed, never stored
    };
    const int row_hi[2] = {row_limit(g), row_limit(g + 8)};
    const int full_hi = min(kv_hi, a.causal ? row_limit(0) : len);  // row 0 holds the earliest token

    // Steps of this warp: 16-key steps w, w + NW, ... of the slice.
    const int n_steps = (kv_hi - kv_lo + STEP - 1) / STEP;
    const int my_steps = n_steps > warp ? (n_steps - warp + NW - 1) / NW : 0;
    const uint16_t* kc = decode_cache_head(a.k_cache, a.k_stride, work.kvh);
    const uint16_t* vc = decode_cache_head(a.v_cache, a.v_stride, work.kvh);
    const int32_t* table = decode_table(a, work.b);
    auto step_key = [&](int i) { return kv_lo + (i * NW + warp) * STEP; };
    auto load_page = [&](int i) { return table[step_key(i) / a.block_size]; };

    // Copies of step i into stage `st`: lane covers chunk (lane + 32u) % CHUNKS of key row
    // (lane + 32u) / CHUNKS, so each instruction of the warp moves whole 128-byte lines.
    int next_page = my_steps > 0 ? load_page(0) : 0;
    int issued = 0;
    auto issue_next = [&](int st) {
        const int i = issued++;
        const int page = next_page;
        if (issued < my_steps) next_page = load_page(issued);  // in flight until the next issue
        const int j0 = step_key(i);
        const bool page_ok = page >= 0 && page < a.num_blocks;
        bad |= !page_ok;
        const int slot0 = j0 % a.block_size;
        const int64_t pg = page_ok ? page : 0;
        const uint16_t* kp = kc + pg * a.k_stride[0] + int64_t(slot0) * a.k_stride[1];
        const uint16_t* vp = vc + pg * a.v_stride[0] + int64_t(slot0) * a.v_stride[1];
        uint16_t* dst = ring + st * Tile::STAGE_ELEMS;
#pragma unroll
        for (int u = 0; u < COPIES; ++u) {
            const int e = lane + u * WARP_SIZE, row = e / CHUNKS, c = e % CHUNKS;
            const bool ok = page_ok && j0 + row < kv_hi;
            cp_async_16(dst + row * LD + c * 8, ok ? kp + row * a.k_stride[1] + c * 8 : kc, ok);
            cp_async_16(dst + (STEP + row) * LD + c * 8, ok ? vp + row * a.v_stride[1] + c * 8 : vc, ok);
        }
    };

    // Prologue: the first stages - 1 steps go out before Q is read, so their latency overlaps it.
    // Every iteration commits one group, empty or not, so group i is always step i.
    for (int s = 0; s < stages - 1; ++s) {
        if (issued < my_steps) issue_next(s);
        cp_async_commit();
    }

    // Q (16 rows; rows past nr are zeros) in shared memory, unscaled: the scale is applied to S in fp32.
    for (int e = tid; e < R * CHUNKS; e += DECODE_MMA_THREADS) {
        const int r = e / CHUNKS, c = e % CHUNKS;
        uint4 x = make_uint4(0, 0, 0, 0);
        if (r < nr) x = *reinterpret_cast<const uint4*>(decode_q_row(a, work.b, decode_row(a, work, r)) + c * 8);
        *reinterpret_cast<uint4*>(q_s + r * LD + c * 8) = x;
    }
    __syncthreads();

    // ldmatrix addressing: lane -> (row, column) of the 8x8 matrix it names.
    const int mi = lane / 8, mr = lane % 8;
    const uint16_t* q_frag = q_s + (lane % 16) * LD + (lane / 16) * 8;
    uint32_t qf[Tile::Q_IN_REGS ? KQ : 1][4];
    if constexpr (Tile::Q_IN_REGS) {
#pragma unroll
        for (int kk = 0; kk < KQ; ++kk) ldmatrix_x4(qf[kk], q_frag + kk * 16);
    }

    float o[NO][4] = {};
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // l: this thread's partial row sums
    for (int i = 0; i < my_steps; ++i) {
        const int st = i % stages;
        cp_async_wait_pending(stages - 2);  // this lane's copies of step i have landed ...
        __syncwarp();                       // ... and every lane's; the stage step i - 1 used is free
        if (issued < my_steps) issue_next((i + stages - 1) % stages);
        cp_async_commit();

        const uint16_t* k_s = ring + st * Tile::STAGE_ELEMS;
        const uint16_t* v_s = k_s + STEP * LD;
        // S = Q Kᵀ for 16 rows × 16 keys: two n8 tiles.
        float s[2][4] = {};
#pragma unroll
        for (int kk = 0; kk < KQ; ++kk) {
            uint32_t qa[4];
            if constexpr (Tile::Q_IN_REGS) {
#pragma unroll
                for (int x = 0; x < 4; ++x) qa[x] = qf[kk][x];
            } else {
                ldmatrix_x4(qa, q_frag + kk * 16);
            }
            uint32_t bk[4];
            ldmatrix_x4(bk, k_s + (mr + (mi / 2) * 8) * LD + kk * 16 + (mi % 2) * 8);
            mma_16816<DT>(s[0], qa, bk[0], bk[1]);
            mma_16816<DT>(s[1], qa, bk[2], bk[3]);
        }

        // Online softmax over the step (log2 domain); masks only where a key can be out of range.
        const int j0 = step_key(i);
        const bool full = j0 + STEP <= full_hi;  // warp-uniform
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int n = 0; n < 2; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                s[n][e] *= a.scale_log2;
                if (!full) {
                    const int j = j0 + n * 8 + 2 * t + (e & 1);
                    if (j >= kv_hi || j >= row_hi[e / 2]) s[n][e] = -INFINITY;
                }
                mx[e / 2] = fmaxf(mx[e / 2], s[n][e]);
            }
        float m_use[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const float m_new = fmaxf(m[r], group_max<4>(mx[r]));
            m_use[r] = m_new == -INFINITY ? 0.0f : m_new;  // nothing seen yet: keep exp2 finite
            const float alpha = exp2f(m[r] - m_use[r]);
            m[r] = m_new;
            l[r] *= alpha;
#pragma unroll
            for (int n = 0; n < NO; ++n) o[n][2 * r] *= alpha, o[n][2 * r + 1] *= alpha;
        }
        uint32_t pf[4];  // P as the A fragment of P V: an m16n8 accumulator pair is an m16k16 A fragment
#pragma unroll
        for (int n = 0; n < 2; ++n) {
            float p[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                p[e] = exp2f(s[n][e] - m_use[e / 2]);
                l[e / 2] += p[e];
            }
            pf[2 * n] = pack2<DT>(p[0], p[1]);
            pf[2 * n + 1] = pack2<DT>(p[2], p[3]);
        }

        // O += P V: 16 keys × D columns.
#pragma unroll
        for (int dd = 0; dd < NO / 2; ++dd) {
            uint32_t bv[4];
            ldmatrix_x4<true>(bv, v_s + (mr + (mi % 2) * 8) * LD + dd * 16 + (mi / 2) * 8);
            mma_16816<DT>(o[2 * dd], pf, bv[0], bv[1]);
            mma_16816<DT>(o[2 * dd + 1], pf, bv[2], bv[3]);
        }
    }
    cp_async_wait_pending(0);  // only empty groups remain, but the rings are reused below

    // Merge the 4 warps: row statistics through m_s/l_s, then each warp's O, rescaled to the block's
    // maximum, through the (now idle) rings; the barrier also ORs the bad-metadata flags.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const float row_l = group_sum<4>(l[r]);
        if (t == 0) m_s[warp][g + 8 * r] = m[r], l_s[warp][g + 8 * r] = row_l;
    }
    bad = __syncthreads_or(bad);
    float* red = reinterpret_cast<float*>(smem + Tile::Q_ELEMS);  // [NW][R][RP]
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int row = g + 8 * r;
        float mb = -INFINITY;
#pragma unroll
        for (int w = 0; w < NW; ++w) mb = fmaxf(mb, m_s[w][row]);
        const float f = exp2f(m[r] - (mb == -INFINITY ? 0.0f : mb));  // 0 for a warp that saw no key
        float* dst = red + (warp * R + row) * RP + 2 * t;
#pragma unroll
        for (int n = 0; n < NO; ++n)
            *reinterpret_cast<float2*>(dst + n * 8) = make_float2(o[n][2 * r] * f, o[n][2 * r + 1] * f);
    }
    __syncthreads();

    for (int e = tid; e < nr * (D / 4); e += DECODE_MMA_THREADS) {
        const int r = e / (D / 4), d = (e % (D / 4)) * 4;
        float mb = -INFINITY;
#pragma unroll
        for (int w = 0; w < NW; ++w) mb = fmaxf(mb, m_s[w][r]);
        const float mb_use = mb == -INFINITY ? 0.0f : mb;
        float lb = 0.0f;
        float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int w = 0; w < NW; ++w) {
            lb += l_s[w][r] * exp2f(m_s[w][r] - mb_use);
            const float4 x = *reinterpret_cast<const float4*>(red + (w * R + r) * RP + d);
            acc.x += x.x, acc.y += x.y, acc.z += x.z, acc.w += x.w;
        }
        const float inv = softmax_inv_sum(lb);  // no key seen: zeros
        float4 val = make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
        if (bad) val = make_float4(NAN, NAN, NAN, NAN);
        const DecodeRow row = decode_row(a, work, r);
        const int64_t ws_row = decode_ws_row(a, work.b, row);
        if (a.num_splits == 1)
            *reinterpret_cast<uint2*>(decode_out_row(a, work.b, row) + d) =
                make_uint2(pack2<DT>(val.x, val.y), pack2<DT>(val.z, val.w));
        else
            *reinterpret_cast<float4*>(decode_partial<D>(a, work, ws_row, d)) = val;
        if (d == 0) decode_store_lse(a, work, row, ws_row, bad ? NAN : softmax_lse2(mb, lb));
    }
    // num_splits > 1: the group's last block merges the partials, in the rings (as the merge above).
    using Combine = DecodeCombineShared<D, DECODE_MMA_THREADS>;
    static_assert(sizeof(Combine) <= DECODE_MMA_WARPS * 2 * Tile::STAGE_ELEMS * 2, "the merge reuses the rings");
    decode_finish_split<DT, D, DECODE_MMA_THREADS>(a, work, smem + Tile::Q_ELEMS);
}

// Pipeline stages for this device: MAX_STAGES, or fewer where the per-block shared memory is smaller;
// 0 when even two stages do not fit. FLASHPORT_GPU_DECODE_STAGES=N (2..6) replaces MAX_STAGES, for
// tuning runs of the benchmark; read once per process.
template <int D>
int decode_mma_stages() {
    using Tile = DecodeMmaTile<D>;
    static const int forced = [] {
        const char* env = std::getenv("FLASHPORT_GPU_DECODE_STAGES");
        const int n = env ? std::atoi(env) : 0;
        return n >= 2 && n <= 6 ? n : 0;
    }();
    const int optin = current_device_info().max_smem_optin;
    for (int s = forced ? forced : Tile::MAX_STAGES; s >= 2; --s)
        if (Tile::smem_bytes(s) <= optin) return s;
    return 0;
}

template <DType DT, int D>
void launch_paged_attention_decode_split_mma(PagedAttentionDecodeArgs a, cudaStream_t stream) {
    using Tile = DecodeMmaTile<D>;
    const int stages = decode_mma_stages<D>();
    FP_CHECK(stages >= 2, "paged decode (mma): head_dim ", D, " needs ", Tile::smem_bytes(2),
             " bytes of shared memory per block; this GPU allows ", current_device_info().max_smem_optin);
    const int smem = Tile::smem_bytes(stages);
    static const bool attribute_set = (allow_dynamic_smem(paged_attention_decode_split_mma_kernel<DT, D>, smem,
                                                          "paged_attention_decode_split_mma_kernel"),
                                       true);
    (void)attribute_set;
    a.kv_stages = stages;
    const dim3 grid(unsigned(a.num_splits * a.row_chunks), unsigned(a.n_kv_heads), unsigned(a.batch));
    launch_dependent(paged_attention_decode_split_mma_kernel<DT, D>, grid, DECODE_MMA_THREADS, smem, stream, a);
    FP_GPU_CHECK_LAUNCH("paged_attention_decode_split_mma_kernel");
}

// Queried once per instance (the first call on the current device decides); 0 where it cannot run.
template <DType DT, int D>
int split_mma_blocks_per_sm() {
    static const int n = [] {
        const int stages = decode_mma_stages<D>();
        if (stages < 2) return 0;
        const int smem = DecodeMmaTile<D>::smem_bytes(stages);
        allow_dynamic_smem(paged_attention_decode_split_mma_kernel<DT, D>, smem,
                           "paged_attention_decode_split_mma_kernel");
        int blocks = 0;
        FP_GPU_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                         &blocks, paged_attention_decode_split_mma_kernel<DT, D>, DECODE_MMA_THREADS, size_t(smem)),
                     "querying the occupancy of paged_attention_decode_split_mma_kernel");
        return blocks > 0 ? blocks : 1;
    }();
    return n;
}

}  // namespace flashport::gpu::nvidia_only

namespace flashport::gpu {

// Instantiated once per dtype in paged_attention_decode_mma_{f16,bf16}.cu.
template <DType DT>
void paged_attention_decode_split_mma(const PagedAttentionDecodeArgs& args, int head_dim, void* stream) {
    dispatch_head_dim<DecodeHeadDims>(head_dim, "paged decode attention (mma)", [&](auto d) {
        nvidia_only::launch_paged_attention_decode_split_mma<DT, decltype(d)::value>(args, as_stream(stream));
    });
}

template <DType DT>
int paged_attention_decode_mma_blocks_per_sm(int head_dim) {
    return dispatch_head_dim<DecodeHeadDims>(head_dim, "paged decode attention (mma)", [](auto d) {
        return nvidia_only::split_mma_blocks_per_sm<DT, decltype(d)::value>();
    });
}

}  // namespace flashport::gpu
