// AMD matrix-core (MFMA) and dot2 instructions under one portable spelling, so a kernel's text is the
// same for the hardware and for the emulator that tests it:
//   - hipcc for gfx908/90a/940 (FP_HAS_MFMA): the clang builtins __builtin_amdgcn_mfma_*;
//   - hipcc for gfx906, CDNA and gfx1030 (FP_HAS_DOT2_F16): __builtin_amdgcn_fdot2 (v_dot2_f32_f16);
//   - ROCm's HIP CPU Runtime (FLASHPORT_HIP_CPU, tests): vendor/hip_cpu_mfma.h's wave-level emulation;
//   - any other target (MFMA on gfx906 and RDNA, HIP's host pass): a trap. Kernels built on these are
//     selected by the device's arch and never run there; the trap keeps the multi-target build whole.
// CUDA builds do not include this header.
//
// Operands are raw 16-bit patterns (fp16 or bf16, as in the rest of the GPU backend). Per lane:
//   fp_mfma_32x32x8_{f16,bf16}(a, b, c):   a, b: 4 values (fp_i16x4), c and result: 16 floats (fp_f32x16)
//   fp_mfma_16x16x16_{f16,bf16}(a, b, c):  a, b: 4 values (fp_i16x4), c and result: 4 floats (fp_f32x4)
//   fp_dot2_f32_f16(a, b, c):              a, b: two fp16 in one word (element 0 in bits 15:0), c float
// The lane layouts of A, B and D are written out in vendor/hip_cpu_mfma.h and checked against AMD's
// published ones in tests/gpu/test_mfma_emulation.cpp. Every lane of the wave must make each MFMA
// call (it is one instruction of the wave); kernels index the fragments (x[i]) and zero them with {}.
//
// No AMD GPU was available: the hardware branch is compile-checked (tests/gpu/mfma_compile_check.cu),
// the emulated branch is executed by the tests; neither says anything about AMD speed.
#pragma once

#include "backends/gpu/common.cuh"

#if defined(FLASHPORT_HIP_CPU)
#include "backends/gpu/vendor/hip_cpu_mfma.h"
#endif

// v_dot2_f32_f16: gfx906 (the MI50), the CDNA chips, which keep the dot2 instructions, and gfx1030
// (RDNA2), where HIP 5.2's clang emits __builtin_amdgcn_fdot2 as v_dot2c_f32_f16 (checked 2026-12-02
// with --offload-arch=gfx1030 --cuda-device-only -S).
#if defined(FLASHPORT_GPU_HIP) && (defined(__gfx906__) || defined(__gfx1030__) || FP_HAS_MFMA)
#define FP_HAS_DOT2_F16 1
#else
#define FP_HAS_DOT2_F16 0
#endif

namespace flashport::gpu {

#if defined(FLASHPORT_HIP_CPU)
using fp_i16x4 = fp_hip_cpu::i16x4;
using fp_f32x4 = fp_hip_cpu::f32x4;
using fp_f32x16 = fp_hip_cpu::f32x16;
#else
typedef short fp_i16x4 __attribute__((ext_vector_type(4)));
typedef float fp_f32x4 __attribute__((ext_vector_type(4)));
typedef float fp_f32x16 __attribute__((ext_vector_type(16)));
typedef _Float16 fp_f16x4 __attribute__((ext_vector_type(4)));  // the f16 builtins' operand type
typedef _Float16 fp_f16x2 __attribute__((ext_vector_type(2)));
#endif

// The trap of a target without the instruction; returns a zero fragment so every path returns.
template <typename T>
__device__ __forceinline__ T fp_matrix_unsupported() {
#if !defined(FLASHPORT_HIP_CPU)
    __builtin_trap();
#endif
    return T{};
}

__device__ __forceinline__ fp_f32x16 fp_mfma_32x32x8_f16(fp_i16x4 a, fp_i16x4 b, fp_f32x16 c) {
#if defined(FLASHPORT_HIP_CPU)
    return fp_hip_cpu::wave_mfma<32>(a, b, c, false);
#elif FP_HAS_MFMA
    return __builtin_amdgcn_mfma_f32_32x32x8f16(__builtin_bit_cast(fp_f16x4, a), __builtin_bit_cast(fp_f16x4, b), c, 0,
                                                0, 0);
#else
    (void)a, (void)b, (void)c;
    return fp_matrix_unsupported<fp_f32x16>();
#endif
}

__device__ __forceinline__ fp_f32x16 fp_mfma_32x32x8_bf16(fp_i16x4 a, fp_i16x4 b, fp_f32x16 c) {
#if defined(FLASHPORT_HIP_CPU)
    return fp_hip_cpu::wave_mfma<32>(a, b, c, true);
#elif FP_HAS_MFMA && !defined(__gfx908__)  // the _1k forms are gfx90a/940 instructions
    return __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(a, b, c, 0, 0, 0);
#else
    (void)a, (void)b, (void)c;
    return fp_matrix_unsupported<fp_f32x16>();
#endif
}

__device__ __forceinline__ fp_f32x4 fp_mfma_16x16x16_f16(fp_i16x4 a, fp_i16x4 b, fp_f32x4 c) {
#if defined(FLASHPORT_HIP_CPU)
    return fp_hip_cpu::wave_mfma<16>(a, b, c, false);
#elif FP_HAS_MFMA
    return __builtin_amdgcn_mfma_f32_16x16x16f16(__builtin_bit_cast(fp_f16x4, a), __builtin_bit_cast(fp_f16x4, b), c, 0,
                                                 0, 0);
#else
    (void)a, (void)b, (void)c;
    return fp_matrix_unsupported<fp_f32x4>();
#endif
}

__device__ __forceinline__ fp_f32x4 fp_mfma_16x16x16_bf16(fp_i16x4 a, fp_i16x4 b, fp_f32x4 c) {
#if defined(FLASHPORT_HIP_CPU)
    return fp_hip_cpu::wave_mfma<16>(a, b, c, true);
#elif FP_HAS_MFMA && !defined(__gfx908__)
    return __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a, b, c, 0, 0, 0);
#else
    (void)a, (void)b, (void)c;
    return fp_matrix_unsupported<fp_f32x4>();
#endif
}

__device__ __forceinline__ float fp_dot2_f32_f16(uint32_t a, uint32_t b, float c) {
#if defined(FLASHPORT_HIP_CPU)
    return fp_hip_cpu::dot2_f32_f16(a, b, c);
#elif FP_HAS_DOT2_F16
    return __builtin_amdgcn_fdot2(__builtin_bit_cast(fp_f16x2, a), __builtin_bit_cast(fp_f16x2, b), c, false);
#else
    (void)a, (void)b, (void)c;
    return fp_matrix_unsupported<float>();
#endif
}

}  // namespace flashport::gpu
