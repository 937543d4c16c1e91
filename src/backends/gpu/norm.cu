// RMSNorm on the GPU, with the CPU kernel's rounding points (backends/cpu/norm.cpp, flashport/ops.h):
//   var = mean(float(x)²)                  fp32, a block-wide sum
//   h   = round_x(float(x) · (1 / sqrt(var + eps)))
//   out = round_out(float(weight) · h)
// and the fused residual variant (add_rms_norm): s = round_s(x + residual) is written to residual_out
// and normalised as x is above, in one pass over the row instead of an add launch and a norm launch.
// Layout: x, out (and residual, residual_out) [..., dim] with any outer strides; weight [dim].
// One block per row (grid-stride over rows): pass 1 sums the squares (and writes s), a block
// reduction gives the variance, pass 2 re-reads the row (from L1/L2) and writes out. Each thread
// handles the same columns in both passes, so in the fused variant it reads back only its own writes
// of residual_out, which may therefore alias x or residual. Variants: fused or not × 4-wide vector
// loads when every row view is aligned for them, else element loads (same sums, see load_group).
//
// 1 / sqrtf (both correctly rounded, as nvcc and hipcc compile them without fast-math) rather than
// rsqrtf: the CPU divides by a square root. Only the fp32 sum order differs from the CPU, so an
// output can differ from the CPU's by one unit where the scale lands next to a rounding boundary.
#include "backends/gpu/ops_common.cuh"
#include "backends/gpu/ops_gpu.h"

namespace flashport::gpu {
namespace {

using namespace ops;

constexpr int MAX_THREADS = 1024;

struct NormArgs {
    RowView out, x, residual, sum;  // residual, sum (= residual_out): the fused variant only
    const void* weight;
    DType weight_dtype;
    int64_t rows, dim;
    float eps;
};

// Each thread owns groups of VEC consecutive columns, whether it loads them as one vector (VECTOR)
// or one by one: the sum of squares then adds the same values in the same order in both variants, so
// alignment never changes a result, and add_rms_norm matches add followed by rms_norm bit for bit.
template <bool VECTOR>
__device__ __forceinline__ void load_group(const void* p, DType dt, int64_t c, int64_t dim, float (&v)[VEC]) {
    if constexpr (VECTOR) {
        load_vec(p, dt, c, v);
    } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j) v[j] = c + j < dim ? load(p, dt, c + j) : 0.0f;  // + 0² keeps the sum
    }
}
template <bool VECTOR>
__device__ __forceinline__ void store_group(void* p, DType dt, int64_t c, int64_t dim, const float (&v)[VEC]) {
    if constexpr (VECTOR) {
        store_vec(p, dt, c, v);
    } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j)
            if (c + j < dim) store(p, dt, c + j, v[j]);
    }
}

template <bool FUSED, bool VECTOR>
__global__ void __launch_bounds__(MAX_THREADS) rms_norm_kernel(NormArgs a) {
    __shared__ float scratch[MAX_THREADS / WARP_SIZE];
    const DType in_dtype = FUSED ? a.sum.dtype : a.x.dtype;  // the dtype of the normalised input
    const int64_t step = int64_t(blockDim.x) * VEC;
    wait_for_prior_grid();  // launched dependent (launch_dependent): nothing read before this
    allow_next_grid();
    for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
        const char* px = a.x.row(r);
        [[maybe_unused]] const char* pr = FUSED ? a.residual.row(r) : nullptr;
        char* ps = FUSED ? a.sum.row(r) : nullptr;
        float ss = 0.0f;
        // Unrolled so a thread's loads of a row (3.5 steps for 3584 columns at 256 threads) are in
        // flight together: one step at a time, a 512-row prefill's norm waited ~8 latencies (9 µs
        // for 7 MB on an H200, under one wave of blocks). The sum's order is unchanged.
#pragma unroll 4
        for (int64_t c = int64_t(threadIdx.x) * VEC; c < a.dim; c += step) {
            float v[VEC];
            load_group<VECTOR>(px, a.x.dtype, c, a.dim, v);
            if constexpr (FUSED) {  // s = round(x + residual), stored as residual_out
                float res[VEC];
                load_group<VECTOR>(pr, a.residual.dtype, c, a.dim, res);
#pragma unroll
                for (int j = 0; j < VEC; ++j) v[j] = round_to_dtype(a.sum.dtype, v[j] + res[j]);
                store_group<VECTOR>(ps, a.sum.dtype, c, a.dim, v);
            }
#pragma unroll
            for (int j = 0; j < VEC; ++j) ss += v[j] * v[j];
        }
        ss = block_reduce(ss, scratch, false);  // its barriers also order pass 1's reads before out's writes
        const float inv = 1.0f / sqrtf(ss / float(a.dim) + a.eps);

        const char* pin = FUSED ? ps : px;
        char* po = a.out.row(r);
#pragma unroll 4
        for (int64_t c = int64_t(threadIdx.x) * VEC; c < a.dim; c += step) {
            float v[VEC], w[VEC];
            load_group<VECTOR>(pin, in_dtype, c, a.dim, v);
            load_group<VECTOR>(a.weight, a.weight_dtype, c, a.dim, w);
#pragma unroll
            for (int j = 0; j < VEC; ++j) v[j] = w[j] * round_to_dtype(in_dtype, v[j] * inv);
            store_group<VECTOR>(po, a.out.dtype, c, a.dim, v);
        }
    }
}

template <bool FUSED>
void launch(const NormArgs& a, bool vector, int threads, cudaStream_t stream) {
    const unsigned grid = grid_size(a.rows);
    if (vector)
        launch_dependent(rms_norm_kernel<FUSED, true>, grid, threads, 0, stream, a);
    else
        launch_dependent(rms_norm_kernel<FUSED, false>, grid, threads, 0, stream, a);
    FP_GPU_CHECK_LAUNCH(FUSED ? "add_rms_norm" : "rms_norm");
}

}  // namespace

void rms_norm(const TensorView& out, const TensorView* residual_out, const TensorView& x, const TensorView* residual,
              const TensorView& weight, float eps, void* stream) {
    const bool fused = residual_out != nullptr;
    check_current_device(fused ? "add_rms_norm" : "rms_norm", x.device);
    NormArgs a{};
    a.out = row_view(out);
    a.x = row_view(x);
    a.weight = weight.data;
    a.weight_dtype = weight.dtype;
    a.dim = x.shape[size_t(x.ndim - 1)];
    a.rows = x.numel() / a.dim;
    a.eps = eps;
    bool vector = vec_aligned(out) && vec_aligned(x) && vec_aligned(weight);
    if (fused) {
        a.residual = row_view(*residual);
        a.sum = row_view(*residual_out);
        vector = vector && vec_aligned(*residual) && vec_aligned(*residual_out);
    }
    if (a.rows == 0) return;
    // A few rows (decode): one vector a thread, so a row's latency is one load. Many rows (prefill):
    // at most 256 threads a row, so 8 rows share an SM and their loads overlap; a whole row a block
    // (896 threads for Qwen2.5-7B's 3584) left 2 rows an SM and ran at ~0.7 TB/s on an H200.
    const int threads = threads_for_row(ceil_div(a.dim, VEC), a.rows >= 256 ? 256 : MAX_THREADS);
    if (fused)
        launch<true>(a, vector, threads, as_stream(stream));
    else
        launch<false>(a, vector, threads, as_stream(stream));
}

}  // namespace flashport::gpu
