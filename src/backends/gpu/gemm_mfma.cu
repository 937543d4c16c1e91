// The GEMM on AMD matrix cores (CDNA: gfx908 fp16, gfx90a/940 fp16 and bf16): blas::gemm's kernel for
// 16-bit inputs where no vendor BLAS is linked (blas.h, Backend::MFMA). Same contract as the portable
// kernel (gemm_portable.cu): any size, stride, transpose and batch, fp32 accumulation, C in the inputs'
// dtype or fp32, beta = 0 never reading C.
//
// No AMD GPU was available: the kernel has run only under the HIP CPU Runtime, whose MFMA emulation
// follows AMD's published lane layouts (tests/gpu/test_mfma_emulation.cpp); the hip preset compiles it
// for every target (MFMA code on gfx908/90a/940, a trap body on gfx906/gfx1030, where blas.cu never
// selects it). Nothing here claims AMD speed.
//
// Work split: a block of 256 threads (four 64-lane waves, 2 x 2) computes a BM x BN tile of C, BM =
// 64 * SUB_M (128 or 64, the portable kernel's tile choice); each wave a (BM / 2) x (BN / 2) quarter as
// (2 SUB_M) x (2 SUB_N) v_mfma_f32_16x16x16 tiles, fp32 accumulators in registers (64 floats a lane at
// 128x128). k advances BK = 32 at a time (two MFMA k steps). Both operands sit in shared memory as
// [rows][BK + 8] 16-bit values, k contiguous, which is the MFMA operand layout: lane L's A fragment is
// row 16 t + L % 16, k 4 (L / 16) .. + 3, one 8-byte read (B the same with C's columns); the +8 keeps
// rows 16-byte aligned. Two buffers: the next slice is loaded into registers (raw 16-bit, eight
// elements per load: 16 bytes when aligned) before the MFMAs and stored after them, one barrier per
// slice. An operand contiguous along k is stored with 16-byte writes, one contiguous along m/n (A
// transposed, B not: naive attention's V) element by element.
//
// Result D of a 16x16 tile: lane L holds rows 4 (L / 16) + r, column L % 16 (r < 4), mfma.cuh's layout.
#include <string_view>

#include "backends/gpu/gemm_common.cuh"
#include "backends/gpu/mfma.cuh"

namespace flashport::gpu::blas {
namespace {

constexpr int MBK = 32;             // k per slice
constexpr int MLD = MBK + 8;        // shared row stride in elements (80 bytes: 16-byte aligned rows)

template <DType DT>
__device__ __forceinline__ fp_f32x4 gemm_mfma_16x16x16(fp_i16x4 a, fp_i16x4 b, fp_f32x4 c) {
    if constexpr (DT == DType::BF16)
        return fp_mfma_16x16x16_bf16(a, b, c);
    else
        return fp_mfma_16x16x16_f16(a, b, c);
}

// This thread's runs of one operand's ROWS x MBK slice at (row0, p0): ROWS / 64 runs of 8 elements,
// along k (k-contiguous operand: four runs a row) or along the rows (ROWS / 8 runs a k).
// Zero outside the rows x k matrix.
template <int ROWS>
__device__ __forceinline__ void load_runs(const GemmSide& s, const uint16_t* x, int64_t rows, int64_t k, int64_t row0,
                                          int64_t p0, uint16_t (&r)[ROWS / 64][8]) {
#pragma unroll
    for (int h = 0; h < ROWS / 64; ++h) {
        const int u = int(threadIdx.x) + GEMM_THREADS * h;
        int64_t i, p;
        if (s.k_contig) {
            i = row0 + u / (MBK / 8);
            p = p0 + (u % (MBK / 8)) * 8;
        } else {
            p = p0 + u / (ROWS / 8);
            i = row0 + (u % (ROWS / 8)) * 8;
        }
        const bool inside = s.k_contig ? (i < rows && p + 8 <= k) : (p < k && i + 8 <= rows);
        if (inside && s.vec) {
            const uint4 raw = *reinterpret_cast<const uint4*>(s.k_contig ? x + i * s.ld + p : x + p * s.ld + i);
            const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
            for (int e = 0; e < 4; ++e) r[h][2 * e] = uint16_t(w[e] & 0xffffu), r[h][2 * e + 1] = uint16_t(w[e] >> 16);
            continue;
        }
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            const int64_t ie = s.k_contig ? i : i + e, pe = s.k_contig ? p + e : p;
            r[h][e] = (ie < rows && pe < k) ? x[s.k_contig ? ie * s.ld + pe : pe * s.ld + ie] : uint16_t(0);
        }
    }
}

// The runs into the shared slice sm[ROWS][MLD] (k contiguous).
template <int ROWS>
__device__ __forceinline__ void store_runs(bool k_contig, uint16_t* sm, const uint16_t (&r)[ROWS / 64][8]) {
#pragma unroll
    for (int h = 0; h < ROWS / 64; ++h) {
        const int u = int(threadIdx.x) + GEMM_THREADS * h;
        if (k_contig) {
            const int row = u / (MBK / 8), q = (u % (MBK / 8)) * 8;
            uint4 raw;
            raw.x = uint32_t(r[h][0]) | uint32_t(r[h][1]) << 16;
            raw.y = uint32_t(r[h][2]) | uint32_t(r[h][3]) << 16;
            raw.z = uint32_t(r[h][4]) | uint32_t(r[h][5]) << 16;
            raw.w = uint32_t(r[h][6]) | uint32_t(r[h][7]) << 16;
            *reinterpret_cast<uint4*>(sm + row * MLD + q) = raw;
        } else {
            const int q = u / (ROWS / 8), row = (u % (ROWS / 8)) * 8;
#pragma unroll
            for (int e = 0; e < 8; ++e) sm[(row + e) * MLD + q] = r[h][e];
        }
    }
}

template <DType DT, DType DC, int SUB_M, int SUB_N>
__global__ void __launch_bounds__(GEMM_THREADS) gemm_mfma_kernel(GemmArgs g) {
#if defined(FLASHPORT_HIP_CPU) || FP_HAS_MFMA
    constexpr int MFMA_GEMM_WAVE = 64;  // MFMA instructions are defined on 64-lane waves
    static_assert(WARP_SIZE == MFMA_GEMM_WAVE, "MFMA needs 64-lane waves");
    static_assert(DT != DType::F32, "MFMA takes 16-bit inputs");
    constexpr int BM = 64 * SUB_M, BN = 64 * SUB_N;
    constexpr int TM = 2 * SUB_M, TN = 2 * SUB_N;  // 16x16 MFMA tiles per wave along m and n
    alignas(16) __shared__ uint16_t as[2][BM * MLD];
    alignas(16) __shared__ uint16_t bs[2][BN * MLD];

    const int64_t z = blockIdx.z;
    const auto* a = static_cast<const uint16_t*>(g.a.data) + z * g.a.batch_stride;
    const auto* b = static_cast<const uint16_t*>(g.b.data) + z * g.b.batch_stride;
    storage_t<DC>* c = static_cast<storage_t<DC>*>(g.c) + z * g.stride_c;
    const int64_t row0 = int64_t(blockIdx.y) * BM, col0 = int64_t(blockIdx.x) * BN;
    const int tid = int(threadIdx.x), wave = tid / MFMA_GEMM_WAVE, lane = tid % MFMA_GEMM_WAVE;
    const int wr = (wave / 2) * (BM / 2), wc = (wave % 2) * (BN / 2);  // the wave's quarter of the tile
    const int col = lane % 16, grp = lane / 16;                        // the MFMA layouts' lane coordinates

    fp_f32x4 acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fp_f32x4{};
    uint16_t ra[BM / 64][8], rb[BN / 64][8];
    const int64_t slices = (g.k + MBK - 1) / MBK;
    if (slices > 0) {
        load_runs<BM>(g.a, a, g.m, g.k, row0, 0, ra);
        load_runs<BN>(g.b, b, g.n, g.k, col0, 0, rb);
        store_runs<BM>(g.a.k_contig, as[0], ra);
        store_runs<BN>(g.b.k_contig, bs[0], rb);
    }
    __syncthreads();
    for (int64_t t = 0; t < slices; ++t) {
        const int cur = int(t & 1);
        const bool more = t + 1 < slices;
        if (more) {  // the next slice into registers while the matrix cores work on this one
            load_runs<BM>(g.a, a, g.m, g.k, row0, (t + 1) * MBK, ra);
            load_runs<BN>(g.b, b, g.n, g.k, col0, (t + 1) * MBK, rb);
        }
#pragma unroll
        for (int ks = 0; ks < MBK / 16; ++ks) {
            fp_i16x4 af[TM], bf[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) {
                const uint16_t* src = as[cur] + (wr + 16 * i + col) * MLD + 16 * ks + 4 * grp;
#pragma unroll
                for (int e = 0; e < 4; ++e) af[i][e] = short(src[e]);
            }
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                const uint16_t* src = bs[cur] + (wc + 16 * j + col) * MLD + 16 * ks + 4 * grp;
#pragma unroll
                for (int e = 0; e < 4; ++e) bf[j][e] = short(src[e]);
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = gemm_mfma_16x16x16<DT>(af[i], bf[j], acc[i][j]);
        }
        if (more) {  // the other buffer: nobody reads it since the barrier that ended slice t - 1
            store_runs<BM>(g.a.k_contig, as[cur ^ 1], ra);
            store_runs<BN>(g.b.k_contig, bs[cur ^ 1], rb);
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int64_t ci = row0 + wr + 16 * i + 4 * grp + r, cj = col0 + wc + 16 * j + col;
                if (ci >= g.m || cj >= g.n) continue;
                float v = g.alpha * acc[i][j][r];
                if (g.beta != 0.0f) v += g.beta * to_float<DC>(c[ci * g.ldc + cj]);  // beta = 0 never reads C
                c[ci * g.ldc + cj] = from_float<DC>(v);
            }
#else
    (void)g;
    __builtin_trap();  // no matrix cores on this target (gfx906, RDNA); blas.cu never selects it here
#endif
}

template <DType DT, DType DC, int SUB_M, int SUB_N>
void launch(const GemmProblem& p, cudaStream_t stream) {
    constexpr int BM = 64 * SUB_M, BN = 64 * SUB_N;
    launch_gemm_tiles<BM, BN>(gemm_mfma_kernel<DT, DC, SUB_M, SUB_N>, p, gemm_args(p, 8, 8), "gemm_mfma_kernel",
                              stream);
}

template <DType DT, DType DC>
void launch_tile(const GemmProblem& p, cudaStream_t stream) {
    if (std::string_view(gemm_portable_tile(p.m, p.n)) == "128x128")
        launch<DT, DC, 2, 2>(p, stream);
    else
        launch<DT, DC, 1, 1>(p, stream);
}

template <DType DT>
void launch_dtype(const GemmProblem& p, cudaStream_t stream) {
    if (p.c_dtype == DT)
        launch_tile<DT, DT>(p, stream);
    else
        launch_tile<DT, DType::F32>(p, stream);
}

}  // namespace

void gemm_mfma(const GemmProblem& p, void* stream) {
    FP_CHECK(p.ab_dtype != DType::F32, "the MFMA GEMM takes fp16 or bf16 inputs, not fp32");
    if (p.ab_dtype == DType::F16)
        launch_dtype<DType::F16>(p, as_stream(stream));
    else
        launch_dtype<DType::BF16>(p, as_stream(stream));
}

}  // namespace flashport::gpu::blas
