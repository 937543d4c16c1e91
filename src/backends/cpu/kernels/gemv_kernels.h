// The CPU matmul micro-kernels, one table per instruction set, built like the attention tile
// kernels: gemv_kernels.inc is compiled once per ISA (gemv_*.cpp, each with its ISA's flags) and
// backends/cpu/matmul.cpp picks the table matching tile_kernels().isa, so FLASHPORT_CPU_ISA selects
// both families at once.
#pragma once

#include <cstdint>

namespace flashport::cpu {

struct GemvKernels {
    const char* isa;  // "avx512", "avx2" or "generic"

    // y[t·ldy + n] = Σ_i x[t·ldx + i] · w[n·ldw + i]   for t < tokens (1..8), n < rows, i < k.
    // x is fp32; w is read in its own dtype (indexed by DType: F32, F16, BF16) and widened in
    // registers, so the weight streams from memory once per call at 2 bytes an element for bf16.
    void (*gemv[3])(const float* x, int64_t ldx, int tokens, const void* w, int64_t ldw, int64_t rows, int64_t k,
                    float* y, int64_t ldy);
    // dst[i] = float(src[i]) for i < n, src in the table's dtype (weight tiles for the BLAS path).
    void (*to_f32[3])(float* dst, const void* src, int64_t n);
};

// The table for an ISA name from TileKernels::isa; nullptr if this build lacks it.
const GemvKernels* gemv_kernels_for(const char* isa);

}  // namespace flashport::cpu
