// matmul for decode-sized token counts on the GPU: out[t, n] = round(Σ_k x[t, k] · w[n, k] + bias[n])
// for up to GEMV_MAX_TOKENS tokens, fp32 accumulation, one rounding (the CPU kernels' epilogue, so a
// bias costs nothing extra and needs no staging buffer).
//
// Why not the BLAS: with few tokens the product is a stream of the weight (2 bytes per multiply-add
// per token row), and what matters is bytes in flight, not math. Each block of 4 warps owns
// GEMV_ROWS weight rows and walks them in 16-byte vectors (8 elements per thread, the block's threads
// side by side along k), converting each vector to fp32 once and using it for every token; x rows
// are re-read from L1/L2. Each thread requests 4 steps' vectors before using any. Warp reductions
// and one pass through shared memory give each (token, row) sum.
//
// Measured (H200, Qwen2.5-7B shapes, docs/perf.md): v1 gave each warp its own rows, which left
// q/o (3584 rows) at ~1.4 TB/s and k/v (512 rows) latency-bound with 256 warps on 132 SMs; sharing
// rows across a block's warps quadruples the warps for the same rows. At 8 tokens the x re-reads
// made it slower than cuBLAS (551 vs 652 tok/s), so AUTO takes it for one token only.
//
// Portable: no inline PTX, warp width from common.cuh, so the HIP build compiles the same kernel.
// Requirements (gemv_ineligible_reason): x and weight fp16 or bf16 (one dtype), in a multiple of 8,
// x and weight rows 16-byte aligned.
#include "backends/gpu/ops_common.cuh"
#include "backends/gpu/ops_gpu.h"

namespace flashport::gpu {
namespace {

using namespace ops;

constexpr int GEMV_WARPS = 4;
constexpr int GEMV_THREADS = GEMV_WARPS * WARP_SIZE;
constexpr int GEMV_ROWS = 2;  // weight rows per warp: two independent streams per lane
constexpr int CHUNK = 8;      // elements per 16-byte vector

struct GemvArgs {
    void* out;
    DType out_dtype;
    int64_t ldo;
    const uint16_t* x;
    int64_t ldx;
    const uint16_t* w;
    int64_t ldw;
    const void* bias;  // null: none
    DType bias_dtype;
    int64_t n_out, in;
};

template <DType DT, int T>
__global__ void __launch_bounds__(GEMV_THREADS) gemv_kernel(const GemvArgs a) {
    const int lane = int(threadIdx.x) % WARP_SIZE, warp = int(threadIdx.x) / WARP_SIZE;
    const int64_t n0 = int64_t(blockIdx.x) * GEMV_ROWS;
    const uint16_t* wrow[GEMV_ROWS];
#pragma unroll
    for (int r = 0; r < GEMV_ROWS; ++r)  // a past-the-end row re-reads the last
        wrow[r] = a.w + min(n0 + r, a.n_out - 1) * a.ldw;

    // The block's threads interleave along k (thread i takes chunks i, i + GEMV_THREADS, ...), so each
    // row is read by the whole block in coalesced 16-byte vectors. UNROLL steps per round: all their
    // weight vectors are requested before any is used, UNROLL · GEMV_ROWS loads in flight per thread.
    constexpr int UNROLL = 4;
    constexpr int64_t STEP = int64_t(GEMV_THREADS) * CHUNK;
    float acc[T][GEMV_ROWS] = {};
    for (int64_t k0 = int64_t(threadIdx.x) * CHUNK; k0 < a.in; k0 += UNROLL * STEP) {
        uint4 wv[UNROLL][GEMV_ROWS];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
#pragma unroll
            for (int r = 0; r < GEMV_ROWS; ++r)
                wv[u][r] = k0 + u * STEP < a.in ? __ldg(reinterpret_cast<const uint4*>(wrow[r] + k0 + u * STEP))
                                                : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const int64_t k = k0 + u * STEP;
            if (k >= a.in) break;
            float wf[GEMV_ROWS][CHUNK];
#pragma unroll
            for (int r = 0; r < GEMV_ROWS; ++r) unpack8<DT>(wv[u][r], wf[r]);
#pragma unroll
            for (int t = 0; t < T; ++t) {
                float xf[CHUNK];
                unpack8<DT>(__ldg(reinterpret_cast<const uint4*>(a.x + t * a.ldx + k)), xf);
#pragma unroll
                for (int r = 0; r < GEMV_ROWS; ++r)
#pragma unroll
                    for (int i = 0; i < CHUNK; ++i) acc[t][r] = fmaf(xf[i], wf[r][i], acc[t][r]);
            }
        }
    }
    // Each warp's partial sums, then the block's: T · GEMV_ROWS values per warp through shared memory.
    __shared__ float partial[GEMV_WARPS][T][GEMV_ROWS];
#pragma unroll
    for (int t = 0; t < T; ++t)
#pragma unroll
        for (int r = 0; r < GEMV_ROWS; ++r) {
            const float sum = group_sum<WARP_SIZE>(acc[t][r]);
            if (lane == 0) partial[warp][t][r] = sum;
        }
    __syncthreads();
    if (int(threadIdx.x) < T * GEMV_ROWS) {
        const int t = int(threadIdx.x) / GEMV_ROWS, r = int(threadIdx.x) % GEMV_ROWS;
        const int64_t n = n0 + r;
        if (n < a.n_out) {
            float sum = 0.0f;
#pragma unroll
            for (int w = 0; w < GEMV_WARPS; ++w) sum += partial[w][t][r];
            const float b = a.bias ? load(a.bias, a.bias_dtype, n) : 0.0f;
            store(static_cast<char*>(a.out) + t * a.ldo * (a.out_dtype == DType::F32 ? 4 : 2), a.out_dtype, n, sum + b);
        }
    }
}

template <DType DT>
void launch_gemv(const GemvArgs& a, int64_t tokens, cudaStream_t stream) {
    const unsigned grid = unsigned(ceil_div(a.n_out, GEMV_ROWS));
    switch (tokens) {
#define FP_GEMV_CASE(T) \
    case T: gemv_kernel<DT, T><<<grid, GEMV_THREADS, 0, stream>>>(a); break;
        FP_GEMV_CASE(1)
        FP_GEMV_CASE(2)
        FP_GEMV_CASE(3)
        FP_GEMV_CASE(4)
        FP_GEMV_CASE(5)
        FP_GEMV_CASE(6)
        FP_GEMV_CASE(7)
        FP_GEMV_CASE(8)
#undef FP_GEMV_CASE
        default: fail("gemv on GPU: ", tokens, " tokens (at most ", GEMV_MAX_TOKENS, ")");
    }
    FP_GPU_CHECK_LAUNCH("gemv_kernel");
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

std::string gemv_ineligible_reason(const TensorView& x, const TensorView& weight) {
    const int64_t tokens = x.dim(0), in = x.dim(1);
    if (tokens < 1 || tokens > GEMV_MAX_TOKENS)
        return "it takes 1 to " + std::to_string(GEMV_MAX_TOKENS) + " tokens, got " + std::to_string(tokens);
    if (x.dtype == DType::F32) return "it takes fp16 or bf16 inputs, got fp32";
    if (in == 0 || in % CHUNK != 0) return "in (" + std::to_string(in) + ") must be a positive multiple of 8";
    if (!aligned16(x.data) || !aligned16(weight.data)) return "x and weight must start on 16-byte boundaries";
    if ((tokens > 1 && x.stride[0] % CHUNK != 0) || (weight.dim(0) > 1 && weight.stride[0] % CHUNK != 0))
        return "x's and weight's row strides must be multiples of 8 elements";
    if (ceil_div(weight.dim(0), GEMV_ROWS) > 0x7fffffff)
        return "too many weight rows";
    return {};
}

void gemv(const TensorView& out, const TensorView& x, const TensorView& weight, const TensorView* bias, void* stream) {
    GemvArgs a{};
    a.out = out.data;
    a.out_dtype = out.dtype;
    a.ldo = out.stride[0];
    a.x = static_cast<const uint16_t*>(x.data);
    a.ldx = x.stride[0];
    a.w = static_cast<const uint16_t*>(weight.data);
    a.ldw = weight.stride[0];
    a.bias = bias ? bias->data : nullptr;
    a.bias_dtype = bias ? bias->dtype : DType::F32;
    a.n_out = weight.dim(0);
    a.in = x.dim(1);
    if (a.n_out == 0) return;
    if (x.dtype == DType::F16)
        launch_gemv<DType::F16>(a, x.dim(0), as_stream(stream));
    else
        launch_gemv<DType::BF16>(a, x.dim(0), as_stream(stream));
}

}  // namespace flashport::gpu
