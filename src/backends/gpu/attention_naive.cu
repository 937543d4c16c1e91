// GPU naive attention: the seeds' default path, kept as the baseline that flash is compared against.
//
//   S = scale * Q K^T      BLAS GEMM into a fp32 [batch, n_heads, q_len, kv_len] workspace
//   P = softmax(mask(S))   naive_masked_softmax_kernel, one block per row, also writes the LSE; P is
//                          rounded to the input dtype and written over the start of its own S row
//   O = P V                BLAS GEMM straight into `out` through its strides
//
// S stays fp32 so the LSE is that of fp32 scores, as on the CPU; P and O are rounded to the input
// dtype, as PyTorch's math path does, which is the error model of the tests' tolerance. GQA: query
// heads sharing a KV head become one strided batch with the K/V batch stride 0. Needs head_dim
// contiguous (stride 1), which BLAS requires.
#include "backends/gpu/attention_common.cuh"
#include "backends/gpu/attention_gpu.h"
#include "backends/gpu/blas.h"
#include "backends/gpu/runtime.h"

namespace flashport::gpu {
namespace {

constexpr int SOFTMAX_THREADS = 256;

// One block per row (b, h, i) of S: masks keys outside the visible range, normalises in fp32 and
// writes P (input dtype) over the first bytes of the same row, so P has leading dimension
// kv_len * 4 / sizeof(T). A row that sees no key becomes zeros, and its LSE -inf.
template <DType DT>
__global__ void __launch_bounds__(SOFTMAX_THREADS)
    naive_masked_softmax_kernel(float* __restrict__ s, AttentionArgs args) {
    __shared__ float scratch[SOFTMAX_THREADS / WARP_SIZE];  // one partial per warp
    const int64_t row = blockIdx.x;
    const int64_t i = row % args.q_len, bh = row / args.q_len;
    const int64_t h = bh % args.n_heads, b = bh / args.n_heads;
    float* srow = s + row * int64_t(args.kv_len);
    storage_t<DT>* prow = reinterpret_cast<storage_t<DT>*>(srow);
    const DeviceKeyRange keys = device_visible_keys(i, args.q_len, args.kv_len, args.causal, args.window_left);

    float m = -INFINITY;
    for (int64_t j = keys.lo + threadIdx.x; j < keys.hi; j += blockDim.x) m = fmaxf(m, srow[j]);
    m = block_reduce(m, scratch, true);
    float l = 0.0f;
    for (int64_t j = keys.lo + threadIdx.x; j < keys.hi; j += blockDim.x) l += __expf(srow[j] - m);
    l = block_reduce(l, scratch, false);
    const float inv_l = softmax_inv_sum(l);  // a NaN score: l, and so the row, is NaN
    // P[j] overlaps S[j * sizeof(T) / 4]: in each chunk every thread reads before any writes, and a
    // chunk's writes only reach S entries of this or earlier chunks, which are already read.
    for (int64_t j0 = 0; j0 < args.kv_len; j0 += blockDim.x) {
        const int64_t j = j0 + threadIdx.x;
        const bool in_row = j < args.kv_len;
        const float x = in_row ? srow[j] : 0.0f;
        __syncthreads();
        if (in_row) prow[j] = from_float<DT>(j >= keys.lo && j < keys.hi ? __expf(x - m) * inv_l : 0.0f);
        __syncthreads();
    }
    if (args.lse && threadIdx.x == 0)
        args.lse[b * args.lse_stride[0] + h * args.lse_stride[1] + i * args.lse_stride[2]] =
            l == 0.0f ? -INFINITY : m + logf(l);
}

// out = 0 for every row: kv_len == 0, where the GEMM would have nothing to sum.
template <DType DT>
__global__ void naive_zero_rows_kernel(storage_t<DT>* __restrict__ out, AttentionArgs args, int head_dim) {
    const int64_t row = blockIdx.x;  // over (b, i, h)
    const int64_t h = row % args.n_heads, bi = row / args.n_heads;
    const int64_t i = bi % args.q_len, b = bi / args.q_len;
    for (int d = int(threadIdx.x); d < head_dim; d += int(blockDim.x))
        out[b * args.o_stride[0] + i * args.o_stride[1] + h * args.o_stride[2] + d] = from_float<DT>(0.0f);
    if (args.lse && threadIdx.x == 0)
        args.lse[b * args.lse_stride[0] + h * args.lse_stride[1] + i * args.lse_stride[2]] = -INFINITY;
}

}  // namespace

size_t naive_workspace_bytes(const AttentionPlan& plan, DType dtype) {
    const AttentionShape& s = plan.shape;
    (void)dtype;  // scores are fp32 whatever the inputs
    return size_t(s.batch) * size_t(s.n_heads) * size_t(s.q_len) * size_t(s.kv_len) * sizeof(float);
}

void attention_naive(const TensorView& out, const AttentionArgs& args, int64_t head_dim, void* workspace,
                     void* stream) {
    const cudaStream_t st = as_stream(stream);
    const int64_t rows = int64_t(args.batch) * args.n_heads * args.q_len;
    if (rows == 0) return;
    FP_CHECK(rows <= int64_t(INT32_MAX), "naive attention: batch * n_heads * q_len = ", rows, " exceeds 2^31 - 1");
    dispatch_dtype(out.dtype, [&]<DType DT>() {
        using T = storage_t<DT>;
        if (args.kv_len == 0) {
            launch_kernel(naive_zero_rows_kernel<DT>, unsigned(rows), 64, 0, st, static_cast<T*>(out.data), args,
                          int(head_dim));
            FP_GPU_CHECK_LAUNCH("naive_zero_rows_kernel");
            return;
        }
        FP_CHECK(workspace != nullptr, "naive attention: the score workspace is null");
        float* s = static_cast<float*>(workspace);
        const int64_t group = args.n_heads / args.n_kv_heads;
        const int64_t s_head = int64_t(args.q_len) * args.kv_len;  // elements per (b, h) score matrix
        // Query heads that share a KV head form one strided batch; with group == 1 all heads do.
        const int64_t calls_per_batch = group == 1 ? 1 : args.n_kv_heads;
        const int64_t heads_per_call = group == 1 ? args.n_heads : group;
        for (int64_t b = 0; b < args.batch; ++b)
            for (int64_t c = 0; c < calls_per_batch; ++c) {
                const int64_t h0 = c * heads_per_call, kvh = h0 / group;
                const T* qp = static_cast<const T*>(args.q) + b * args.q_stride[0] + h0 * args.q_stride[2];
                const T* kp = static_cast<const T*>(args.k) + b * args.k_stride[0] + kvh * args.k_stride[2];
                float* sp = s + (b * args.n_heads + h0) * s_head;
                blas::gemm(sp, args.kv_len, s_head, DType::F32, DT, args.q_len, args.kv_len, head_dim, args.scale, 0.0f,
                           {qp, args.q_stride[1], args.q_stride[2], false},
                           {kp, args.k_stride[1], group == 1 ? args.k_stride[2] : 0, true}, heads_per_call, stream);
            }
        launch_kernel(naive_masked_softmax_kernel<DT>, unsigned(rows), SOFTMAX_THREADS, 0, st, s, args);
        FP_GPU_CHECK_LAUNCH("naive_masked_softmax_kernel");
        for (int64_t b = 0; b < args.batch; ++b)
            for (int64_t c = 0; c < calls_per_batch; ++c) {
                const int64_t h0 = c * heads_per_call, kvh = h0 / group;
                const T* vp = static_cast<const T*>(args.v) + b * args.v_stride[0] + kvh * args.v_stride[2];
                T* op = static_cast<T*>(out.data) + b * args.o_stride[0] + h0 * args.o_stride[2];
                // P sits over S with its rows kv_len * 4 bytes apart.
                const T* pp = reinterpret_cast<const T*>(s + (b * args.n_heads + h0) * s_head);
                const int64_t ld_p = args.kv_len * int64_t(sizeof(float) / sizeof(T));
                blas::gemm(op, args.o_stride[1], args.o_stride[2], DT, DT, args.q_len, head_dim, args.kv_len, 1.0f, 0.0f,
                           {pp, ld_p, s_head * int64_t(sizeof(float) / sizeof(T)), false},
                           {vp, args.v_stride[1], group == 1 ? args.v_stride[2] : 0, false}, heads_per_call, stream);
            }
    });
}

}  // namespace flashport::gpu
