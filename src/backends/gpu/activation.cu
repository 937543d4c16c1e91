// Elementwise ops on the GPU, with the CPU kernels' rounding points (backends/cpu/activation.cpp):
//   swiglu: out = round_out(round_gate(silu(g)) · u),  silu(g) = g / (1 + exp(-g)) in fp32
//   add:    out = round_out(a + b)
// Layout: three views of one shape, unit inner stride. Dimensions that all three store contiguously
// are merged first (ops_common.cuh), so a contiguous tensor is one long row and a sliced one keeps
// its rows; the grid covers columns in x and rows in y, both grid-stride.
// Variants: 4-wide vector access when every view is aligned for it, else one element per step.
//
// For fp32 gates exp is evaluated in double and rounded to fp32: the correctly rounded expf, which is
// what the CPU's glibc expf returns (it too works in double), so silu matches the CPU bit for bit.
// For 16-bit gates the GPU's fp32 expf: silu is rounded to 16 bits next, so the two agree except at
// a rounding boundary, and the kernel stays bandwidth-bound (silu_times in ops_common.cuh).
#include "backends/gpu/ops_common.cuh"
#include "backends/gpu/ops_gpu.h"

namespace flashport::gpu {
namespace {

using namespace ops;

constexpr int THREADS = 256;

struct SwigluOp {
    DType gate_dtype;
    __device__ __forceinline__ float operator()(float g, float u) const { return silu_times(gate_dtype, g, u); }
};

struct AddOp {
    __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};

template <bool VECTOR, typename Op>
__global__ void __launch_bounds__(THREADS) binary_kernel(RowView out, RowView a, RowView b, int64_t rows, int64_t cols,
                                                         Op op) {
    constexpr int W = VECTOR ? VEC : 1;
    const int64_t col_step = int64_t(gridDim.x) * THREADS * W;
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const char* pa = a.row(r);
        const char* pb = b.row(r);
        char* po = out.row(r);
        for (int64_t c = (int64_t(blockIdx.x) * THREADS + threadIdx.x) * W; c < cols; c += col_step) {
            if constexpr (VECTOR) {
                float va[VEC], vb[VEC];
                load_vec(pa, a.dtype, c, va);
                load_vec(pb, b.dtype, c, vb);
#pragma unroll
                for (int j = 0; j < VEC; ++j) va[j] = op(va[j], vb[j]);
                store_vec(po, out.dtype, c, va);
            } else {
                store(po, out.dtype, c, op(load(pa, a.dtype, c), load(pb, b.dtype, c)));
            }
        }
    }
}

template <typename Op>
void launch_binary(const char* name, const TensorView& out, const TensorView& a, const TensorView& b, Op op,
                   void* stream) {
    check_current_device(name, a.device);
    TensorView o = out, x = a, y = b;
    merge_contiguous_dims({&o, &x, &y});
    const int64_t cols = x.shape[size_t(x.ndim - 1)], rows = o.numel() / std::max<int64_t>(cols, 1);
    if (rows == 0 || cols == 0) return;
    const bool vector = vec_aligned(o) && vec_aligned(x) && vec_aligned(y);
    const int64_t per_block = THREADS * (vector ? VEC : 1);
    const dim3 grid(grid_size(ceil_div(cols, per_block)), grid_size(rows));
    const RowView ro = row_view(o), ra = row_view(x), rb = row_view(y);
    if (vector)
        launch_kernel(binary_kernel<true, Op>, grid, THREADS, 0, as_stream(stream), ro, ra, rb, rows, cols, op);
    else
        launch_kernel(binary_kernel<false, Op>, grid, THREADS, 0, as_stream(stream), ro, ra, rb, rows, cols, op);
    FP_GPU_CHECK_LAUNCH(name);
}

}  // namespace

void swiglu(const TensorView& out, const TensorView& gate, const TensorView& up, void* stream) {
    launch_binary("swiglu", out, gate, up, SwigluOp{gate.dtype}, stream);
}

void add(const TensorView& out, const TensorView& a, const TensorView& b, void* stream) {
    launch_binary("add", out, a, b, AddOp{}, stream);
}

}  // namespace flashport::gpu
