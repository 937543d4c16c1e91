// Shared-memory mbarriers as the sm_90a kernels use them (issue 17, item 1): a barrier object in shared
// memory that completes a phase when its expected count of arrivals has come, and that threads wait on
// by the phase's parity. Unlike __syncthreads, the threads that arrive and the threads that wait can be
// different ones, and cp.async copies can arrive by themselves as they complete, so a warpgroup waits
// for exactly the data it reads and the warps that read it, not for the whole block.
// port-check: ignore-file inline-ptx -- CUDA builds only (the sm_90a sources are not in the HIP build)
#pragma once

#include <cstdint>

#include "backends/gpu/wgmma.cuh"  // FP_HAS_WGMMA: compiled into machine code for sm_90a only

namespace flashport::gpu::nvidia_only {

__device__ __forceinline__ uint32_t smem_address(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// One thread initialises; a __syncthreads() must follow before anyone arrives or waits.
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, unsigned count) {
#if FP_HAS_WGMMA
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_address(bar)), "r"(count) : "memory");
#else
    (void)bar, (void)count;
#endif
}

// One arrival of the calling thread.
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
#if FP_HAS_WGMMA
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_address(bar)) : "memory");
#else
    (void)bar;
#endif
}

// One arrival of the calling thread, made when all the cp.async copies it has issued so far complete
// (noinc: the arrival counts against the barrier's expected count, so every copying thread is one of
// the count).
__device__ __forceinline__ void cp_async_mbarrier_arrive(uint64_t* bar) {
#if FP_HAS_WGMMA
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_address(bar)) : "memory");
#else
    (void)bar;
#endif
}

// Waits until the phase of the given parity (0 for the first phase, 1 for the second, ...) completes.
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
#if FP_HAS_WGMMA
    asm volatile(
        "{\n.reg .pred done;\nwait_again:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra wait_again;\n}\n" ::"r"(smem_address(bar)),
        "r"(parity)
        : "memory");
#else
    (void)bar, (void)parity;
#endif
}

// Named hardware barriers (ids 1-15; __syncthreads is 0) over `threads` threads, a multiple of the warp
// size: sync waits until that many threads have arrived (itself included), arrive counts the calling
// warp in without waiting. Two warpgroups take turns through a pair of them.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// A warpgroup's registers a thread, moved between warpgroups of a running block (sm_90a): dec gives
// registers back to the SM's pool, inc waits until the pool has them. All 128 threads of the warpgroup
// execute it together; N is a multiple of 8 in [24, 256]. A producer warpgroup that only copies keeps
// few, and the consumers that hold the accumulators take the rest.
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
    static_assert(N % 8 == 0 && N >= 24 && N <= 256);
#if FP_HAS_WGMMA
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
    static_assert(N % 8 == 0 && N >= 24 && N <= 256);
#if FP_HAS_WGMMA
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}

}  // namespace flashport::gpu::nvidia_only
