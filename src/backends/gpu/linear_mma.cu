// linear's matrix-core GEMV on NVIDIA tensor cores (sm_80+): linear_tc.cuh's kernel with mma.sync
// m16n8k16 fragments, "gpu.linear.gemv.mma". CUDA only; AMD's sibling is linear_mfma.cu.
//
// Fragments (mma_sync.cuh's layouts, g = lane / 4, c = lane % 4): the lane loads weight rows g and g + 8
// and token g of each 8-token tile, 8 elements from k offset 8c of the 32-k step. The instruction's k
// order 2c, 2c + 1, 2c + 8, 2c + 9 then maps to the vector's elements 0-3 (its .x and .y words) in the
// first mma and 4-7 (.z, .w) in the second, the same for A (weight) and B (x): A = {w_g.x, w_g8.x,
// w_g.y, w_g8.y}, B = {x.x, x.y}. C's rows are weight rows and its columns tokens.
#include "backends/gpu/linear_tc.cuh"
#include "backends/gpu/mma_sync.cuh"

namespace flashport::gpu {
namespace {

struct MmaFrag {
    static constexpr int LANES = 32, W_VECS = 2, TOK_TILE = 8, ACC = 4;
    struct acc_t {
        float v[4];
        __device__ __forceinline__ float operator[](int i) const { return v[i]; }
    };
    __device__ static int w_row(int lane, int v) { return lane / 4 + 8 * v; }
    __device__ static int k_off(int lane) { return 8 * (lane % 4); }
    __device__ static int x_tok(int lane) { return lane / 4; }
    __device__ static int acc_row(int lane, int i) { return lane / 4 + 8 * (i / 2); }
    __device__ static int acc_tok(int lane, int i) { return 2 * (lane % 4) + i % 2; }
    template <DType DT>
    __device__ __forceinline__ static void mma(acc_t& acc, const uint4 (&w)[2], const uint4& x) {
        static_assert(LANES == WARP_SIZE, "mma.sync fragments span a 32-lane warp");
        const uint32_t lo[4] = {w[0].x, w[1].x, w[0].y, w[1].y}, hi[4] = {w[0].z, w[1].z, w[0].w, w[1].w};
        nvidia_only::mma_16816<DT>(acc.v, lo, x.x, x.y);
        nvidia_only::mma_16816<DT>(acc.v, hi, x.z, x.w);
    }
};

}  // namespace

namespace nvidia_only {
template <DType DT, int NT, Epilogue EPI>
__global__ void __launch_bounds__(TC_THREADS) linear_gemv_mma_kernel(const GemvArgs a, const int tokens,
                                                                      const TcSplit sp) {
    linear_gemv_tc<DT, MmaFrag, NT, EPI>(a, tokens, sp);
}
}  // namespace nvidia_only

namespace {
struct MmaKernels {
    using Frag = MmaFrag;
    template <DType DT, int NT, Epilogue EPI>
    static auto get() {
        return nvidia_only::linear_gemv_mma_kernel<DT, NT, EPI>;
    }
};
}  // namespace

void gemv_mma(const GemvArgs& a, DType dtype, int64_t tokens, Epilogue epi, cudaStream_t stream) {
    run_gemv_tc<MmaKernels>(a, dtype, tokens, epi, stream, "linear_gemv_mma_kernel");
}

}  // namespace flashport::gpu
