// Compile-only check of mfma.cuh's hardware spelling (no AMD GPU exists here to run it): hipcc must
// accept every portable wrapper for every HIP target (the MFMA flash kernel itself is in the hip preset's
// library, attention_flash_mfma_{f16,bf16}.cu), mapping to the real
// builtins on gfx908/90a/940 (MFMA) and gfx906/CDNA/gfx1030 (dot2) and to a trap elsewhere. Built by the `hip` preset
// (tests/gpu/CMakeLists.txt); the emulated spelling is executed by test_mfma_emulation under the `hip-cpu` preset.
#include "backends/gpu/mfma.cuh"

namespace flashport::gpu {

// One kernel per wrapper, so a target's trap in one (gfx908 has no bf16 `_1k` MFMA) leaves the
// others' code in place for inspection (`--cuda-device-only -S`). One wave each: every lane's fragments
// in, its results out; the data is meaningless, code generation is the point.
template <typename Acc, Acc (*MFMA)(fp_i16x4, fp_i16x4, Acc), int REGS>
__global__ void mfma_compile_check_kernel(const fp_i16x4* ab, float* out) {
    const int lane = int(threadIdx.x);
    Acc acc{};
    acc = MFMA(ab[2 * lane], ab[2 * lane + 1], acc);
    for (int r = 0; r < REGS; ++r) out[REGS * lane + r] = acc[r];
}
template __global__ void mfma_compile_check_kernel<fp_f32x16, fp_mfma_32x32x8_f16, 16>(const fp_i16x4*, float*);
template __global__ void mfma_compile_check_kernel<fp_f32x16, fp_mfma_32x32x8_bf16, 16>(const fp_i16x4*, float*);
template __global__ void mfma_compile_check_kernel<fp_f32x4, fp_mfma_16x16x16_f16, 4>(const fp_i16x4*, float*);
template __global__ void mfma_compile_check_kernel<fp_f32x4, fp_mfma_16x16x16_bf16, 4>(const fp_i16x4*, float*);

__global__ void dot2_compile_check_kernel(const uint32_t* a, const uint32_t* b, float* out) {
    const int i = int(threadIdx.x);
    out[i] = fp_dot2_f32_f16(a[i], b[i], out[i]);
}

}  // namespace flashport::gpu
