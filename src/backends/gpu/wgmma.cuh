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

constexpr int WGMMA_THREADS = 128;   // one warpgroup
constexpr uint32_t WGMMA_LBO = 128;  // bytes between the two 8-wide k halves of a core-matrix row
constexpr uint32_t WGMMA_SBO = 256;  // bytes between 8-row groups
// The product widths the wrappers below spell (the instruction takes any multiple of 8 up to 256): 64
// and 128 for the power-of-two head dims, 40, 80 and 160 for Stable Diffusion's, whose O accumulators
// are then as wide as the head dim, not a padded tile.
__host__ __device__ constexpr bool wgmma_n_supported(int n) {
    return n == 40 || n == 64 || n == 80 || n == 128 || n == 160;
}

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
// laid out otherwise, e.g. an MN-major B (wgmma_mma with TRANS_B).
__device__ __forceinline__ uint64_t wgmma_descriptor(const void* smem, uint32_t lbo, uint32_t sbo) {
    const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
    return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t((lbo & 0x3FFFF) >> 4) << 16) |
           (uint64_t((sbo & 0x3FFFF) >> 4) << 32);
}

// The descriptor of a K-major operand in the 128-byte swizzle layout: rows of 64 16-bit values (128
// bytes), 8-row atoms of 1024 bytes (the SBO) aligned to 1024, and in row r the 16-byte chunk c stored at
// chunk c ^ (r % 8). A k16 slab starts 32 · (k / 16) bytes into its row; the XOR applies to the address
// bits, so the start may sit inside the atom. Layout type 1 (bits 62-63); LBO is unused (1).
__device__ __forceinline__ uint64_t wgmma_descriptor_sw128(const void* smem) {
    const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
    return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t(1) << 16) | (uint64_t(1024 >> 4) << 32) | (uint64_t(1) << 62);
}
// Byte offset of 16-byte chunk c (columns 8c .. 8c + 7) of row r of an R-row K-major operand in that
// layout: 64-column blocks of R rows one after the other.
__host__ __device__ constexpr uint32_t wgmma_sw128_offset(int r, int c, int rows) {
    return uint32_t(c / 8) * uint32_t(rows) * 128 + uint32_t(r) * 128 + uint32_t((c % 8) ^ (r % 8)) * 16;
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

// Pins accumulator registers in place for the compiler: the wgmma asm statements produce their outputs
// when issued, as far as the compiler knows, and wgmma_wait has no register operands, so without this
// it may move the reads (or rescaling) of an accumulator above the wait that makes it valid, and ptxas
// then serialises every wgmma (warning C7515). Call on the accumulators after wgmma_wait and before the
// wgmma_fence of their next product.
template <int N>
__device__ __forceinline__ void wgmma_fence_operands(float (&d)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// clang-format off
// The fp32 accumulator registers of an m64nN tile (N / 2 a thread) as asm operands, for the N the
// kernels use (wgmma_n_supported): the %-list and the outputs, shared by the wrappers below.
#define FP_WGMMA_ACC_LIST_40 \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19}"
#define FP_WGMMA_ACC_LIST_64                                                                                \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, " \
    "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define FP_WGMMA_ACC_LIST_80                                                                                \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, " \
    "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39}"
#define FP_WGMMA_ACC_LIST_128                                                                               \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, " \
    "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, "  \
    "%42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "  \
    "%62, %63}"
#define FP_WGMMA_ACC_LIST_160                                                                               \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, " \
    "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, "  \
    "%42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "  \
    "%62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79}"
#define FP_WGMMA_ACC4(c, d, i) c(d[i]), c(d[i + 1]), c(d[i + 2]), c(d[i + 3])
// C is "+f" (accumulate onto d) or "=f" (overwrite: the asm does not read d, so no earlier value of d is
// kept alive, or copied, while a product is in flight).
#define FP_WGMMA_ACC_OUTPUTS_40(c, d)                                                                \
    FP_WGMMA_ACC4(c, d, 0), FP_WGMMA_ACC4(c, d, 4), FP_WGMMA_ACC4(c, d, 8), FP_WGMMA_ACC4(c, d, 12), \
        FP_WGMMA_ACC4(c, d, 16)
#define FP_WGMMA_ACC_OUTPUTS_64(c, d)                                                                \
    FP_WGMMA_ACC4(c, d, 0), FP_WGMMA_ACC4(c, d, 4), FP_WGMMA_ACC4(c, d, 8), FP_WGMMA_ACC4(c, d, 12), \
        FP_WGMMA_ACC4(c, d, 16), FP_WGMMA_ACC4(c, d, 20), FP_WGMMA_ACC4(c, d, 24), FP_WGMMA_ACC4(c, d, 28)
#define FP_WGMMA_ACC_OUTPUTS_80(c, d)                                                                       \
    FP_WGMMA_ACC4(c, d, 0), FP_WGMMA_ACC4(c, d, 4), FP_WGMMA_ACC4(c, d, 8), FP_WGMMA_ACC4(c, d, 12),        \
        FP_WGMMA_ACC4(c, d, 16), FP_WGMMA_ACC4(c, d, 20), FP_WGMMA_ACC4(c, d, 24), FP_WGMMA_ACC4(c, d, 28), \
        FP_WGMMA_ACC4(c, d, 32), FP_WGMMA_ACC4(c, d, 36)
#define FP_WGMMA_ACC_OUTPUTS_128(c, d)                                                                      \
    FP_WGMMA_ACC4(c, d, 0), FP_WGMMA_ACC4(c, d, 4), FP_WGMMA_ACC4(c, d, 8), FP_WGMMA_ACC4(c, d, 12),        \
        FP_WGMMA_ACC4(c, d, 16), FP_WGMMA_ACC4(c, d, 20), FP_WGMMA_ACC4(c, d, 24), FP_WGMMA_ACC4(c, d, 28), \
        FP_WGMMA_ACC4(c, d, 32), FP_WGMMA_ACC4(c, d, 36), FP_WGMMA_ACC4(c, d, 40), FP_WGMMA_ACC4(c, d, 44), \
        FP_WGMMA_ACC4(c, d, 48), FP_WGMMA_ACC4(c, d, 52), FP_WGMMA_ACC4(c, d, 56), FP_WGMMA_ACC4(c, d, 60)
#define FP_WGMMA_ACC_OUTPUTS_160(c, d)                                                                      \
    FP_WGMMA_ACC4(c, d, 0), FP_WGMMA_ACC4(c, d, 4), FP_WGMMA_ACC4(c, d, 8), FP_WGMMA_ACC4(c, d, 12),        \
        FP_WGMMA_ACC4(c, d, 16), FP_WGMMA_ACC4(c, d, 20), FP_WGMMA_ACC4(c, d, 24), FP_WGMMA_ACC4(c, d, 28), \
        FP_WGMMA_ACC4(c, d, 32), FP_WGMMA_ACC4(c, d, 36), FP_WGMMA_ACC4(c, d, 40), FP_WGMMA_ACC4(c, d, 44), \
        FP_WGMMA_ACC4(c, d, 48), FP_WGMMA_ACC4(c, d, 52), FP_WGMMA_ACC4(c, d, 56), FP_WGMMA_ACC4(c, d, 60), \
        FP_WGMMA_ACC4(c, d, 64), FP_WGMMA_ACC4(c, d, 68), FP_WGMMA_ACC4(c, d, 72), FP_WGMMA_ACC4(c, d, 76)

// One wgmma.mma_async of shape m64n<N>k16 and operand type TYPE (f16 or bf16), both operands from shared
// memory. OPS names the operands after the accumulators (A's and B's descriptors, then scale-d's source
// as P and imm-trans-b), PRED scale-d's: asm operand numbers are literals, so each N spells its own.
#define FP_WGMMA_SS(N, OPS, PRED, TYPE, C, d, desc_a, desc_b, scale_d, trans_b)                                    \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " PRED ", 0;\n"                                                  \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " " FP_WGMMA_ACC_LIST_##N ", " OPS \
                 ";\n}\n"                                                                                            \
                 : FP_WGMMA_ACC_OUTPUTS_##N(C, d)                                                                     \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(trans_b))
#define FP_WGMMA_SS_40 "%20, %21, p, 1, 1, 0, %23", "%22"
#define FP_WGMMA_SS_64 "%32, %33, p, 1, 1, 0, %35", "%34"
#define FP_WGMMA_SS_80 "%40, %41, p, 1, 1, 0, %43", "%42"
#define FP_WGMMA_SS_128 "%64, %65, p, 1, 1, 0, %67", "%66"
#define FP_WGMMA_SS_160 "%80, %81, p, 1, 1, 0, %83", "%82"
// The same with A from four registers, then B's descriptor, scale-d and imm-trans-b.
#define FP_WGMMA_RS(N, OPS, PRED, TYPE, C, d, a, desc_b, scale_d, trans_b)                                         \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " PRED ", 0;\n"                                                  \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " " FP_WGMMA_ACC_LIST_##N ", " OPS \
                 ";\n}\n"                                                                                            \
                 : FP_WGMMA_ACC_OUTPUTS_##N(C, d)                                                                     \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(trans_b))
#define FP_WGMMA_RS_40 "{%20, %21, %22, %23}, %24, p, 1, 1, %26", "%25"
#define FP_WGMMA_RS_64 "{%32, %33, %34, %35}, %36, p, 1, 1, %38", "%37"
#define FP_WGMMA_RS_80 "{%40, %41, %42, %43}, %44, p, 1, 1, %46", "%45"
#define FP_WGMMA_RS_128 "{%64, %65, %66, %67}, %68, p, 1, 1, %70", "%69"
#define FP_WGMMA_RS_160 "{%80, %81, %82, %83}, %84, p, 1, 1, %86", "%85"
// (Each *_<N> expands to OPS, PRED.)
// The wrappers' ladder over N and the operand type: FORM SS or RS, C the accumulators' constraint, then
// FP_WGMMA_SS's or FP_WGMMA_RS's operands from d on.
#define FP_WGMMA_ANY(FORM, C, ...)                                     \
    if constexpr (N == 40) FP_WGMMA_TYPED(FORM, 40, C, __VA_ARGS__)       \
    else if constexpr (N == 64) FP_WGMMA_TYPED(FORM, 64, C, __VA_ARGS__)  \
    else if constexpr (N == 80) FP_WGMMA_TYPED(FORM, 80, C, __VA_ARGS__)  \
    else if constexpr (N == 128) FP_WGMMA_TYPED(FORM, 128, C, __VA_ARGS__) \
    else FP_WGMMA_TYPED(FORM, 160, C, __VA_ARGS__)
#define FP_WGMMA_TYPED(FORM, N_, C, ...)                                                        \
    {                                                                                          \
        if constexpr (f16) FP_WGMMA_CALL(FP_WGMMA_##FORM, N_, FP_WGMMA_##FORM##_##N_, "f16", C, __VA_ARGS__); \
        else FP_WGMMA_CALL(FP_WGMMA_##FORM, N_, FP_WGMMA_##FORM##_##N_, "bf16", C, __VA_ARGS__);             \
    }
#define FP_WGMMA_CALL(M, ...) M(__VA_ARGS__)
// clang-format on

// d (64 x N, N / 2 floats a thread; N one of wgmma_n_supported's) = A · B (+ d when accumulate), both operands from
// shared memory. A is K-major; B is K-major, or with TRANS_B (imm-trans-b 1) MN-major: B's 16 x N tile
// with its N columns contiguous in 8-element core-matrix rows, as a V tile [keys][head dim] sits in
// memory. wgmma_probe_mn_major established its offsets on the H200 (2026-12-04): LBO is the distance
// between 8-row k groups, SBO the distance between 8-column groups.
template <DType DT, int N, bool TRANS_B = false>
__device__ __forceinline__ void wgmma_mma(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, bool accumulate) {
    static_assert(wgmma_n_supported(N), "wgmma_mma: N is one wgmma_n_supported takes");
#if FP_HAS_WGMMA
    constexpr int trans = TRANS_B ? 1 : 0;
    constexpr bool f16 = DT == DType::F16;
    if (accumulate) {
        FP_WGMMA_ANY(SS, "+f", d, desc_a, desc_b, 1u, trans);
    } else {
        FP_WGMMA_ANY(SS, "=f", d, desc_a, desc_b, 0u, trans);
    }
#else
    (void)d, (void)desc_a, (void)desc_b, (void)accumulate;
    __trap();
#endif
}

// d (64 x N) += A · B with A from registers: each warp's 16 rows as mma.sync's m16k16 A fragment
// (a[0] = (g, 2c..2c+1), a[1] = (g + 8, 2c..), a[2] = (g, 2c + 8..), a[3] = (g + 8, 2c + 8..), two 16-bit
// values a register, low half first), which is where an accumulator's column blocks 2s and 2s + 1 sit:
// a softmax's P feeds P · V without leaving registers. B from shared memory, K-major or (TRANS_B)
// MN-major as above.
template <DType DT, int N, bool TRANS_B = false>
__device__ __forceinline__ void wgmma_mma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b,
                                             bool accumulate) {
    static_assert(wgmma_n_supported(N), "wgmma_mma_rs: N is one wgmma_n_supported takes");
#if FP_HAS_WGMMA
    constexpr int trans = TRANS_B ? 1 : 0;
    constexpr bool f16 = DT == DType::F16;
    if (accumulate) {
        FP_WGMMA_ANY(RS, "+f", d, a, desc_b, 1u, trans);
    } else {
        FP_WGMMA_ANY(RS, "=f", d, a, desc_b, 0u, trans);
    }
#else
    (void)d, (void)a, (void)desc_b, (void)accumulate;
    __trap();
#endif
}
#undef FP_WGMMA_SS
#undef FP_WGMMA_RS
#undef FP_WGMMA_CALL
#undef FP_WGMMA_ANY
#undef FP_WGMMA_TYPED
#undef FP_WGMMA_ACC4
#undef FP_WGMMA_SS_40
#undef FP_WGMMA_RS_40
#undef FP_WGMMA_ACC_LIST_40
#undef FP_WGMMA_ACC_OUTPUTS_40
#undef FP_WGMMA_SS_64
#undef FP_WGMMA_RS_64
#undef FP_WGMMA_ACC_LIST_64
#undef FP_WGMMA_ACC_OUTPUTS_64
#undef FP_WGMMA_SS_80
#undef FP_WGMMA_RS_80
#undef FP_WGMMA_ACC_LIST_80
#undef FP_WGMMA_ACC_OUTPUTS_80
#undef FP_WGMMA_SS_128
#undef FP_WGMMA_RS_128
#undef FP_WGMMA_ACC_LIST_128
#undef FP_WGMMA_ACC_OUTPUTS_128
#undef FP_WGMMA_SS_160
#undef FP_WGMMA_RS_160
#undef FP_WGMMA_ACC_LIST_160
#undef FP_WGMMA_ACC_OUTPUTS_160

// Where accumulator register i of thread `tid` (0-127) of an m64n64 tile sits: warp tid / WARP_SIZE
// of the warpgroup (NVIDIA's 32 lanes) owns 16 rows.
__device__ __forceinline__ int wgmma_acc_row(int tid, int i) {
    return (tid / WARP_SIZE) * 16 + (tid % WARP_SIZE) / 4 + 8 * ((i % 4) / 2);
}
__device__ __forceinline__ int wgmma_acc_col(int tid, int i) {
    return (i / 4) * 8 + 2 * (tid % 4) + i % 2;
}

}  // namespace flashport::gpu::nvidia_only
