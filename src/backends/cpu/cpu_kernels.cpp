// Picks the tile-kernel table for this CPU at run time, so one binary runs on any x86-64 machine.
#include <cstdlib>

#include "backends/cpu/kernels/tile_kernels.h"
#include "flashport/error.h"

namespace flashport::cpu {

extern const TileKernels tile_kernels_generic;
#if defined(__x86_64__)
extern const TileKernels tile_kernels_avx2;
extern const TileKernels tile_kernels_avx512;
#endif

const TileKernels* tile_kernels_for(const std::string& isa) {
    if (isa == "generic") return &tile_kernels_generic;
#if defined(__x86_64__)
    __builtin_cpu_init();
    const bool has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (isa == "avx2") return has_avx2 ? &tile_kernels_avx2 : nullptr;
    if (isa == "avx512")
        return has_avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                       __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq")
                   ? &tile_kernels_avx512
                   : nullptr;
#endif
    return nullptr;
}

const TileKernels& tile_kernels() {
    // Not cached: tests switch FLASHPORT_CPU_ISA between cases, and the lookup is cheap next to a call.
    if (const char* want = std::getenv("FLASHPORT_CPU_ISA"); want && *want) {
        const TileKernels* k = tile_kernels_for(want);
        FP_CHECK(k, "FLASHPORT_CPU_ISA=", want, " is not available on this CPU or build (use generic, avx2 or avx512)");
        return *k;
    }
    for (const char* isa : {"avx512", "avx2"})
        if (const TileKernels* k = tile_kernels_for(isa)) return *k;
    return tile_kernels_generic;
}

}  // namespace flashport::cpu
