// The layout check of wgmma.cuh (sm90.h: wgmma_probe), compiled for sm_90a only: one warpgroup copies
// a [64, 16] and b [64, 16] (row-major, k contiguous) into shared memory in the core-matrix layout,
// multiplies them with one wgmma.mma_async (d = a · bᵀ) and writes each accumulator register where
// wgmma.cuh says it sits. A wrong descriptor or fragment map shows as wrong or permuted entries in
// tests/gpu/test_gemm_gpu.cpp's Wgmma test, before any kernel is built on them. The second probe
// (wgmma_probe_mn_major) does the same for a B operand stored MN-major, the layout that lets P · V read
// V as it sits in memory.
#include "backends/gpu/runtime.h"
#include "backends/gpu/sm90.h"
#include "backends/gpu/wgmma.cuh"

namespace flashport::gpu {
namespace nvidia_only {

template <DType DT>
__global__ void __launch_bounds__(WGMMA_THREADS) wgmma_probe_kernel(const uint16_t* a, const uint16_t* b, float* d) {
    __shared__ __align__(128) uint8_t as[64 * 16 * 2];
    __shared__ __align__(128) uint8_t bs[64 * 16 * 2];
    const int tid = int(threadIdx.x);
    for (int e = tid; e < 64 * 16; e += WGMMA_THREADS) {
        const int r = e / 16, k = e % 16;
        *reinterpret_cast<uint16_t*>(as + wgmma_core_offset(r, k)) = a[e];
        *reinterpret_cast<uint16_t*>(bs + wgmma_core_offset(r, k)) = b[e];
    }
    fence_proxy_async();
    __syncthreads();
    float acc[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[i] = 0.0f;
    wgmma_fence();
    wgmma_mma<DT, 64>(acc, wgmma_descriptor(as), wgmma_descriptor(bs), false);
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < 32; ++i) d[wgmma_acc_row(tid, i) * 64 + wgmma_acc_col(tid, i)] = acc[i];
}

// b [16, 64] (row-major, columns contiguous) as MN-major core matrices at the layout's offsets, d = a · b
// through wgmma with B transposed and the layout's descriptor offsets. The shared buffer holds any
// candidate several times over and is zeroed first, so a wrong pairing reads zeros, never past it.
constexpr int MN_PROBE_B_BYTES = 16384;

template <DType DT>
__global__ void __launch_bounds__(WGMMA_THREADS)
    wgmma_probe_mn_kernel(const uint16_t* a, const uint16_t* b, float* d, WgmmaMnLayout l) {
    __shared__ __align__(128) uint8_t as[64 * 16 * 2];
    __shared__ __align__(1024) uint8_t bs[MN_PROBE_B_BYTES];  // the swizzle's atoms are 1024-byte aligned
    const int tid = int(threadIdx.x);
    for (int e = tid; e < MN_PROBE_B_BYTES / 16; e += WGMMA_THREADS)
        reinterpret_cast<uint4*>(bs)[e] = make_uint4(0, 0, 0, 0);
    __syncthreads();
    for (int e = tid; e < 64 * 16; e += WGMMA_THREADS) {
        const int r = e / 16, k = e % 16;
        *reinterpret_cast<uint16_t*>(as + wgmma_core_offset(r, k)) = a[e];
        const int kb = e / 64, n = e % 64;  // b's element e is (k = e / 64, n = e % 64)
        const unsigned at = l.swizzle128
                                ? (kb / 8) * l.k_group_bytes + (kb % 8) * 128 + ((n / 8) ^ (kb % 8)) * 16 + (n % 8) * 2
                                : (kb / 8) * l.k_group_bytes + (n / 8) * l.n_group_bytes + (kb % 8) * 16 + (n % 8) * 2;
        *reinterpret_cast<uint16_t*>(bs + at) = b[e];
    }
    fence_proxy_async();
    __syncthreads();
    float acc[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[i] = 0.0f;
    wgmma_fence();
    const uint64_t desc_b = wgmma_descriptor(bs, l.lbo, l.sbo) | (l.swizzle128 ? uint64_t(1) << 62 : 0);
    wgmma_mma<DT, 64, true>(acc, wgmma_descriptor(as), desc_b, false);
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < 32; ++i) d[wgmma_acc_row(tid, i) * 64 + wgmma_acc_col(tid, i)] = acc[i];
}

void launch_wgmma_probe_mn_major(const void* a, const void* b, float* d, DType dtype, const WgmmaMnLayout& layout,
                                 cudaStream_t stream) {
    const auto* pa = static_cast<const uint16_t*>(a);
    const auto* pb = static_cast<const uint16_t*>(b);
    if (dtype == DType::F16)
        launch_kernel(wgmma_probe_mn_kernel<DType::F16>, dim3(1), dim3(WGMMA_THREADS), 0, stream, pa, pb, d, layout);
    else
        launch_kernel(wgmma_probe_mn_kernel<DType::BF16>, dim3(1), dim3(WGMMA_THREADS), 0, stream, pa, pb, d, layout);
    FP_GPU_CHECK_LAUNCH("wgmma_probe_mn_kernel");
}

void launch_wgmma_probe(const void* a, const void* b, float* d, DType dtype, cudaStream_t stream) {
    const auto* pa = static_cast<const uint16_t*>(a);
    const auto* pb = static_cast<const uint16_t*>(b);
    if (dtype == DType::F16)
        launch_kernel(wgmma_probe_kernel<DType::F16>, dim3(1), dim3(WGMMA_THREADS), 0, stream, pa, pb, d);
    else
        launch_kernel(wgmma_probe_kernel<DType::BF16>, dim3(1), dim3(WGMMA_THREADS), 0, stream, pa, pb, d);
    FP_GPU_CHECK_LAUNCH("wgmma_probe_kernel");
}

}  // namespace nvidia_only
}  // namespace flashport::gpu
