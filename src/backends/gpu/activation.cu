// Elementwise ops on the GPU, with the CPU kernels' rounding points (backends/cpu/activation.cpp):
//   swiglu: out = round_out(round_gate(silu(g)) · u),  silu(g) = g / (1 + exp(-g)) in fp32
//   add:    out = round_out(a + b)
// Layout: three views of one shape, unit inner stride. Dimensions that all three store contiguously
// are merged first (ops_common.cuh), so a contiguous tensor is one long row and a sliced one keeps
// its rows; the grid covers columns in x and rows in y, both grid-stride.
// Variants: four 16-byte vectors of each input a thread when every view is 16-bit and aligned for it,
// else 4-wide access when aligned for that, else one element per step.
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

constexpr int THREADS = 256;         // the generic kernel
constexpr int HALVES_THREADS = 128;  // the 16-bit kernel: four vectors a thread

struct SwigluOp {
    DType gate_dtype;
    __device__ __forceinline__ float operator()(float g, float u) const { return silu_times(gate_dtype, g, u); }
};

struct AddOp {
    __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};

// W elements a thread per step: 4 (16-byte fp32 or 8-byte 16-bit accesses) or 1, by the views'
// alignment; views that are all 16-bit and 16-byte aligned take binary_halves_kernel below.
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

// Every view 16-bit and 16-byte aligned (a prefill's SwiGLU and residual adds): UNROLL 16-byte vectors of
// each input a thread per step, all requested before the first is unpacked. The GPU issues in order, so
// a thread that converts a vector as soon as it is loaded (load_vec) waits for it before requesting
// the next; one vector of each input in flight per thread ran SwiGLU over a [2048, 18944] half of the
// gate_up product at 2.1 TB/s on the H200, where PyTorch's four-vector kernels reach 3.7-4.4 TB/s.
constexpr int UNROLL = 4;

template <typename Op>
__global__ void __launch_bounds__(HALVES_THREADS)
    binary_halves_kernel(RowView out, RowView a, RowView b, int64_t rows, int64_t cols, Op op) {
    constexpr int64_t TILE = int64_t(HALVES_THREADS) * 8 * UNROLL;  // columns a block covers per step
    const int64_t col_step = int64_t(gridDim.x) * TILE;
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const uint4* pa = reinterpret_cast<const uint4*>(a.row(r));
        const uint4* pb = reinterpret_cast<const uint4*>(b.row(r));
        char* po = out.row(r);
        for (int64_t c0 = int64_t(blockIdx.x) * TILE + int64_t(threadIdx.x) * 8; c0 < cols; c0 += col_step) {
            uint4 ra[UNROLL], rb[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                const int64_t c = c0 + int64_t(u) * HALVES_THREADS * 8;
                if (c < cols) ra[u] = pa[c / 8], rb[u] = pb[c / 8];
            }
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                const int64_t c = c0 + int64_t(u) * HALVES_THREADS * 8;
                if (c >= cols) continue;
                const uint32_t wa[4] = {ra[u].x, ra[u].y, ra[u].z, ra[u].w},
                               wb[4] = {rb[u].x, rb[u].y, rb[u].z, rb[u].w};
                float va[8], vb[8];
                unpack_halves(wa, a.dtype, va);
                unpack_halves(wb, b.dtype, vb);
#pragma unroll
                for (int j = 0; j < 8; ++j) va[j] = op(va[j], vb[j]);
                store_vec(po, out.dtype, c, va);
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
void launch_binary_halves(const TensorView& o, const TensorView& x, const TensorView& y, int64_t rows, int64_t cols,
                          Op op, void* stream) {
    const dim3 grid(grid_size(ceil_div(cols, int64_t(HALVES_THREADS) * 8 * UNROLL)), grid_size(rows));
    launch_kernel(binary_halves_kernel<Op>, grid, HALVES_THREADS, 0, as_stream(stream), row_view(o), row_view(x),
                  row_view(y), rows, cols, op);
}

template <typename Op>
void launch_binary(const char* name, const TensorView& out, const TensorView& a, const TensorView& b, Op op,
                   void* stream) {
    check_current_device(name, a.device);
    TensorView o = out, x = a, y = b;
    merge_contiguous_dims({&o, &x, &y});
    const int64_t cols = x.shape[size_t(x.ndim - 1)], rows = o.numel() / std::max<int64_t>(cols, 1);
    if (rows == 0 || cols == 0) return;
    // 16-byte vectors of 8 where every view is 16-bit (4 fp32 elements already fill a 16-byte access).
    const bool halves = dtype_size(o.dtype) == 2 && dtype_size(x.dtype) == 2 && dtype_size(y.dtype) == 2;
    if (halves && vec_aligned(o, 8) && vec_aligned(x, 8) && vec_aligned(y, 8))
        launch_binary_halves(o, x, y, rows, cols, op, stream);
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
