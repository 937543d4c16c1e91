// linear's matrix-core GEMV on AMD matrix cores (gfx908 fp16; gfx90a/94x fp16 and bf16): linear_tc.cuh's
// kernel with 16x16x16 MFMA fragments, "gpu.linear.gemv.mfma". AMD only; NVIDIA's sibling is
// linear_mma.cu. No AMD GPU was available: it has run only under the HIP CPU Runtime's MFMA emulation
// (vendor/hip_cpu_mfma.h), at wave64; nothing here claims AMD speed.
//
// Fragments (mfma.cuh's layouts, i = lane % 16, j = lane / 16): the lane loads weight row i and token i
// of each 16-token tile, 8 elements from k offset 8j of the 32-k step. The instruction's k = 4j + e
// then maps to the vector's element e (its .x and .y words) in the first MFMA and e + 4 (.z, .w) in the
// second, the same for A (weight) and B (x). D holds rows 4j .. 4j + 3 (weight rows) of column i
// (token i).
#include "backends/gpu/linear_tc.cuh"
#include "backends/gpu/mfma.cuh"

namespace flashport::gpu {
namespace {

struct MfmaFrag {
    static constexpr int LANES = 64, W_VECS = 1, TOK_TILE = 16, ACC = 4;
    using acc_t = fp_f32x4;
    __device__ static int w_row(int lane, int) { return lane % 16; }
    __device__ static int k_off(int lane) { return 8 * (lane / 16); }
    __device__ static int x_tok(int lane) { return lane % 16; }
    __device__ static int acc_row(int lane, int i) { return 4 * (lane / 16) + i; }
    __device__ static int acc_tok(int lane, int) { return lane % 16; }

    // Four 16-bit values from two words, element 0 the low half of the first.
    __device__ __forceinline__ static fp_i16x4 four(uint32_t lo, uint32_t hi) {
        fp_i16x4 r{};
        r[0] = static_cast<uint16_t>(lo & 0xffffu);
        r[1] = static_cast<uint16_t>(lo >> 16);
        r[2] = static_cast<uint16_t>(hi & 0xffffu);
        r[3] = static_cast<uint16_t>(hi >> 16);
        return r;
    }
    template <DType DT>
    __device__ __forceinline__ static void mma(acc_t& acc, const uint4 (&w)[1], const uint4& x) {
        if constexpr (DT == DType::BF16) {
            acc = fp_mfma_16x16x16_bf16(four(w[0].x, w[0].y), four(x.x, x.y), acc);
            acc = fp_mfma_16x16x16_bf16(four(w[0].z, w[0].w), four(x.z, x.w), acc);
        } else {
            acc = fp_mfma_16x16x16_f16(four(w[0].x, w[0].y), four(x.x, x.y), acc);
            acc = fp_mfma_16x16x16_f16(four(w[0].z, w[0].w), four(x.z, x.w), acc);
        }
    }
};

}  // namespace

template <DType DT, int NT, Epilogue EPI>
__global__ void __launch_bounds__(TC_THREADS) linear_gemv_mfma_kernel(const GemvArgs a, const int tokens,
                                                                      const TcSplit sp) {
    linear_gemv_tc<DT, MfmaFrag, NT, EPI>(a, tokens, sp);
}

namespace {
struct MfmaKernels {
    using Frag = MfmaFrag;
    template <DType DT, int NT, Epilogue EPI>
    static auto get() {
        return linear_gemv_mfma_kernel<DT, NT, EPI>;
    }
};
}  // namespace

void gemv_mfma(const GemvArgs& a, DType dtype, int64_t tokens, Epilogue epi, cudaStream_t stream) {
    run_gemv_tc<MfmaKernels>(a, dtype, tokens, epi, stream, "linear_gemv_mfma_kernel");
}

}  // namespace flashport::gpu
