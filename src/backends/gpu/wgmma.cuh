// Hopper's warpgroup matrix instructions as the sm_90a kernels call them (issue 17, item 1): wgmma.mma_async
// with fp32 accumulators and fp16/bf16 operands in shared memory, its fences, and the shared-memory
// matrix descriptors. Compiled into machine code only for sm_90a (__CUDA_ARCH_FEAT_SM90_ALL); any other
// target gets a trap, and the dispatchers launch sm_90a kernels only on compute capability 9.0.
// port-check: ignore-file inline-ptx -- CUDA builds only (the sm_90a sources are not in the HIP build)
//
// A warpgroup is 4 consecutive warps (128 threads); one wgmma computes D (64 x N) += A (64 x 16) ·
// B (16 x N) for the whole warpgroup, asynchronously: issue after wgmma_fence(), group with
// wgmma_commit(), wait with wgmma_wait<n>(). Shared memory written by the threads must reach the async
// proxy first (fence_proxy_async() after the stores, then a barrier).
//
// Operand layout in shared memory (no swizzle, both operands "K-major": 16 consecutive k of a row
// are contiguous 8-element pieces): the R x 16 operand (R = 64 rows of A, or N rows of B = the N
// columns of B, i.e. a weight or K tile stored [n][k]) is a grid of 8 x 8 core matrices, each 128
// contiguous bytes (8 rows of 16 bytes). Core matrix (r / 8, k / 8) starts at (r / 8) · SBO + (k / 8) ·
// LBO bytes: wgmma_core_offset gives an element's byte offset. With LBO = 128 and SBO = 256 the two
// k-halves of an 8-row group sit side by side.
//
// Accumulator fragment of m64nNk16 (f32, N / 2 registers a thread): warp w of the warpgroup holds rows
// 16w .. 16w + 15; lane (g = lane / 4, c = lane % 4) holds, for each 8-column block j, d[4j] = (16w + g,
// 8j + 2c), d[4j + 1] = (16w + g, 8j + 2c + 1), d[4j + 2] = (16w + g + 8, 8j + 2c), d[4j + 3] = (16w +
// g + 8, 8j + 2c + 1): mma.sync's m16n8 fragment, one per warp and column block.
//
// wgmma_probe (wgmma_probe.cu) and its test checked the descriptors and the accumulator map on the H200
// (2026-12-04: all 4096 entries of a 64 x 64 x 16 product, fp16 and bf16).
#pragma once

#include <cstdint>

#include "backends/gpu/common.cuh"

#if !defined(FLASHPORT_GPU_CUDA)
#error "wgmma.cuh is NVIDIA-only"
#endif

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FP_HAS_WGMMA 1
#else
#define FP_HAS_WGMMA 0
#endif

namespace flashport::gpu::nvidia_only {

constexpr int WGMMA_THREADS = 128;          // one warpgroup
constexpr uint32_t WGMMA_LBO = 128;         // bytes between the two 8-wide k halves of a core-matrix row
constexpr uint32_t WGMMA_SBO = 256;         // bytes between 8-row groups

// Byte offset of element (r, k) of an R x 16 K-major operand in the core-matrix layout above.
__host__ __device__ constexpr uint32_t wgmma_core_offset(int r, int k) {
    return uint32_t(r / 8) * WGMMA_SBO + uint32_t(k / 8) * WGMMA_LBO + uint32_t(r % 8) * 16 + uint32_t(k % 8) * 2;
}

// The 64-bit shared-memory matrix descriptor: start address, leading and stride byte offsets (all in
// 16-byte units), no swizzle (bits 62-63 zero), base offset 0.
__device__ __forceinline__ uint64_t wgmma_descriptor(const void* smem) {
    const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
    return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t(WGMMA_LBO >> 4) << 16) | (uint64_t(WGMMA_SBO >> 4) << 32);
}

// The same with explicit leading and stride byte offsets (multiples of 16, below 2^18): for operands
// laid out otherwise, e.g. an MN-major B (wgmma_m64n64k16 with TRANS_B).
__device__ __forceinline__ uint64_t wgmma_descriptor(const void* smem, uint32_t lbo, uint32_t sbo) {
    const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
    return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t((lbo & 0x3FFFF) >> 4) << 16) |
           (uint64_t((sbo & 0x3FFFF) >> 4) << 32);
}

// The threads' shared-memory stores become visible to the wgmma (async) proxy.
__device__ __forceinline__ void fence_proxy_async() {
#if FP_HAS_WGMMA
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// Orders register and shared-memory accesses before the wgmma that follow.
__device__ __forceinline__ void wgmma_fence() {
#if FP_HAS_WGMMA
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if FP_HAS_WGMMA
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Waits until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if FP_HAS_WGMMA
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}

// The 32 fp32 accumulator registers of an m64n64 tile as asm operands %0-%31, shared by the wrappers below.
#define FP_WGMMA_ACC_LIST                                                                                             \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, " \
    "%24, %25, %26, %27, %28, %29, %30, %31}"
#define FP_WGMMA_ACC_OUTPUTS(d)                                                                                       \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),       \
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),      \
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),      \
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])

// d (64 x 64, 32 floats a thread) = A · B (+ d when accumulate), both operands from shared memory. A is
// K-major; B is K-major, or with TRANS_B (imm-trans-b 1) MN-major: B's 16 x 64 tile with its 64 columns
// contiguous in 8-element core-matrix rows, as a V tile [keys][head dim] sits in memory. Which leading and
// stride offsets describe that layout is what wgmma_probe_mn_major establishes.
template <DType DT, bool TRANS_B = false>
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], uint64_t desc_a, uint64_t desc_b, bool accumulate) {
#if FP_HAS_WGMMA
    const uint32_t scale_d = accumulate ? 1u : 0u;
#define FP_WGMMA_SS_OPERANDS " " FP_WGMMA_ACC_LIST ", %32, %33, p, 1, 1, 0, %35;\n}\n"
    if constexpr (DT == DType::F16)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16" FP_WGMMA_SS_OPERANDS
                     : FP_WGMMA_ACC_OUTPUTS(d)
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_B ? 1 : 0));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16" FP_WGMMA_SS_OPERANDS
                     : FP_WGMMA_ACC_OUTPUTS(d)
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_B ? 1 : 0));
#undef FP_WGMMA_SS_OPERANDS
#else
    (void)d, (void)desc_a, (void)desc_b, (void)accumulate;
    __trap();
#endif
}

// d (64 x 64) += A · B with A from registers: each warp's 16 rows as mma.sync's m16k16 A fragment
// (a[0] = (g, 2c..2c+1), a[1] = (g + 8, 2c..), a[2] = (g, 2c + 8..), a[3] = (g + 8, 2c + 8..), two 16-bit
// values a register, low half first), which is where an m64n64 accumulator's column blocks 2s and
// 2s + 1 sit: a softmax's P feeds P · V without leaving registers. B from shared memory, K-major.
template <DType DT>
__device__ __forceinline__ void wgmma_m64n64k16_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b,
                                                   bool accumulate) {
#if FP_HAS_WGMMA
    const uint32_t scale_d = accumulate ? 1u : 0u;
#define FP_WGMMA_RS_OPERANDS " " FP_WGMMA_ACC_LIST ", {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
    if constexpr (DT == DType::F16)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16" FP_WGMMA_RS_OPERANDS
                     : FP_WGMMA_ACC_OUTPUTS(d)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16" FP_WGMMA_RS_OPERANDS
                     : FP_WGMMA_ACC_OUTPUTS(d)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
#undef FP_WGMMA_RS_OPERANDS
#else
    (void)d, (void)a, (void)desc_b, (void)accumulate;
    __trap();
#endif
}
#undef FP_WGMMA_ACC_LIST
#undef FP_WGMMA_ACC_OUTPUTS

// Where accumulator register i of thread `tid` (0-127) of an m64n64 tile sits: warp tid / WARP_SIZE
// of the warpgroup (NVIDIA's 32 lanes) owns 16 rows.
__device__ __forceinline__ int wgmma_acc_row(int tid, int i) {
    return (tid / WARP_SIZE) * 16 + (tid % WARP_SIZE) / 4 + 8 * ((i % 4) / 2);
}
__device__ __forceinline__ int wgmma_acc_col(int tid, int i) { return (i / 4) * 8 + 2 * (tid % 4) + i % 2; }

}  // namespace flashport::gpu::nvidia_only
