// The portable GEMM: C[z] = alpha * op(A[z]) op(B[z]) + beta * C[z] (blas.h) with FP32 FMAs, for every
// target and dtype. It serves where no vendor BLAS exists (Debian's HIP has no hipBLAS) and
// FLASHPORT_GPU_BLAS=portable forces it elsewhere.
//
// Design: a classic register-blocked SGEMM.
// - A block of 256 threads (16 x 16) computes a BM x BN tile of C, BM = 64 * SUB_M, BN = 64 * SUB_N:
//   128x128 for large problems, 64x64 where a 128 tile would be mostly padding (decode's m <= 16,
//   attention's head_dim-wide products, small batched tiles).
// - Thread (ty, tx) owns SUB_M x SUB_N sub-blocks of 4x4 elements of C, at rows ty*4 + 64*i and
//   columns tx*4 + 64*j: 8x8 accumulators at 128x128. Its operands come from shared memory as float4
//   reads (one per 4x4 sub-block side, 2 + 2 per k step at 128x128); the 16 threads of a row of the
//   thread grid read 64 consecutive floats of B, no bank conflicts, and A's reads are broadcasts.
// - k advances BK = 8 at a time. The BM x 8 and BN x 8 operand slices are stored k-major ([8][BM + 4])
//   in fp32, converted once at staging. Two shared buffers: while the block multiplies slice t, each
//   thread holds its share of slice t + 1 in registers (loaded before the FMAs, stored after), so the
//   global loads' latency hides behind 512 (128x128) FMAs per thread and one barrier per slice.
// - Global loads: each thread loads V = rows / 32 consecutive elements of one operand (4 at 128, 2 at
//   64), along k when the operand is contiguous along k (A not transposed, B transposed: two or four
//   threads per row) or along m/n otherwise (32 threads per k row, coalesced). One vector load when the
//   operand's base, leading dimension and batch stride are multiples of V elements and the run lies
//   inside the matrix; element by element, zero-filled past the edges, otherwise. The +4 padding of
//   the shared rows makes the transposing stores of the k-contiguous case conflict-free and keeps
//   every row 16-byte aligned for the float4 reads.
// - No warp-width assumption: nothing but __syncthreads couples threads, so 32- and 64-wide warps run
//   the same code (tested at wave64 under the HIP CPU Runtime).
//
// Floor (docs/perf.md "Portable GEMM"): a Qwen2.5-7B prefill projection, m = 4096 tokens, n = k = 3584,
// is 2mnk = 105.2 GFLOP: 1.57 ms at the H200's 66.9 TFLOP/s FP32 FMA rate. Each thread issues 4 LDS.128
// per 64 FMAs (6 % of the issue slots) and two global loads per 512 FMAs, so the FMA pipe is the
// limit; 128 registers per thread allow two blocks (16 warps) per SM, and 896 tiles on 132 SMs run in
// 3.4 rounds of 264 (the last one partial: at most 85 % of the SM-time does work). Predicted: 55-65 %
// of the FMA rate, 37-43 TFLOP/s (2.4-2.8 ms); cuBLAS's SGEMM reaches ~75-80 % on the same chip.
#include "backends/gpu/gemm_common.cuh"

namespace flashport::gpu::blas {
namespace {

constexpr int BK = 8;   // k per slice
constexpr int PAD = 4;  // floats after each shared row: conflict-free, 16-byte aligned

// V consecutive elements from aligned memory, widened to fp32.
template <DType DT, int V>
__device__ __forceinline__ void load_vector(const storage_t<DT>* src, float (&r)[V]) {
    struct alignas(sizeof(storage_t<DT>) * V) Pack {
        storage_t<DT> v[V];
    };
    const Pack pack = *reinterpret_cast<const Pack*>(src);
#pragma unroll
    for (int j = 0; j < V; ++j) r[j] = to_float<DT>(pack.v[j]);
}

// The ROWS x BK slice of one operand starting at (row0, p0): this thread's V = ROWS / 32 elements, as
// floats (zero outside the rows x k matrix).
template <DType DT, int ROWS>
__device__ __forceinline__ void load_slice(const GemmSide& s, const storage_t<DT>* x, int64_t rows, int64_t k,
                                           int64_t row0, int64_t p0, float (&r)[ROWS / 32]) {
    constexpr int V = ROWS / 32;
    const int t = int(threadIdx.x);
    int64_t i, p;  // this thread's first element; the others follow along k or along the rows
    if (s.k_contig) {
        i = row0 + t / (BK / V);
        p = p0 + (t % (BK / V)) * V;
    } else {
        p = p0 + t / (ROWS / V);
        i = row0 + (t % (ROWS / V)) * V;
    }
    const bool inside = s.k_contig ? (i < rows && p + V <= k) : (p < k && i + V <= rows);
    if (inside) {
        const storage_t<DT>* src = s.k_contig ? x + i * s.ld + p : x + p * s.ld + i;
        if (s.vec) {
            load_vector<DT, V>(src, r);
        } else {
#pragma unroll
            for (int j = 0; j < V; ++j) r[j] = to_float<DT>(src[j]);
        }
        return;
    }
#pragma unroll
    for (int j = 0; j < V; ++j) {  // an edge: element by element, never reading past the matrix
        const int64_t ij = s.k_contig ? i : i + j, pj = s.k_contig ? p + j : p;
        r[j] = (ij < rows && pj < k) ? to_float<DT>(x[s.k_contig ? ij * s.ld + pj : pj * s.ld + ij]) : 0.0f;
    }
}

// This thread's elements of a slice into the k-major shared buffer s[BK][ROWS + PAD].
template <int ROWS>
__device__ __forceinline__ void store_slice(bool k_contig, float (*s)[ROWS + PAD], const float (&r)[ROWS / 32]) {
    constexpr int V = ROWS / 32;
    const int t = int(threadIdx.x);
    if (k_contig) {
        const int row = t / (BK / V), q = (t % (BK / V)) * V;
#pragma unroll
        for (int j = 0; j < V; ++j) s[q + j][row] = r[j];
    } else {
        const int q = t / (ROWS / V), row = (t % (ROWS / V)) * V;
#pragma unroll
        for (int j = 0; j < V; ++j) s[q][row + j] = r[j];
    }
}

template <DType DT, DType DC, int SUB_M, int SUB_N>
__global__ void __launch_bounds__(GEMM_THREADS) gemm_portable_kernel(GemmArgs g) {
    constexpr int BM = 64 * SUB_M, BN = 64 * SUB_N;
    using T = storage_t<DT>;
    alignas(16) __shared__ float as[2][BK][BM + PAD];
    alignas(16) __shared__ float bs[2][BK][BN + PAD];

    const int64_t z = blockIdx.z;
    const T* a = static_cast<const T*>(g.a.data) + z * g.a.batch_stride;
    const T* b = static_cast<const T*>(g.b.data) + z * g.b.batch_stride;
    storage_t<DC>* c = static_cast<storage_t<DC>*>(g.c) + z * g.stride_c;
    const int64_t row0 = int64_t(blockIdx.y) * BM, col0 = int64_t(blockIdx.x) * BN;
    const int tx = int(threadIdx.x) % 16, ty = int(threadIdx.x) / 16;

    float acc[SUB_M * 4][SUB_N * 4] = {};
    float ra[BM / 32], rb[BN / 32];
    const int64_t slices = (g.k + BK - 1) / BK;
    if (slices > 0) {
        load_slice<DT, BM>(g.a, a, g.m, g.k, row0, 0, ra);
        load_slice<DT, BN>(g.b, b, g.n, g.k, col0, 0, rb);
        store_slice<BM>(g.a.k_contig, as[0], ra);
        store_slice<BN>(g.b.k_contig, bs[0], rb);
    }
    __syncthreads();
    for (int64_t t = 0; t < slices; ++t) {
        const int cur = int(t & 1);
        const bool more = t + 1 < slices;
        if (more) {  // the next slice into registers; its loads complete while the FMAs below run
            load_slice<DT, BM>(g.a, a, g.m, g.k, row0, (t + 1) * BK, ra);
            load_slice<DT, BN>(g.b, b, g.n, g.k, col0, (t + 1) * BK, rb);
        }
#pragma unroll
        for (int q = 0; q < BK; ++q) {
            float av[SUB_M * 4], bv[SUB_N * 4];
#pragma unroll
            for (int i = 0; i < SUB_M; ++i) {
                const float4 v = *reinterpret_cast<const float4*>(&as[cur][q][ty * 4 + 64 * i]);
                av[4 * i] = v.x, av[4 * i + 1] = v.y, av[4 * i + 2] = v.z, av[4 * i + 3] = v.w;
            }
#pragma unroll
            for (int j = 0; j < SUB_N; ++j) {
                const float4 v = *reinterpret_cast<const float4*>(&bs[cur][q][tx * 4 + 64 * j]);
                bv[4 * j] = v.x, bv[4 * j + 1] = v.y, bv[4 * j + 2] = v.z, bv[4 * j + 3] = v.w;
            }
#pragma unroll
            for (int r = 0; r < SUB_M * 4; ++r)
#pragma unroll
                for (int s = 0; s < SUB_N * 4; ++s) acc[r][s] = fmaf(av[r], bv[s], acc[r][s]);
        }
        if (more) {  // the other buffer: nobody reads it since the barrier that ended slice t - 1
            store_slice<BM>(g.a.k_contig, as[cur ^ 1], ra);
            store_slice<BN>(g.b.k_contig, bs[cur ^ 1], rb);
        }
        __syncthreads();
    }

#pragma unroll
    for (int r = 0; r < SUB_M * 4; ++r) {
        const int64_t i = row0 + ty * 4 + 64 * (r / 4) + r % 4;
        if (i >= g.m) continue;
#pragma unroll
        for (int s = 0; s < SUB_N * 4; ++s) {
            const int64_t j = col0 + tx * 4 + 64 * (s / 4) + s % 4;
            if (j >= g.n) continue;
            float v = g.alpha * acc[r][s];
            if (g.beta != 0.0f) v += g.beta * to_float<DC>(c[i * g.ldc + j]);  // beta = 0 never reads C (NaN-safe)
            c[i * g.ldc + j] = from_float<DC>(v);
        }
    }
}

// 128x128 tiles unless they would pad the problem by 20 % more than 64x64 tiles (small or ragged m, n).
bool big_tile(int64_t m, int64_t n) {
    const auto area = [&](int64_t t) { return double(ceil_div(m, t) * t) * double(ceil_div(n, t) * t); };
    return m >= 128 && n >= 128 && area(128) <= 1.2 * area(64);
}

template <DType DT, DType DC, int SUB_M, int SUB_N>
void launch(const GemmProblem& p, cudaStream_t stream) {
    constexpr int BM = 64 * SUB_M, BN = 64 * SUB_N;  // each thread loads BM / 32 (BN / 32) elements a slice
    launch_gemm_tiles<BM, BN>(gemm_portable_kernel<DT, DC, SUB_M, SUB_N>, p, gemm_args(p, BM / 32, BN / 32),
                              "gemm_portable_kernel", stream);
}

template <DType DT, DType DC>
void launch_tile(const GemmProblem& p, cudaStream_t stream) {
    if (big_tile(p.m, p.n))
        launch<DT, DC, 2, 2>(p, stream);
    else
        launch<DT, DC, 1, 1>(p, stream);
}

}  // namespace

const char* gemm_portable_tile(int64_t m, int64_t n) {
    return big_tile(m, n) ? "128x128" : "64x64";
}

void gemm_portable(const GemmProblem& p, void* stream) {
    dispatch_dtype(p.ab_dtype, [&]<DType DT>() {
        if (p.c_dtype == DT)
            launch_tile<DT, DT>(p, as_stream(stream));
        else if constexpr (DT != DType::F32)
            launch_tile<DT, DType::F32>(p, as_stream(stream));
    });
}

}  // namespace flashport::gpu::blas
