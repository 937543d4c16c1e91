// Flash attention forward on Hopper's warpgroup MMA (sm_90a; issue 17, item 1): FlashAttention-2's
// algorithm (attention_flash_mma.cuh) with both products on wgmma.mma_async and the K/V tiles on a
// cp.async ring. The kernel template lives here so that bench/gpu/flash_tiles.cu can sweep its shapes;
// attention_flash_wgmma.cu instantiates the defaults (sm_90a objects only) and dispatches to them.
// port-check: ignore-file inline-ptx -- CUDA builds only (the sm_90a sources are not in the HIP build)
//
// A block is NWG warpgroups of 128 threads; warpgroup w owns query rows [64w, 64w + 64) of the block's
// BR = 64 · NWG rows of one (sequence, head), and all of them share each tile of BC keys:
//   S (64 x BC fp32, BC / 2 registers a thread) = Q_w Kᵀ: ⌈D / 16⌉ wgmma m64nBCk16, Q and K from shared
//     memory (both K-major: head dim contiguous);
//   the online softmax on S where it sits (wgmma.cuh's accumulator map is mma.sync's m16n8 fragment, so
//     the masking and row statistics are the mma kernel's, 4 lanes a row);
//   O (64 x D fp32, D / ON accumulators of ON / 2 registers; ON = D up to 160, else 128) += P V: P stays in
//     registers (S's column blocks 2u, 2u + 1 are the A fragment of keys [16u, 16u + 16)), V is read
//     from shared memory as it sits in memory (MN-major B: head dim contiguous), through the offsets
//     wgmma_probe_mn_major established.
//
// Every thread copies a share of each tile with cp.async. Buffer s has two mbarriers (mbarrier.cuh):
// full[s], which each thread's copies arrive on as they complete (THREADS arrivals a phase), and
// empty[s], which each warp arrives on once its products have read the buffer (4 · NWG a phase). The
// schedule of tile j, in each warp:
//   wait for full[j % STAGES] (the tile, and Q with tile 0);
//   STAGES 3: start tile j + 1's copies, once empty says every warp is done with the tile two before;
//   issue S_j; wait for it (and for P V of tile j - 1, in flight until here); arrive on empty of tile
//     j - 1's buffer;
//   STAGES 2: start tile j + 1's copies, once every warp is done with tile j - 1;
//   mask, softmax, rescale O; issue P V of tile j and go on without waiting for it.
// P V of one tile overlaps the next tile's wait and S issue; the copies of tile j + 1 overlap all of
// tile j. No block-wide barrier paces the loop, so the warpgroups drift apart (by up to a tile) and one's
// softmax falls under the other's products.
//
// With PRODUCER (measured on the H200, 2026-12-05: with cp.async copies it computes wrong results and
// is never dispatched; with TMA, below, it is the TMA route's kernel), one more
// warpgroup makes every copy: Q, then V of tile j and K of tile j + 1 in turn, each into its ring
// buffer once the empty barrier frees it, and setmaxnreg moves registers from it (PRODUCER_REGS a
// thread) to the NWG consumer warpgroups (CONSUMER_REGS), which only compute. The full barriers then
// count the producer's 128 threads.
//
// VSW128 puts V in the 128-byte swizzle as Q and K are. TMA has the producer's one thread ask the copy
// engine for whole boxes of Q, K and V (tma.cuh; dense, packed varlen or paged rows), the full barriers
// counting bytes, not threads: 1.4-2.1x the all-thread kernel in the tile sweep on dense calls
// (docs/perf.md, "The wgmma tile sweep, measured"). attention_flash_wgmma.cu dispatches to it by default
// (FLASHPORT_GPU_WGMMA_TMA=0 turns it off); its GPU test grid and sanitizers passed on an H100.
//
// Not yet here (the issue's item 1, next steps): the intra-warpgroup overlap of one tile's softmax with
// the next tile's S.
//
// Shared memory of one block (bytes): Q BR · DL · 2 + STAGES · 2 · BC · DL · 2, then 4 · STAGES mbarriers.
#pragma once

#include "backends/gpu/attention_flash_mma.cuh"  // cp_async_16, pack2, FlashBlock (the mma kernel's helpers)
#include "backends/gpu/mbarrier.cuh"
#include "backends/gpu/tma.cuh"
#include "backends/gpu/wgmma.cuh"

namespace flashport::gpu::nvidia_only {

// One instance: head dim D (a multiple of 8 up to 256, whose O accumulators wgmma_n_supported covers: 40,
// 64, 80, 128, 160, 256), NWG warpgroups
// of query rows, BC keys a tile (64 or 128: S's wgmma width), STAGES K/V buffers (2 or 3), Q and K in
// the 128-byte swizzle layout (SW128; the plain core-matrix one measured 1.03-1.17x slower,
// docs/perf.md), MIN_BLOCKS for __launch_bounds__ (blocks an SM should hold: caps the registers),
// PRODUCER: one more warpgroup that makes the copies (above), VSW128: V in the 128-byte swizzle too
// (load_v and v_descriptor below), and TMA: the producer copies Q, K and V with TMA boxes (tma.cuh) in
// place of cp.async. The library launches a TMA instance only with maps that encoded
// (attention_flash_wgmma.cu); its cp.async branch serves the tile sweep's launches whose maps do not.
template <int D_, int NWG_, int BC_, int STAGES_, bool SW128_ = true, int MIN_BLOCKS_ = 1, bool PRODUCER_ = false,
          bool VSW128_ = false, bool TMA_ = false>
struct WgmmaConfig {
    static_assert(D_ % 8 == 0 && D_ <= 256 && (BC_ == 64 || BC_ == 128) && (STAGES_ == 2 || STAGES_ == 3));
    static_assert(!PRODUCER_ || MIN_BLOCKS_ == 1, "setmaxnreg's split assumes one block an SM");
    static_assert(!TMA_ || (PRODUCER_ && SW128_ && VSW128_), "TMA boxes land in the 128-byte swizzle, by a producer");
    static constexpr int D = D_, NWG = NWG_, BR = 64 * NWG_, BC = BC_, STAGES = STAGES_, MIN_BLOCKS = MIN_BLOCKS_;
    static constexpr bool SW128 = SW128_, PRODUCER = PRODUCER_, VSW128 = VSW128_, TMA = TMA_;
    static constexpr int THREADS = WGMMA_THREADS * (NWG_ + (PRODUCER_ ? 1 : 0));
    static constexpr int COPY_THREADS = PRODUCER_ ? WGMMA_THREADS : THREADS;  // the threads that copy
    // setmaxnreg's split of an SM's 64K registers: the producer keeps 40 a thread (its loops and a paged
    // table's lookups), the consumers share the rest, a multiple of 8 and at most 240 (232 for two).
    static constexpr int PRODUCER_REGS = 40;
    static constexpr int CONSUMER_REGS_FIT = (65536 - WGMMA_THREADS * PRODUCER_REGS) / (WGMMA_THREADS * NWG_) / 8 * 8;
    static constexpr int CONSUMER_REGS = CONSUMER_REGS_FIT < 240 ? CONSUMER_REGS_FIT : 240;
    // The head dim D needs only whole k16 slabs and an O as wide as D (40: three slabs and n40, not a
    // 64-wide tile's four and n64); shared memory keeps the swizzle's 64-column blocks, DL columns a row,
    // the columns past D zero-filled on load.
    static constexpr int DL = (D + 63) / 64 * 64;     // columns a shared-memory row holds
    static constexpr int KQ = (D + 15) / 16;          // k16 slabs of Q and K (S's products)
    static constexpr int ON = D <= 160 ? D : 128;     // width of one O accumulator
    static constexpr int NO = D / ON;                 // O accumulators
    static constexpr uint32_t Q_GROUP = 64 * DL * 2;  // one warpgroup's Q
    static constexpr uint32_t V_KGROUP = DL * 16;     // 8 keys of V (all DL columns): the MN-major LBO
    static constexpr uint32_t Q_BYTES = BR * DL * 2, TILE_BYTES = BC * DL * 2;  // Q; one K or one V buffer
    static_assert(wgmma_n_supported(ON) && D % ON == 0, "O's accumulators are wgmma widths that tile D");
    static_assert(!VSW128_ || ON % 64 == 0, "the swizzled MN-major V is read in whole 64-column atoms");
    static constexpr uint32_t K_RING = Q_BYTES, V_RING = K_RING + STAGES * TILE_BYTES;
    // full_k, full_v, empty_k, empty_v: STAGES mbarriers each; then the TMA producer's tail barrier.
    static constexpr uint32_t BARRIERS = V_RING + STAGES * TILE_BYTES;
    // + 1024: the swizzled operands' atoms are 1024-byte aligned, and the dynamic base need not be.
    static constexpr int SMEM_BYTES = int(BARRIERS + (4 * STAGES + 1) * sizeof(uint64_t)) + 1024;
    static_assert(SMEM_BYTES <= 227 * 1024, "an H100/H200 block has at most 227 KiB of shared memory");
};

// A TMA instance's second kernel parameter: the maps of a call's Q, K and V, and the keys one K/V box
// holds (BC, or a paged cache's block size where that is smaller). valid is 0 where TMA cannot describe
// a tensor (a base or stride off 16 bytes, a size out of range, a block size that is neither a divisor
// nor a multiple of BC): the library then runs the all-thread instance. Every other instance takes an
// empty one.
struct WgmmaTmaMaps {
    CUtensorMap q, k, v;
    int valid;
    int box_rows;
};
struct WgmmaNoTma {};
template <class Cfg>
using WgmmaTmaParam = std::conditional_t<Cfg::TMA, WgmmaTmaMaps, WgmmaNoTma>;

// Q in boxes of 64 rows (one warpgroup's slab) x 64 columns: dense [batch, heads, q_len, head_dim], or
// varlen's packed [heads, total_q, head_dim]. K and V in boxes of box_rows keys x 64 columns: dense
// [batch, KV heads, kv_len, head_dim], packed [KV heads, total_k, head_dim], or a paged cache's
// [num_blocks, KV heads, block_size, head_dim]. The three take the same strides (row, head, outer). The
// copy engine fills zeros past every edge: the head dim's, a dense call's q_len and kv_len. Past a varlen
// or paged sequence the rows are another sequence's, or stale cache slots: query rows there are never
// stored, keys there are masked, and V's rows there are zeroed by the producer (the kernel below).
template <class Cfg>
WgmmaTmaMaps wgmma_tma_maps(const AttentionArgs& a) {
    WgmmaTmaMaps m{};
    int64_t q_rows = a.q_len, q_outer = a.batch, kv_rows = a.kv_len, kv_outer = a.batch;
    int box_rows = Cfg::BC;
    if (a.cu_q) q_rows = a.total_q, q_outer = 1;
    if (a.block_table) {
        const int bs = a.block_size;  // a box is one block, or BC keys of one; whole 8-row swizzle atoms
        if (bs <= 0 || bs % 8 != 0 || (bs % Cfg::BC != 0 && Cfg::BC % bs != 0)) return m;
        box_rows = bs < Cfg::BC ? bs : Cfg::BC;
        kv_rows = bs, kv_outer = a.num_blocks;
    } else if (a.cu_k) {
        kv_rows = a.total_k, kv_outer = 1;
    }
    if (q_rows > INT32_MAX || kv_rows > INT32_MAX) return m;  // coordinates are 32-bit
    const uint32_t q_box[4] = {64, 64, 1, 1}, kv_box[4] = {64, uint32_t(box_rows), 1, 1};
    m.box_rows = box_rows;
    m.valid = encode_tma_4d(m.q, a.q, {a.head_dim, q_rows, a.n_heads, q_outer},
                            {a.q_stride[1], a.q_stride[2], a.q_stride[0]}, q_box) &&
              encode_tma_4d(m.k, a.k, {a.head_dim, kv_rows, a.n_kv_heads, kv_outer},
                            {a.k_stride[1], a.k_stride[2], a.k_stride[0]}, kv_box) &&
              encode_tma_4d(m.v, a.v, {a.head_dim, kv_rows, a.n_kv_heads, kv_outer},
                            {a.v_stride[1], a.v_stride[2], a.v_stride[0]}, kv_box);
    return m;
}

// Where key j of the block's sequence sits in a K/V map above: (row, outer) = dense (j, b), packed
// (k_row0 + j, 0), paged (j % block_size, the block's id). False for a paged block id out of range.
__device__ __forceinline__ bool tma_kv_coords(const AttentionArgs& a, const FlashBlock& blk, int j, int& row,
                                              int& outer) {
    if (a.block_table) {
        outer = a.block_table[int64_t(blk.b) * a.max_blocks + j / a.block_size];
        row = j % a.block_size;
        return outer >= 0 && outer < a.num_blocks;
    }
    row = int(blk.seq.k_row0 + j);
    outer = a.cu_k ? 0 : blk.b;
    return true;
}

// The defaults (docs/perf.md, "The pipelined wgmma kernel"): two warpgroups and 128-key tiles on three
// buffers up to d128; at d256 O alone takes 128 registers a thread, so S narrows to 64 keys and the ring
// to two buffers, which fits two warpgroups' Q in shared memory. d160 (80 registers of O, rows of 192
// columns in shared memory) takes 64-key tiles on three buffers: 192 KiB. Not tuned: the sweep has not
// run d40/d80/d160 natively yet.
// V in the 128-byte swizzle (its MN-major atoms are 64 columns wide, so D a multiple of 64) measured 1.04x,
// 1.13x, 1.00x at d64, d128, d256 in the tile sweep of 2026-12-05, with identical output on full tiles,
// and takes d128's spill away. These instances keep V plain: they serve only what the TMA route cannot
// (negative scales, block sizes no box describes), and their test grid has not run with V swizzled.
template <int D, bool SW128 = true, bool VSW128 = false>
using DefaultWgmmaConfig = std::conditional_t<
    (D <= 128), WgmmaConfig<D, 2, 128, 3, SW128, 1, false, VSW128>,
    std::conditional_t<(D <= 192), WgmmaConfig<D, 2, 64, 3, SW128, 1, false, VSW128>,
                       WgmmaConfig<D, 2, 64, 2, SW128, 1, false, VSW128>>>;

// The TMA producer's shapes (the tile sweep, 2026-12-05: 1.4-2.1x the instances above on dense calls).
// It reads V in the swizzle, whose MN-major atoms are 64 columns wide, so D is a multiple of 64: head
// dims 40 and 80 run it at 64 and 128 (faster than their native instances above, which stay for what
// TMA cannot take: a negative scale, a tensor the maps cannot describe).
template <int D>
using TmaWgmmaConfig = std::conditional_t<(D <= 128), WgmmaConfig<D, 2, 128, 3, true, 1, true, true, true>,
                                          WgmmaConfig<D, 2, 64, 2, true, 1, true, true, true>>;

// Byte offset of 16-byte chunk c of row r of an R-row K-major operand (Q's 64 rows, K's BC), and the
// descriptor of its k16 slab kk.
template <class Cfg, int R>
__device__ __forceinline__ uint32_t qk_offset(int r, int c) {
    if constexpr (Cfg::SW128) return wgmma_sw128_offset(r, c, R);
    return uint32_t(c / 2) * (R * 32) + wgmma_core_offset(r, c % 2 * 8);
}
template <class Cfg, int R>
__device__ __forceinline__ uint64_t qk_descriptor(const uint8_t* operand, int kk) {
    if constexpr (Cfg::SW128) return wgmma_descriptor_sw128(operand + (kk / 4) * (R * 128) + (kk % 4) * 32);
    return wgmma_descriptor(operand + kk * (R * 32));
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

// Copies ROWS rows of D 16-bit values into shared memory with cp.async, in 16-byte chunks, by THREADS
// threads (the block's, or a producer warpgroup's: this one is threadIdx.x % THREADS): chunk c of row r comes from
// row(r) + 8c (null: zero-filled, as are chunks at or past `width` columns) and lands at dst + offset(r, c). A warp
// takes 8 rows x 4 chunks: 64 contiguous bytes of each row, and in every layout here (offset(r, c) = f(r / 8, c) + (r %
// 8) · 16, f a multiple of 128 bytes) 32 distinct 16-byte bank slots, so the stores do not conflict.
template <int ROWS, int D, int THREADS, class Row, class Offset>
__device__ __forceinline__ void cp_async_rows(uint8_t* dst, Row row, Offset offset, int width, const void* any) {
    constexpr int CHUNKS = D / 8, GROUPS = CHUNKS / 4, COPIES = ROWS * CHUNKS / THREADS;
    static_assert(CHUNKS % 4 == 0 && ROWS % 8 == 0 && (ROWS * CHUNKS) % THREADS == 0);
    auto copy = [&](int e) {
        const int lane = e % 32, rest = e / 32;
        const int r = (rest / GROUPS) * 8 + lane % 8, c = (rest % GROUPS) * 4 + lane / 8;
        const uint16_t* src = row(r);
        const bool ok = src && c * 8 < width;
        cp_async_16(dst + offset(r, c), ok ? src + c * 8 : any, ok);
    };
    if constexpr (THREADS == WGMMA_THREADS) {
        // One warpgroup alone (a producer, on few registers): a rolled loop, whose addresses are not all
        // live at once.
#pragma unroll 1
        for (int i = 0; i < COPIES; ++i) copy(int(threadIdx.x) % THREADS + i * THREADS);
    } else {
#pragma unroll
        for (int i = 0; i < COPIES; ++i) copy(int(threadIdx.x) + i * THREADS);
    }
}

// Q's rows [0, rows) of the block: row r in warpgroup r / 64's stack of 64-row K-major slabs.
template <class Cfg>
__device__ __forceinline__ void load_q(uint8_t* q_s, const uint16_t* q, int64_t row_stride, int rows, int width) {
    cp_async_rows<Cfg::BR, Cfg::DL, Cfg::COPY_THREADS>(
        q_s, [&](int r) { return r < rows ? q + int64_t(r) * row_stride : nullptr; },
        [](int r, int c) { return uint32_t(r / 64) * Cfg::Q_GROUP + qk_offset<Cfg, 64>(r % 64, c); }, width, q);
}

// Keys [j0, j0 + rows) of K into a ring buffer as BC-row K-major slabs.
template <class Cfg>
__device__ __forceinline__ void load_k(uint8_t* dst, const AttentionArgs& a, const FlashBases& base, int b, int j0,
                                       int rows, bool& bad) {
    cp_async_rows<Cfg::BC, Cfg::DL, Cfg::COPY_THREADS>(
        dst, [&](int r) { return tile_row(a, base.k, a.k_stride, b, j0, r, rows, bad); },
        [](int r, int c) { return qk_offset<Cfg, Cfg::BC>(r, c); }, a.head_dim, base.k);
}
// The same keys of V, which P V reads MN-major (head dim contiguous):
// - plain: core matrix (key / 8, column / 8) at (key / 8) · V_KGROUP + (column / 8) · 128;
// - VSW128: as K sits (64-column blocks of BC rows of 128 bytes, chunks XORed by key % 8), which is the
//   MN-major 128-byte swizzle layout: an atom is 8 keys x 64 columns.
template <class Cfg>
__device__ __forceinline__ uint32_t v_offset(int r, int c) {
    if constexpr (Cfg::VSW128) return wgmma_sw128_offset(r, c, Cfg::BC);
    return uint32_t(r / 8) * Cfg::V_KGROUP + uint32_t(c) * 128 + uint32_t(r % 8) * 16;
}
template <class Cfg>
__device__ __forceinline__ void load_v(uint8_t* dst, const AttentionArgs& a, const FlashBases& base, int b, int j0,
                                       int rows, bool& bad) {
    cp_async_rows<Cfg::BC, Cfg::DL, Cfg::COPY_THREADS>(
        dst, [&](int r) { return tile_row(a, base.v, a.v_stride, b, j0, r, rows, bad); },
        [](int r, int c) { return v_offset<Cfg>(r, c); }, a.head_dim, base.v);
}
// The descriptor of V's keys [16u, 16u + 16) and columns [n0, n0 + ON) for P V (MN-major B).
// - plain: LBO is the distance between 8-key groups, SBO between 8-column groups (wgmma_probe_mn_major,
//   H200, 2026-12-04);
// - VSW128: the 8-key groups are the layout's 1024-byte atoms (SBO) and LBO steps to the next 64-column
//   block, BC · 128 bytes on (CUTLASS's canonical MN-major SW128 form; tests/gpu/test_gemm_gpu.cpp's
//   swizzled probe checks the first, the tile sweep's comparison against the default both).
template <class Cfg>
__device__ __forceinline__ uint64_t v_descriptor(const uint8_t* v_s, int u, int n0) {
    if constexpr (Cfg::VSW128)
        return wgmma_descriptor(v_s + uint32_t(u) * 2048 + uint32_t(n0 / 64) * (Cfg::BC * 128), Cfg::BC * 128, 1024) |
               (uint64_t(1) << 62);
    return wgmma_descriptor(v_s + 2 * u * Cfg::V_KGROUP + (n0 / 8) * 128, Cfg::V_KGROUP, 128);
}

template <DType DT, class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, Cfg::MIN_BLOCKS)
    flash_fwd_wgmma_kernel(AttentionArgs args, const __grid_constant__ WgmmaTmaParam<Cfg> tma) {
    constexpr int DL = Cfg::DL, BC = Cfg::BC, ON = Cfg::ON, NO = Cfg::NO, STAGES = Cfg::STAGES, NWG = Cfg::NWG;
    extern __shared__ __align__(128) uint8_t smem_dynamic[];
    uint8_t* smem_raw = smem_dynamic + ((1024 - smem_address(smem_dynamic) % 1024) % 1024);
    uint8_t* q_s = smem_raw;
    uint64_t* full_k = reinterpret_cast<uint64_t*>(smem_raw + Cfg::BARRIERS);
    uint64_t* full_v = full_k + STAGES;
    uint64_t* empty_k = full_v + STAGES;
    uint64_t* empty_v = empty_k + STAGES;
    uint64_t* tail_v = empty_v + STAGES;  // the TMA producer's last V tile, before its rows past the sequence are zeroed
    auto k_buf = [&](int tile) { return smem_raw + Cfg::K_RING + uint32_t(tile % STAGES) * Cfg::TILE_BYTES; };
    auto v_buf = [&](int tile) { return smem_raw + Cfg::V_RING + uint32_t(tile % STAGES) * Cfg::TILE_BYTES; };
    // The phase parity of a tile's use of its buffer (the (tile / STAGES)-th use).
    auto use_parity = [](int tile) { return uint32_t(tile / STAGES) & 1u; };

    const int tid = int(threadIdx.x), wg = tid / WGMMA_THREADS, wtid = tid % WGMMA_THREADS;
    const int lane = tid % WARP_SIZE, g = lane / 4, t = lane % 4;
    const int copy_tid = Cfg::PRODUCER ? wtid : tid;  // this thread among those that copy
    bool use_tma = false;  // TMA boxes (one producer thread) or cp.async (every copying thread)
    if constexpr (Cfg::TMA) use_tma = tma.valid != 0;
    FlashBlock blk;
    if (!enter_flash_block<DT, Cfg::BR, true, Cfg::TMA>(args, blk)) return;
    const int b = blk.b, i0 = blk.i0, rows_valid = blk.rows, q_len = blk.seq.q_len, kv_len = blk.seq.kv_len;
    const FlashBases base = flash_bases(args, blk);
    bool bad_block = false;

    const DeviceKeyRange first = device_visible_keys(i0, q_len, kv_len, args.causal, args.window_left);
    const DeviceKeyRange last = device_visible_keys(i0 + rows_valid - 1, q_len, kv_len, args.causal, args.window_left);
    const int64_t j_begin = first.lo / BC * BC, key_hi = last.hi;
    const int tiles = key_hi > j_begin ? int((key_hi - j_begin + BC - 1) / BC) : 0;
    // This thread's rows: g and g + 8 of its warp's 16 in its warpgroup's 64.
    const int warp_row0 = i0 + wg * 64 + (wtid / WARP_SIZE) * 16;
    auto tile_j0 = [&](int tile) { return int(j_begin + int64_t(tile) * BC); };
    auto tile_rows = [&](int tile) { return min(BC, kv_len - tile_j0(tile)); };

    if (tid == 0)
        for (int st = 0; st < STAGES; ++st) {
            const unsigned copiers = use_tma ? 1 : Cfg::COPY_THREADS;  // the arrivals a full phase counts
            mbarrier_init(&full_k[st], copiers), mbarrier_init(&full_v[st], copiers);
            constexpr unsigned WARPS = NWG * WGMMA_THREADS / WARP_SIZE;  // the warps that compute
            mbarrier_init(&empty_k[st], WARPS), mbarrier_init(&empty_v[st], WARPS);
            if (st == 0) mbarrier_init(tail_v, 1);
        }
    __syncthreads();  // the barriers are initialised before anyone arrives

    // Copies: K of a tile into the buffer K of tile - STAGES left (once every warp's S has read it), V
    // likewise after every warp's P V. Each thread's copies arrive on the buffer's full barrier.
    // A cp.async producer (a candidate that measured wrong results with asynchronous arrivals, 2026-12-05)
    // instead waits for its copies and fences them into the async proxy itself before it arrives: its
    // threads are the only writers, and no reader ever fences their writes. (Not yet run on a GPU.)
    auto arrive_copied = [&](uint64_t* full) {
        if constexpr (Cfg::PRODUCER) {
            cp_async_wait_all();
            fence_proxy_async();
            mbarrier_arrive(full);
        } else {
            cp_async_mbarrier_arrive(full);
        }
    };
    auto copy_k = [&](int tile) {
        if (tile >= tiles) return;
        if (tile >= STAGES) mbarrier_wait(&empty_k[tile % STAGES], use_parity(tile - STAGES));
        load_k<Cfg>(k_buf(tile), args, base, b, tile_j0(tile), tile_rows(tile), bad_block);
        arrive_copied(&full_k[tile % STAGES]);
    };
    auto copy_v = [&](int tile) {
        if (tile >= tiles) return;
        if (tile >= STAGES) mbarrier_wait(&empty_v[tile % STAGES], use_parity(tile - STAGES));
        load_v<Cfg>(v_buf(tile), args, base, b, tile_j0(tile), tile_rows(tile), bad_block);
        arrive_copied(&full_v[tile % STAGES]);
    };
    // Without a producer, every thread copies its share in the loop below; with one, the loop computes only.
    auto own_copy_k = [&](int tile) {
        if constexpr (!Cfg::PRODUCER) copy_k(tile);
    };
    auto own_copy_v = [&](int tile) {
        if constexpr (!Cfg::PRODUCER) copy_v(tile);
    };
    // Scores are scaled inside the exponent (the mma kernel's rule): a negative scale negates Q once, in
    // shared memory, by the threads that copied it (fence_proxy_async: visible to the wgmma).
    auto negate_q = [&] {
        for (int e = copy_tid; e < int(Cfg::Q_BYTES / 16); e += Cfg::COPY_THREADS) {
            uint4* x = reinterpret_cast<uint4*>(q_s) + e;
            x->x ^= 0x80008000u, x->y ^= 0x80008000u, x->z ^= 0x80008000u, x->w ^= 0x80008000u;
        }
        fence_proxy_async();
    };

    if constexpr (Cfg::TMA) {
        if (wg == NWG && use_tma) {
            // The TMA producer. A negative scale's Q comes by cp.async from the whole warpgroup, negated
            // (named barrier 3) before full_k[0] can open; otherwise Q's boxes join tile 0's K there. Then
            // warp 0 asks for V of tile j and K of tile j + 1 in turn, as the cp.async producer copies them
            // (lane 0 declares and arrives, each lane asks for a box), and zeroes the last V tile's rows
            // past a varlen or paged sequence.
            setmaxnreg_dec<Cfg::PRODUCER_REGS>();
            const bool negative = args.scale_log2 < 0.0f;
            if (tiles > 0 && negative) {
                load_q<Cfg>(q_s, base.q + int64_t(i0) * args.q_stride[1], args.q_stride[1], rows_valid,
                            args.head_dim);
                cp_async_wait_all();
                negate_q();
                named_barrier_sync(3, WGMMA_THREADS);
            }
            if (tiles > 0 && wtid < WARP_SIZE) {
                const bool issuer = wtid == 0;
                // Keys [j0, j0 + rows) of K or V into dst, box_rows keys a box: lane r asks for box r, so a
                // paged tile's block-table reads (up to BC / 8 of them) go out together, not one after another
                // on the producer's critical path. The tile's bytes are declared on bar before any box can
                // land and the arrival comes after. A paged box whose block id is out of range is skipped and
                // reported (the epilogue poisons the output).
                auto ask_keys = [&](const CUtensorMap& map, uint8_t* dst, uint64_t* bar, int j0, int rows) {
                    const int r0 = lane * tma.box_rows;
                    int row = 0, outer = 0;
                    const bool ok = r0 < rows && tma_kv_coords(args, blk, j0 + r0, row, outer);
                    if (r0 < rows && !ok) bad_block = true;
                    const unsigned boxes = __popc(__ballot_sync(unsigned(full_warp_mask()), ok));
                    if (issuer) mbarrier_expect_tx(bar, boxes * uint32_t(tma.box_rows) * 128u * (DL / 64));
                    __syncwarp();
                    if (ok)
                        for (int cb = 0; cb < DL / 64; ++cb)
                            tma_load_4d(dst + cb * (BC * 128) + r0 * 128, map, bar, 64 * cb, row, blk.kvh, outer);
                    if (issuer) mbarrier_arrive(bar);
                };
                // A tile of K or V into its ring buffer, once the empty barrier frees it. V's rows past a
                // varlen or paged sequence (the last tile's) hold another sequence's values or stale slots,
                // where P is 0 but 0 · NaN is not 0: that tile lands on tail_v, the warp zeroes those rows
                // (whole 128-byte rows, whatever the swizzle did within them) and fences them into the async
                // proxy, and only then opens full. A dense call's copy engine zero-fills them itself.
                auto tma_tile = [&](int tile, const CUtensorMap& map, uint8_t* dst, uint64_t* full, uint64_t* empty,
                                    bool is_v) {
                    if (tile >= tiles) return;
                    const int st = tile % STAGES, rows = tile_rows(tile);
                    if (tile >= STAGES) mbarrier_wait(&empty[st], use_parity(tile - STAGES));
                    const bool zero_tail = is_v && rows < BC && (args.cu_k || args.block_table);
                    ask_keys(map, dst, zero_tail ? tail_v : &full[st], tile_j0(tile), rows);
                    if (!zero_tail) return;
                    mbarrier_wait(tail_v, 0);  // one tail a block: its first phase
                    const int chunks = (BC - rows) * 8;  // 16-byte chunks past the sequence, a 64-column block
#pragma unroll 1
                    for (int e = lane; e < chunks * (DL / 64); e += WARP_SIZE)
                        *reinterpret_cast<uint4*>(dst + (e / chunks) * (BC * 128) + rows * 128 + (e % chunks) * 16) =
                            make_uint4(0, 0, 0, 0);
                    fence_proxy_async();
                    __syncwarp();
                    if (issuer) mbarrier_arrive(&full[st]);
                };
                if (issuer && !negative) {
                    mbarrier_expect_tx(&full_k[0], Cfg::Q_BYTES);
                    const int q_row = int(blk.seq.q_row0) + i0, q_outer = args.cu_q ? 0 : b;
                    for (int w = 0; w < NWG; ++w)
                        for (int cb = 0; cb < DL / 64; ++cb)
                            tma_load_4d(q_s + w * Cfg::Q_GROUP + cb * (64 * 128), tma.q, &full_k[0], 64 * cb,
                                        q_row + 64 * w, blk.h, q_outer);
                }
                tma_tile(0, tma.k, k_buf(0), full_k, empty_k, false);
#pragma unroll 1
                for (int tile = 0; tile < tiles; ++tile) {
                    tma_tile(tile, tma.v, v_buf(tile), full_v, empty_v, true);
                    tma_tile(tile + 1, tma.k, k_buf(tile + 1), full_k, empty_k, false);
                }
            }
            __syncthreads_or(bad_block);  // the epilogue's: the consumers learn of a bad block id from it
            return;
        }
    }
    if constexpr (Cfg::PRODUCER) {
        if (wg == NWG) {
            // The producer: Q with K of tile 0 (waited for here, so that a negative scale can negate Q
            // before the consumers see full_k[0]), then V of tile j and K of tile j + 1 in turn, in the
            // order the consumers read them. It then waits in the epilogue's barrier.
            setmaxnreg_dec<Cfg::PRODUCER_REGS>();
            if (tiles > 0) {
                load_q<Cfg>(q_s, base.q + int64_t(i0) * args.q_stride[1], args.q_stride[1], rows_valid, args.head_dim);
                load_k<Cfg>(k_buf(0), args, base, b, tile_j0(0), tile_rows(0), bad_block);
                cp_async_wait_all();
                if (args.scale_log2 < 0.0f) negate_q();
                fence_proxy_async();
                mbarrier_arrive(&full_k[0]);
                for (int tile = 0; tile < tiles; ++tile) {
                    copy_v(tile);
                    copy_k(tile + 1);
                }
                cp_async_wait_all();
            }
            __syncthreads_or(bad_block);  // the epilogue's: the consumers learn of a bad block id from it
            return;
        }
        setmaxnreg_inc<Cfg::CONSUMER_REGS>();
    } else {
        // Q and K of the first tile arrive on full_k[0] together.
        load_q<Cfg>(q_s, base.q + int64_t(i0) * args.q_stride[1], args.q_stride[1], rows_valid, args.head_dim);
        copy_k(0);
        if (tiles == 0) cp_async_wait_all();
        if (args.scale_log2 < 0.0f) {
            if (tiles > 0) mbarrier_wait(&full_k[0], 0);  // every thread's part of Q has landed
            negate_q();
            __syncthreads();
        }
    }
    const float c = fabsf(args.scale_log2);
    const uint8_t* q_wg = q_s + uint32_t(wg) * Cfg::Q_GROUP;

    // Two warpgroups take turns at issuing their products (named barriers 1 and 2): while one runs its
    // softmax, the other's products have the tensor cores. Warpgroup 1 opens warpgroup 0's first turn,
    // and does not open a turn after its own last one (each barrier then sees as many arrivals as waits).
    const int turns = tiles > 0 ? tiles + 1 : 0;
    int turn = 0;
    auto turn_begin = [&] {
        if constexpr (NWG == 2) named_barrier_sync(1 + wg, 2 * WGMMA_THREADS);
    };
    auto turn_end = [&] {
        if constexpr (NWG == 2)
            if (!(wg == 1 && turn == turns - 1)) named_barrier_arrive(1 + (1 - wg), 2 * WGMMA_THREADS);
        ++turn;
    };
    if constexpr (NWG == 2)
        if (wg == 1 && turns > 0) named_barrier_arrive(1, 2 * WGMMA_THREADS);

    float o[NO][ON / 2];
#pragma unroll
    for (int h = 0; h < NO; ++h)
#pragma unroll
        for (int i = 0; i < ON / 2; ++i) o[h][i] = 0.0f;
#pragma unroll
    for (int h = 0; h < NO; ++h) wgmma_fence_operands(o[h]);   // the zeros are set before the loop, on every path
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // l: this thread's partial row sums
    float alpha[2] = {1.0f, 1.0f};                             // O's rescale before the next P V
    uint32_t pf[BC / 16][4];                                   // P of the last softmax, as P V's A fragments

    // S = Q Kᵀ of a tile over the head dim's k16 slabs (the first overwrites: no earlier S stays alive).
    auto issue_s = [&](float(&s)[BC / 2], int tile) {
        const uint8_t* k_s = k_buf(tile);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < Cfg::KQ; ++kk)
            wgmma_mma<DT, BC>(s, qk_descriptor<Cfg, 64>(q_wg, kk), qk_descriptor<Cfg, BC>(k_s, kk), kk > 0);
        wgmma_commit();
    };
    // O = O · alpha + P V of a tile: keys [16u, 16u + 16) are V's k groups 2u and 2u + 1; accumulator h
    // takes columns [h · ON, h · ON + ON) (v_descriptor).
    auto issue_pv = [&](int tile) {
#pragma unroll
        for (int r = 0; r < 2; ++r)
#pragma unroll
            for (int h = 0; h < NO; ++h)
#pragma unroll
                for (int n = 0; n < ON / 8; ++n) o[h][4 * n + 2 * r] *= alpha[r], o[h][4 * n + 2 * r + 1] *= alpha[r];
        // The rescale is pinned before wgmma_fence: left free, the compiler sinks the multiplies past it, and
        // ptxas must then fence the accumulators itself. At d256 it did so in a divergent path and
        // serialized every wgmma of the kernel (ptxas C7520).
#pragma unroll
        for (int h = 0; h < NO; ++h) wgmma_fence_operands(o[h]);
        mbarrier_wait(&full_v[tile % STAGES], use_parity(tile));
        fence_proxy_async();
        const uint8_t* v_s = v_buf(tile);
        wgmma_fence();  // the rescaled O registers are the accumulators
#pragma unroll
        for (int u = 0; u < BC / 16; ++u)
#pragma unroll
            for (int h = 0; h < NO; ++h)
                wgmma_mma_rs<DT, ON, true>(o[h], pf[u], v_descriptor<Cfg>(v_s, u, h * ON), true);
        wgmma_commit();
    };
    // The online softmax of a tile's S, in place (S becomes P, unrounded): masks, the running max m (in
    // scaled log2 units), alpha = exp2(m_old - m_new) for O, and l.
    auto softmax = [&](float(&s)[BC / 2], int tile) {
        const int j0 = tile_j0(tile);
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
                        const int j = j0 + n * 8 + 2 * t + (e & 1);
                        if (j < lo || j >= hi) s[4 * n + e] = -INFINITY;
                    }
            }
        }
        float row_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int i = 0; i < BC / 2; ++i) row_max[(i % 4) / 2] = fmaxf(row_max[(i % 4) / 2], s[i]);
        float m_use[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const float m_new = fmaxf(m[r], group_max<4>(row_max[r]) * c);
            m_use[r] = m_new == -INFINITY ? 0.0f : m_new;  // nothing seen yet: keep exp2 finite
            alpha[r] = fast_exp2(m[r] - m_use[r]);
            m[r] = m_new;
            l[r] *= alpha[r];
        }
#pragma unroll
        for (int i = 0; i < BC / 2; ++i) {
            s[i] = fast_exp2(fmaf(s[i], c, -m_use[(i % 4) / 2]));
            l[(i % 4) / 2] += s[i];
        }
    };
    auto pack_p = [&](const float(&s)[BC / 2]) {  // S's column blocks 2u, 2u + 1: keys [16u, 16u + 16)
#pragma unroll
        for (int u = 0; u < BC / 16; ++u)
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const float* p = &s[4 * (2 * u + half)];
                pf[u][2 * half] = pack2<DT>(p[0], p[1]);
                pf[u][2 * half + 1] = pack2<DT>(p[2], p[3]);
            }
    };
    auto release = [&](uint64_t* bar) {
        if (lane == 0) mbarrier_arrive(bar);
    };

    // Tile j, in each warpgroup: S of tile j and P V of tile j - 1 go out back to back in its turn; the
    // softmax of tile j then runs while P V of tile j - 1 (and the other warpgroup's products) keep the
    // tensor cores busy. K of tile j + 1 and V of tile j are copied meanwhile, each into the buffer of
    // STAGES tiles earlier.
    if (tiles > 0) {
        float s[BC / 2];
        own_copy_v(0);
        own_copy_k(1);
        mbarrier_wait(&full_k[0], 0);
        fence_proxy_async();
        turn_begin();
        issue_s(s, 0);
        turn_end();
        wgmma_wait<0>();
        wgmma_fence_operands(s);
        release(&empty_k[0]);
        softmax(s, 0);
        pack_p(s);
    }
    for (int it = 1; it < tiles; ++it) {
        float s[BC / 2];
        if constexpr (STAGES > 2) own_copy_v(it);
        own_copy_k(it + 1);
        mbarrier_wait(&full_k[it % STAGES], use_parity(it));
        fence_proxy_async();
        turn_begin();
        issue_s(s, it);
        issue_pv(it - 1);
        turn_end();
        wgmma_wait<1>();  // S of tile it
        wgmma_fence_operands(s);
        release(&empty_k[it % STAGES]);
        softmax(s, it);
        wgmma_wait<0>();  // P V of tile it - 1: O settled, P's registers free
#pragma unroll
        for (int h = 0; h < NO; ++h) wgmma_fence_operands(o[h]);
        release(&empty_v[(it - 1) % STAGES]);
        pack_p(s);
        // With two buffers, V of tile it goes where V of tile it - 2 was: every warp has released that by
        // now (the other warpgroup half a tile ago), where at the top of the loop it would wait for it.
        if constexpr (STAGES == 2) own_copy_v(it);
    }
    if (tiles > 0) {
        turn_begin();
        issue_pv(tiles - 1);
        turn_end();
    }
    wgmma_wait<0>();
#pragma unroll
    for (int h = 0; h < NO; ++h) wgmma_fence_operands(o[h]);

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
            for (int n = 0; n < ON / 8; ++n)
                if (h * ON + n * 8 < args.head_dim)  // D may round the head dim up: those columns are never stored
                    *reinterpret_cast<uint32_t*>(orow + h * ON + n * 8 + 2 * t) =
                        pack2<DT>(o[h][4 * n + 2 * r] * inv_l, o[h][4 * n + 2 * r + 1] * inv_l);
        if (args.lse && t == 0)
            args.lse[b * args.lse_stride[0] + blk.h * args.lse_stride[1] + (blk.seq.q_row0 + i) * args.lse_stride[2]] =
                poisoned ? inv_l : softmax_lse2(m[r], row_l) * LN2;
    }
}

// Launches one instance; a TMA instance takes the maps given, or encodes its own.
template <DType DT, class Cfg>
void launch_flash_fwd_wgmma(const AttentionArgs& args, cudaStream_t stream, const WgmmaTmaParam<Cfg>* maps = nullptr) {
    static const bool attribute_set =
        (allow_dynamic_smem(flash_fwd_wgmma_kernel<DT, Cfg>, Cfg::SMEM_BYTES, "flash_fwd_wgmma_kernel"), true);
    (void)attribute_set;
    const dim3 grid(unsigned(ceil_div(args.q_len, Cfg::BR)), unsigned(args.n_heads), unsigned(args.batch));
    WgmmaTmaParam<Cfg> tma{};
    if constexpr (Cfg::TMA) tma = maps ? *maps : wgmma_tma_maps<Cfg>(args);
    AttentionArgs ordered = args;
    ordered.heads_first = longest_first_over_heads(args, current_device_info().l2_bytes);
    launch_kernel(flash_fwd_wgmma_kernel<DT, Cfg>, grid, Cfg::THREADS, Cfg::SMEM_BYTES, stream, ordered, tma);
    FP_GPU_CHECK_LAUNCH("flash_fwd_wgmma_kernel");
}

}  // namespace flashport::gpu::nvidia_only
