// NVIDIA's warp-level matrix instruction as the kernels call it: mma.sync m16n8k16 with fp16 or bf16
// inputs and fp32 accumulators (sm_80+). Used by the tensor-core flash and paged decode kernels
// (attention_flash_mma.cuh) and the matrix-core GEMV (linear_mma.cu).
// port-check: ignore-file inline-ptx -- CUDA builds only; HIP's matrix instructions are in mfma.cuh
// Fragment layouts (PTX ISA, "mma.m16n8k16"), g = lane / 4, c = lane % 4, each register two 16-bit
// values, the lower k or column in the low half:
//   A (16 x 16, row-major): a[0] row g, k 2c..2c+1; a[1] row g+8, same k; a[2] row g, k 2c+8..2c+9;
//     a[3] row g+8, k 2c+8..2c+9
//   B (16 x 8):             b0 k 2c..2c+1, column g; b1 k 2c+8..2c+9, column g
//   C (16 x 8, fp32):       c[0], c[1] row g, columns 2c, 2c+1; c[2], c[3] row g+8, same columns
#pragma once

#include "backends/gpu/common.cuh"

#if !defined(FLASHPORT_GPU_CUDA)
#error "mma_sync.cuh is NVIDIA-only"
#endif

namespace flashport::gpu::nvidia_only {

// c += a b for one m16n8k16 tile: a in A-fragment order, b0/b1 the two B registers.
template <DType DT>
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if FP_HAS_MMA_SYNC
    if constexpr (DT == DType::F16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    (void)c, (void)a, (void)b0, (void)b1;
    __trap();
#endif
}

}  // namespace flashport::gpu::nvidia_only
