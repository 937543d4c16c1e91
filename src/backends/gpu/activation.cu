// Elementwise ops on the GPU, with the CPU kernels' rounding points (backends/cpu/activation.cpp):
//   swiglu: out = round_out(round_gate(silu(g)) · u),  silu(g) = g / (1 + exp(-g)) in fp32
//   add:    out = round_out(a + b)
// Layout: three views of one shape, unit inner stride. Dimensions that all three store contiguously
// are merged first (ops_common.cuh), so a contiguous tensor is one long row and a sliced one keeps
// its rows; the grid covers columns in x and rows in y, both grid-stride.
// Variants: 8-wide (16-byte) access when every view is 16-bit and aligned for it, 4-wide when aligned
// for that, else one element per step.
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

// W elements a thread per step: 8 (16-byte accesses of 16-bit data), 4 or 1, by the views' alignment.
template <int W, typename Op>
__global__ void __launch_bounds__(THREADS) binary_kernel(RowView out, RowView a, RowView b, int64_t rows, int64_t cols,
                                                         Op op) {
    const int64_t col_step = int64_t(gridDim.x) * THREADS * W;
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const char* pa = a.row(r);
        const char* pb = b.row(r);
        char* po = out.row(r);
        for (int64_t c = (int64_t(blockIdx.x) * THREADS + threadIdx.x) * W; c < cols; c += col_step) {
            if constexpr (W > 1) {
                float va[W], vb[W];
                load_vec(pa, a.dtype, c, va);
                load_vec(pb, b.dtype, c, vb);
#pragma unroll
                for (int j = 0; j < W; ++j) va[j] = op(va[j], vb[j]);
                store_vec(po, out.dtype, c, va);
            } else {
                store(po, out.dtype, c, op(load(pa, a.dtype, c), load(pb, b.dtype, c)));
            }
        }
    }
}

template <int W, typename Op>
void launch_binary_w(const TensorView& o, const TensorView& x, const TensorView& y, int64_t rows, int64_t cols, Op op,
                     void* stream) {
    const dim3 grid(grid_size(ceil_div(cols, int64_t(THREADS) * W)), grid_size(rows));
    launch_kernel(binary_kernel<W, Op>, grid, THREADS, 0, as_stream(stream), row_view(o), row_view(x), row_view(y),
                  rows, cols, op);
}

template <typename Op>
void launch_binary(const char* name, const TensorView& out, const TensorView& a, const TensorView& b, Op op,
                   void* stream) {
    check_current_device(name, a.device);
    TensorView o = out, x = a, y = b;
    merge_contiguous_dims({&o, &x, &y});
    const int64_t cols = x.shape[size_t(x.ndim - 1)], rows = o.numel() / std::max<int64_t>(cols, 1);
    if (rows == 0 || cols == 0) return;
    // 8 a step where every view is 16-bit (4 fp32 elements already fill a 16-byte access).
    const bool halves = dtype_size(o.dtype) == 2 && dtype_size(x.dtype) == 2 && dtype_size(y.dtype) == 2;
    if (halves && vec_aligned(o, 8) && vec_aligned(x, 8) && vec_aligned(y, 8))
        launch_binary_w<8>(o, x, y, rows, cols, op, stream);
    else if (vec_aligned(o) && vec_aligned(x) && vec_aligned(y))
        launch_binary_w<VEC>(o, x, y, rows, cols, op, stream);
    else
        launch_binary_w<1>(o, x, y, rows, cols, op, stream);
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
