// argmax on the GPU (flashport/ops.h): one block per row (grid-stride over rows). Each thread scans
// its strided share of the row keeping the first maximum it meets, then the block reduces (value,
// index) pairs, preferring the larger value and, on a tie, the smaller index: torch.argmax's first
// maximum. A NaN or +inf anywhere in the row makes its id -1 (__syncthreads_or over the threads).
//
// Why on the GPU: greedy decoding otherwise copies every sequence's logits to the host (0.3 MB a
// token for Qwen's 152k vocabulary in bf16), converts them and scans them there, while the GPU idles
// (~0.15 ms of a 5 ms Qwen2.5-7B decode round, more per round at batch 8 or 32).
//
// Small batches (rows <= CHUNK_MAX_ROWS, given a workspace): one block per row keeps one SM of an
// H200's 132 busy at batch 1 (42 µs a 152064-entry row). There the row is cut into `blocks`
// contiguous chunks (argmax_chunk_kernel, grid [blocks, rows], ~CHUNK_TARGET blocks in all), each
// writing its (max, first index, bad) to the workspace ([rows, blocks] ChunkMax), and
// argmax_merge_kernel (one block per row) keeps the best of them, ties to the smaller index. Two
// kernels rather than a last-block-finishes counter: the kernel boundary orders the partials, so
// nothing in the caller's workspace has to start at zero or be reset between graph replays.
#include <cmath>

#include "backends/gpu/ops_common.cuh"
#include "backends/gpu/ops_gpu.h"

namespace flashport::gpu {
namespace {

using namespace ops;

constexpr int THREADS = 512;
constexpr int CHUNK_THREADS = 256;
constexpr int CHUNK_MIN = 1024;     // elements per chunk at least (4 per thread)
constexpr int CHUNK_TARGET = 256;   // blocks over all rows: ~2 per SM of an H100/H200 (132 SMs)
constexpr int CHUNK_MAX_ROWS = 64;  // larger batches keep one block per row

struct ChunkMax {
    float value;  // -inf when the chunk is empty
    int index;    // n when it is empty
    int bad;      // a NaN or +inf in the chunk
    int pad;
};

struct ChunkLayout {
    int blocks = 0;  // 0: one block per row
    int chunk = 0;
};
ChunkLayout chunk_layout(int64_t rows, int64_t n) {
    ChunkLayout l;
    if (rows < 1 || rows > CHUNK_MAX_ROWS) return l;
    const int64_t want = std::max<int64_t>(1, std::min(ceil_div(CHUNK_TARGET, rows), ceil_div(n, CHUNK_MIN)));
    l.chunk = int(ceil_div(n, want));
    l.blocks = int(ceil_div(n, l.chunk));
    return l;
}

// Keeps (v, i) if it beats (best, best_i): larger, or equal with a smaller index.
__device__ __forceinline__ void keep_better(float& best, int& best_i, float v, int i) {
    if (v > best || (v == best && i < best_i)) {
        best = v;
        best_i = i;
    }
}

__global__ void __launch_bounds__(THREADS) argmax_kernel(int32_t* ids, RowView x, int64_t rows, int n) {
    __shared__ float s_val[THREADS / WARP_SIZE];
    __shared__ int s_idx[THREADS / WARP_SIZE];
    const int lane = int(threadIdx.x) % WARP_SIZE, warp = int(threadIdx.x) / WARP_SIZE;
    constexpr int WARPS = THREADS / WARP_SIZE;
    wait_for_prior_grid();  // launched dependent (launch_dependent): nothing read before this
    allow_next_grid();
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const char* row = x.row(r);
        float best = -INFINITY;
        int best_i = n;  // past the end: any element beats it, -inf included
        bool bad = false;
        for (int i = int(threadIdx.x); i < n; i += THREADS) {
            const float v = load(row, x.dtype, i);
            bad |= isnan(v) || v == INFINITY;
            keep_better(best, best_i, v, i);
        }
#pragma unroll
        for (int offset = WARP_SIZE / 2; offset > 0; offset /= 2) {
            const float v = FP_SHFL_XOR(static_cast<unsigned>(full_warp_mask()), best, offset, WARP_SIZE);
            const int i = FP_SHFL_XOR(static_cast<unsigned>(full_warp_mask()), best_i, offset, WARP_SIZE);
            keep_better(best, best_i, v, i);
        }
        if (lane == 0) {
            s_val[warp] = best;
            s_idx[warp] = best_i;
        }
        bad = __syncthreads_or(bad);  // also orders the writes above before the reads below
        if (threadIdx.x == 0) {
            for (int w = 1; w < WARPS; ++w) keep_better(best, best_i, s_val[w], s_idx[w]);
            ids[r] = bad ? -1 : best_i;
        }
        __syncthreads();  // s_val / s_idx are reused by the next row
    }
}

// Reduces the threads' (best, best_i) over the block into thread 0's (ties to the smaller index) and
// their bad flags into every thread's; s_val / s_idx hold BLOCK / WARP_SIZE entries.
template <int BLOCK>
__device__ void block_argmax(float& best, int& best_i, bool& bad, float* s_val, int* s_idx) {
    constexpr int WARPS = BLOCK / WARP_SIZE;
    const int lane = int(threadIdx.x) % WARP_SIZE, warp = int(threadIdx.x) / WARP_SIZE;
#pragma unroll
    for (int offset = WARP_SIZE / 2; offset > 0; offset /= 2) {
        const float v = FP_SHFL_XOR(static_cast<unsigned>(full_warp_mask()), best, offset, WARP_SIZE);
        const int i = FP_SHFL_XOR(static_cast<unsigned>(full_warp_mask()), best_i, offset, WARP_SIZE);
        keep_better(best, best_i, v, i);
    }
    if (lane == 0) {
        s_val[warp] = best;
        s_idx[warp] = best_i;
    }
    bad = __syncthreads_or(bad);
    if (threadIdx.x == 0)
        for (int w = 1; w < WARPS; ++w) keep_better(best, best_i, s_val[w], s_idx[w]);
}

// Block (c, r): ids [c · chunk, min((c + 1) · chunk, n)) of row r into part[r · blocks + c].
__global__ void __launch_bounds__(CHUNK_THREADS)
    argmax_chunk_kernel(ChunkMax* part, RowView x, int n, int chunk, int blocks) {
    __shared__ float s_val[CHUNK_THREADS / WARP_SIZE];
    __shared__ int s_idx[CHUNK_THREADS / WARP_SIZE];
    const int64_t r = blockIdx.y;
    const int64_t beg = int64_t(blockIdx.x) * chunk, end = min(beg + chunk, int64_t(n));
    wait_for_prior_grid();  // launched dependent: nothing read before this
    allow_next_grid();
    const char* row = x.row(r);
    float best = -INFINITY;
    int best_i = n;
    bool bad = false;
    for (int64_t i = beg + threadIdx.x; i < end; i += CHUNK_THREADS) {
        const float v = load(row, x.dtype, i);
        bad |= isnan(v) || v == INFINITY;
        keep_better(best, best_i, v, int(i));
    }
    block_argmax<CHUNK_THREADS>(best, best_i, bad, s_val, s_idx);
    if (threadIdx.x == 0) part[r * blocks + blockIdx.x] = ChunkMax{best, best_i, bad ? 1 : 0, 0};
}

// Block r: the best of row r's `blocks` partials (blocks <= CHUNK_TARGET).
__global__ void __launch_bounds__(CHUNK_THREADS)
    argmax_merge_kernel(int32_t* ids, const ChunkMax* part, int n, int blocks) {
    __shared__ float s_val[CHUNK_THREADS / WARP_SIZE];
    __shared__ int s_idx[CHUNK_THREADS / WARP_SIZE];
    const int64_t r = blockIdx.x;
    wait_for_prior_grid();  // the chunks' partials
    allow_next_grid();
    float best = -INFINITY;
    int best_i = n;
    bool bad = false;
    for (int c = int(threadIdx.x); c < blocks; c += CHUNK_THREADS) {
        const ChunkMax q = part[r * blocks + c];
        bad |= q.bad != 0;
        keep_better(best, best_i, q.value, q.index);
    }
    block_argmax<CHUNK_THREADS>(best, best_i, bad, s_val, s_idx);
    if (threadIdx.x == 0) ids[r] = bad ? -1 : best_i;
}

}  // namespace

size_t argmax_workspace_bytes(int64_t rows, int64_t n) {
    const ChunkLayout l = chunk_layout(rows, n);
    return size_t(rows) * size_t(l.blocks) * sizeof(ChunkMax);
}

void argmax(int32_t* ids, const TensorView& x, void* workspace, size_t workspace_bytes, void* stream) {
    check_current_device("argmax", x.device);
    const int64_t rows = x.dim(0), n = x.dim(1);
    if (rows == 0) return;
    const ChunkLayout l = chunk_layout(rows, n);
    if (l.blocks == 0 || !workspace || workspace_bytes < argmax_workspace_bytes(rows, n)) {
        gpu::argmax(ids, x, stream);  // qualified: ADL would also find flashport::argmax
        return;
    }
    ChunkMax* part = static_cast<ChunkMax*>(workspace);
    launch_dependent(argmax_chunk_kernel, dim3(unsigned(l.blocks), unsigned(rows)), CHUNK_THREADS, 0,
                     as_stream(stream), part, row_view(x), int(n), l.chunk, l.blocks);
    FP_GPU_CHECK_LAUNCH("argmax (chunks)");
    launch_dependent(argmax_merge_kernel, unsigned(rows), CHUNK_THREADS, 0, as_stream(stream), ids,
                     static_cast<const ChunkMax*>(part), int(n), l.blocks);
    FP_GPU_CHECK_LAUNCH("argmax (merge)");
}

void argmax(int32_t* ids, const TensorView& x, void* stream) {
    check_current_device("argmax", x.device);
    const int64_t rows = x.dim(0);
    if (rows == 0) return;
    launch_dependent(argmax_kernel, grid_size(rows), THREADS, 0, as_stream(stream), ids, row_view(x), rows, int(x.dim(1)));
    FP_GPU_CHECK_LAUNCH("argmax");
}

}  // namespace flashport::gpu
