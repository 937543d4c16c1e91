// Hopper's tensor memory accelerator (TMA) as the sm_90a kernels call it (issue 17, item 1): one thread
// asks for a whole box of a 4-D tensor (e.g. 64 head-dim columns x 128 keys of one head of one
// sequence) to be copied from global into shared memory, and the copy reports its bytes to an mbarrier
// (mbarrier.cuh) when it lands. The copy engine does the address arithmetic, the 128-byte swizzle and
// the zero fill past the tensor's edges, so the threads that used to compute cp.async addresses do not.
// port-check: ignore-file inline-ptx -- CUDA builds only (the sm_90a sources are not in the HIP build)
//
// The box's layout is described on the host once per launch (a CUtensorMap of 128 bytes, encoded by the
// driver's cuTensorMapEncodeTiled, reached through the runtime's entry-point query so that nothing links
// libcuda) and passed to the kernel as a __grid_constant__ parameter.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <cstdint>

#include "backends/gpu/mbarrier.cuh"

namespace flashport::gpu::nvidia_only {

// Tells the barrier to expect `bytes` more bytes of TMA copies in its current phase, without arriving: a
// producer that learns a tile's boxes one at a time (a paged tile's blocks, some of which it may skip)
// declares each box's bytes as it asks for it, and arrives once after the last.
__device__ __forceinline__ void mbarrier_expect_tx(uint64_t* bar, uint32_t bytes) {
#if FP_HAS_WGMMA
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(smem_address(bar)), "r"(bytes)
                 : "memory");
#else
    (void)bar, (void)bytes;
#endif
}

// The box of `map` at coordinates (c0 innermost .. c3) into shared memory at dst (1024-byte aligned for
// the 128-byte swizzle, so that the swizzle's pattern is the address bits' one), reported to bar.
__device__ __forceinline__ void tma_load_4d(void* dst, const CUtensorMap& map, uint64_t* bar, int c0, int c1, int c2,
                                            int c3) {
#if FP_HAS_WGMMA
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
        "%5}], [%6];\n" ::"r"(smem_address(dst)),
        "l"(reinterpret_cast<uint64_t>(&map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_address(bar))
        : "memory");
#else
    (void)dst, (void)map, (void)bar, (void)c0, (void)c1, (void)c2, (void)c3;
#endif
}

// A 4-D tensor of 16-bit values (dims innermost first; strides in elements for dims 1-3) with boxes of
// `box` elements in the 128-byte swizzle, zeros past every edge. False, with nothing encoded, where TMA
// cannot take it (the driver has no entry point, a stride or the base is not a multiple of 16 bytes, a
// size is out of range): the caller then copies another way.
inline bool encode_tma_4d(CUtensorMap& map, const void* base, const int64_t (&dims)[4], const int64_t (&strides)[3],
                          const uint32_t (&box)[4]) {
    static const auto encode = [] {
        void* fn = nullptr;
        cudaDriverEntryPointQueryResult found{};
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) !=
                cudaSuccess ||
            found != cudaDriverEntryPointSuccess)
            fn = nullptr;
        return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
    }();
    if (!encode || reinterpret_cast<uintptr_t>(base) % 16 != 0) return false;
    cuuint64_t global_dims[4], global_strides[3];
    for (int i = 0; i < 4; ++i) {
        if (dims[i] < 1 || dims[i] > (int64_t(1) << 32)) return false;
        global_dims[i] = cuuint64_t(dims[i]);
    }
    for (int i = 0; i < 3; ++i) {
        // A dim of one is never stepped over: any valid stride serves (a view may carry 0 there).
        const int64_t bytes = dims[i + 1] == 1 ? 16 : strides[i] * 2;
        if (bytes <= 0 || bytes % 16 != 0 || bytes >= (int64_t(1) << 40)) return false;
        global_strides[i] = cuuint64_t(bytes);
    }
    const cuuint32_t element_strides[4] = {1, 1, 1, 1};
    const cuuint32_t boxes[4] = {box[0], box[1], box[2], box[3]};
    return encode(&map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 4, const_cast<void*>(base), global_dims, global_strides, boxes,
                  element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace flashport::gpu::nvidia_only
