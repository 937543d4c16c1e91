// The hardware facts every GPU kernel relies on, in one place: which vendor this is compiled for, the
// warp size, feature macros for matrix-unit paths, fp16/bf16 conversions and warp reductions.
// Kernels include this and nothing vendor-specific; a literal warp width, full-warp shuffle mask,
// __shfl_*_sync or warpSize appears only here and in vendor/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "flashport/dtype.h"

#if defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__) || defined(FLASHPORT_HIP_CPU)
#include "backends/gpu/vendor/hip.h"
#else
#include "backends/gpu/vendor/cuda.h"
#endif

// `extern __shared__ T name[]`: the block's dynamic shared memory (HIP-CPU spells it its own way).
#ifndef FP_DYNAMIC_SHARED
#define FP_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#endif

namespace flashport::gpu {

// ---- Warp size -------------------------------------------------------------------------------
// A compile-time constant taken from the target's architecture macros (as ggml does), because newer
// ROCm made `warpSize` a run-time value. GCN and CDNA (gfx8xx/gfx9xx: MI50, MI100, MI200, MI300)
// run 64-wide wavefronts; RDNA (gfx10xx/gfx11xx) defaults to 32, like NVIDIA.
// Only device code may rely on it: in HIP's host pass no target is known (WARP_SIZE is 32 there and
// 64 in a gfx9 device pass), so a block's thread count is a fixed number, a multiple of 64, and
// kernels derive warps-per-block inside their bodies. tools/check_warp_size.py enforces this in CI:
// WARP_SIZE may appear only inside __device__/__global__ function bodies.
#if defined(FLASHPORT_GPU_HIP) && defined(__HIP_DEVICE_COMPILE__) && (defined(__GFX8__) || defined(__GFX9__))
#define FP_WARP_SIZE 64
#elif defined(FLASHPORT_HIP_CPU)  // ROCm's HIP CPU Runtime: wave64, for the tests (vendor/hip_cpu.h)
#define FP_WARP_SIZE 64
#else
// port-check: ignore warp-size-define -- NVIDIA, wave32 chips and HIP's host pass, where 32 is right
#define FP_WARP_SIZE 32
#endif
constexpr int WARP_SIZE = FP_WARP_SIZE;
// Block sizes chosen by launchers are multiples of this, so they hold whole warps on every target.
constexpr int MAX_WARP_SIZE = 64;

// ---- Feature macros ---------------------------------------------------------------------------
// FP_HAS_MMA_SYNC: NVIDIA mma.sync m16n8k16 with fp16/bf16 inputs and ldmatrix (sm_80+).
// FP_HAS_CP_ASYNC: asynchronous global->shared copies (sm_80+).
// FP_HAS_MFMA:     AMD matrix cores (gfx908, gfx90a, gfx940): mfma.cuh, the MFMA flash kernel.
#if defined(FLASHPORT_GPU_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define FP_HAS_MMA_SYNC 1
#define FP_HAS_CP_ASYNC 1
#else
#define FP_HAS_MMA_SYNC 0
#define FP_HAS_CP_ASYNC 0
#endif
#if defined(FLASHPORT_GPU_HIP) && (defined(__gfx908__) || defined(__gfx90a__) || defined(__gfx940__) || \
                                   defined(__gfx941__) || defined(__gfx942__))
#define FP_HAS_MFMA 1
#else
#define FP_HAS_MFMA 0
#endif

// ---- Warp reductions ---------------------------------------------------------------------------
// The member mask of a whole warp, derived from the warp size (HIP ignores it).
__device__ __forceinline__ constexpr uint64_t full_warp_mask() {
    return WARP_SIZE == 64 ? ~uint64_t(0) : (uint64_t(1) << WARP_SIZE) - 1;
}

// Butterfly reductions over groups of WIDTH consecutive lanes (WIDTH a power of two <= WARP_SIZE):
// every lane of the group ends with the group's result. Every lane of the warp must call them.
template <int WIDTH>
__device__ __forceinline__ float group_max(float x) {
    static_assert(WIDTH >= 1 && WIDTH <= WARP_SIZE && (WIDTH & (WIDTH - 1)) == 0, "WIDTH: power of two <= warp");
#pragma unroll
    for (int offset = WIDTH / 2; offset > 0; offset /= 2)
        x = fmaxf(x, FP_SHFL_XOR(static_cast<unsigned>(full_warp_mask()), x, offset, WIDTH));
    return x;
}
template <int WIDTH>
__device__ __forceinline__ float group_sum(float x) {
    static_assert(WIDTH >= 1 && WIDTH <= WARP_SIZE && (WIDTH & (WIDTH - 1)) == 0, "WIDTH: power of two <= warp");
#pragma unroll
    for (int offset = WIDTH / 2; offset > 0; offset /= 2)
        x += FP_SHFL_XOR(static_cast<unsigned>(full_warp_mask()), x, offset, WIDTH);
    return x;
}
__device__ __forceinline__ float warp_max(float x) { return group_max<WARP_SIZE>(x); }
__device__ __forceinline__ float warp_sum(float x) { return group_sum<WARP_SIZE>(x); }

// 2^x for softmax weights. On NVIDIA one MUFU.EX2 (ex2.approx.ftz: about 2 ulp; a result below 2^-126,
// a weight too small to matter, is flushed to 0). exp2f (the CUDA build's default, which adds a
// denormal-range fix-up around the same instruction) cost three extra instructions per score in the
// flash kernels, which are issue-bound. HIP's exp2f is already one instruction.
__device__ __forceinline__ float fast_exp2(float x) {
#if defined(FLASHPORT_GPU_CUDA)
    float y;
    // port-check: ignore inline-ptx -- inside #if defined(FLASHPORT_GPU_CUDA); HIP takes exp2f below
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#else
    return exp2f(x);
#endif
}

// Block-wide reductions through `scratch` (>= blockDim.x / WARP_SIZE floats of shared memory). All
// threads get the result. Two barriers: one before the partials are read, one before scratch reuse.
__device__ __forceinline__ float block_reduce(float x, float* scratch, bool is_max) {
    const int lane = int(threadIdx.x) % WARP_SIZE, warp = int(threadIdx.x) / WARP_SIZE;
    const int n_warps = int(blockDim.x) / WARP_SIZE;
    x = is_max ? warp_max(x) : warp_sum(x);
    if (lane == 0) scratch[warp] = x;
    __syncthreads();
    float r = scratch[0];
    for (int w = 1; w < n_warps; ++w) r = is_max ? fmaxf(r, scratch[w]) : r + scratch[w];
    __syncthreads();
    return r;
}

// ---- Reading what other blocks of the grid wrote ------------------------------------------------
// Split-k and split-KV merges (paged decode, the matrix-core GEMV): the last block to count in reads the
// others' partials. On NVIDIA from L2 (ld.global.cg), the coherence point, so a line that sits in this
// SM's non-coherent L1 is never used (belt and braces next to the callers' fences); elsewhere plain
// loads, ordered by those fences (on AMD an acquire fence invalidates the CU's L1).
__device__ __forceinline__ float load_from_other_blocks(const float* p) {
#if defined(FLASHPORT_GPU_CUDA) && defined(__CUDA_ARCH__)
    return __ldcg(p);
#else
    return *p;
#endif
}
__device__ __forceinline__ float4 load_from_other_blocks4(const float* p) {
#if defined(FLASHPORT_GPU_CUDA) && defined(__CUDA_ARCH__)
    return __ldcg(reinterpret_cast<const float4*>(p));
#else
    return *reinterpret_cast<const float4*>(p);
#endif
}

// ---- fp16 / bf16 --------------------------------------------------------------------------------
// Kernels keep 16-bit values as raw uint16_t and convert through these, so one kernel text serves
// CUDA's __half/__nv_bfloat16 and HIP 5.2, which has __half but no __hip_bfloat16 intrinsics. Both
// conversions to 16 bits round to nearest even, matching flashport/dtype.h on the CPU bit for bit.
template <DType DT>
struct Storage;  // the element type in memory
template <>
struct Storage<DType::F32> {
    using type = float;
};
template <>
struct Storage<DType::F16> {
    using type = uint16_t;
};
template <>
struct Storage<DType::BF16> {
    using type = uint16_t;
};
template <DType DT>
using storage_t = typename Storage<DT>::type;

__device__ __forceinline__ float bf16_bits_to_float(uint16_t h) { return __uint_as_float(uint32_t(h) << 16); }
__device__ __forceinline__ uint16_t float_to_bf16_bits(float x) {
#if defined(FLASHPORT_GPU_CUDA)
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
#else
    uint32_t u = __float_as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN, sign kept
    u += 0x7fffu + ((u >> 16) & 1u);                                          // round to nearest even
    return uint16_t(u >> 16);
#endif
}
__device__ __forceinline__ float fp16_bits_to_float(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ uint16_t float_to_fp16_bits(float x) { return __half_as_ushort(__float2half_rn(x)); }

template <DType DT>
__device__ __forceinline__ float to_float(storage_t<DT> x) {
    if constexpr (DT == DType::F32) return x;
    else if constexpr (DT == DType::F16) return fp16_bits_to_float(x);
    else return bf16_bits_to_float(x);
}
template <DType DT>
__device__ __forceinline__ storage_t<DT> from_float(float x) {
    if constexpr (DT == DType::F32) return x;
    else if constexpr (DT == DType::F16) return float_to_fp16_bits(x);
    else return float_to_bf16_bits(x);
}

// Eight 16-bit values of type DT (one 16-byte load; element 2i is the low half of word i) to floats.
template <DType DT>
__device__ __forceinline__ void unpack8(const uint4& raw, float* f) {
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        f[2 * i] = to_float<DT>(uint16_t(w[i] & 0xffffu));
        f[2 * i + 1] = to_float<DT>(uint16_t(w[i] >> 16));
    }
}

// Calls f.template operator()<DT>() with the run-time dtype as a template argument.
template <typename F>
void dispatch_dtype(DType dtype, F&& f) {
    switch (dtype) {
        case DType::F32: f.template operator()<DType::F32>(); return;
        case DType::F16: f.template operator()<DType::F16>(); return;
        case DType::BF16: f.template operator()<DType::BF16>(); return;
    }
}

// ---- Dependent launches (NVIDIA sm_90+: programmatic dependent launch) ---------------------------
// A kernel launched through launch_dependent (runtime.h) may start while the kernel before it on the
// stream is still finishing its last blocks, so its prologue (a GEMV's first weight loads, which no
// kernel writes) overlaps that kernel's tail and the launch gap. Its contract, in every block and on
// every path (no early return before it):
//   - before wait_for_prior_grid(): read only what no earlier kernel of the stream writes (weights,
//     constants), and write nothing;
//   - wait_for_prior_grid() returns once the previous kernel has finished and its writes are visible;
//   - then allow_next_grid() lets the next dependent kernel start its own prologue.
// Elsewhere (HIP, older NVIDIA chips, FLASHPORT_GPU_PDL=0) both are no-ops and launches are plain.
__device__ __forceinline__ void wait_for_prior_grid() {
#if defined(FLASHPORT_GPU_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    cudaGridDependencySynchronize();
#endif
}
__device__ __forceinline__ void allow_next_grid() {
#if defined(FLASHPORT_GPU_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    cudaTriggerProgrammaticLaunchCompletion();
#endif
}

// ---- Launches -------------------------------------------------------------------------------------
// Runs kernel<<<grid, block, smem, stream>>>(args...). One spelling for every launcher, because HIP's
// CPU runtime (vendor/hip_cpu.h) compiles kernels as plain C++, where <<<>>> does not exist. The
// arguments convert to the kernel's parameter types as in a <<<>>> launch.
template <typename... Params, typename... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args&&... args) {
    static_assert(sizeof...(Params) == sizeof...(Args), "launch_kernel: one argument per kernel parameter");
#if defined(FLASHPORT_HIP_CPU)
    const auto checked = [kernel](Params... p) {  // each thread's steps logged: vendor/hip_cpu.h
        fp_hip_cpu::enter();
        kernel(p...);
        fp_hip_cpu::leave();
    };
    (void)stream;  // runs now, so every stream's order holds (vendor/hip_cpu.h)
    fp_hip_cpu::run_kernel(grid, block, smem, checked, Params(std::forward<Args>(args))...);
#else
    // clang-format off
    kernel<<<grid, block, smem, stream>>>(std::forward<Args>(args)...);
    // clang-format on
#endif
}

// Ceiling division for grid sizes.
constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace flashport::gpu
