// The CPU attention micro-kernels, one table per instruction set. kernels/tile_kernels.inc is
// compiled once per ISA (isa_*.cpp) and cpu_kernels.cpp picks the best table the CPU supports.
//
// All operands are fp32 in packed, padded tiles so the kernels have no tails: rows are a multiple of
// TILE_MR, and column counts (keys in a tile, padded head_dim) a multiple of the vector width.
#pragma once

#include <cstdint>
#include <string>

namespace flashport::cpu {

constexpr int TILE_MR = 4;  // query rows per register block

struct TileKernels {
    const char* isa;  // "avx512", "avx2" or "generic"
    int vec;          // floats per vector

    // S[r][c] = Σ_d Q[r][d] · Kt[d][c]        (Kt is K transposed: [depth][cols])
    void (*qk)(const float* q, int64_t ldq, const float* kt, int64_t ldkt, float* s, int64_t lds, int rows, int cols,
               int depth);
    // One online-softmax step over a tile of scores in log2 units (masked entries are -inf). Per row:
    // m_new = max(m, max_c S), alpha = 2^(m - m_new), S ← 2^(S - m_new), l ← alpha·l + Σ_c S.
    // A row with no finite score yet keeps m = -inf, gets P = 0 and alpha = 1.
    void (*softmax_step)(float* s, int64_t lds, int rows, int cols, float* m, float* l, float* alpha);
    // O[r][:dp] ← alpha[r] · O[r][:dp] + Σ_c P[r][c] · V[c][:dp]
    void (*pv)(const float* p, int64_t ldp, const float* v, int64_t ldv, float* o, int64_t ldo, const float* alpha,
               int rows, int cols, int dp);
    // x[i] ← x[i] · mul for i < n (row normalisation in the naive path)
    void (*scale)(float* x, int64_t n, float mul);
};

// The best table for this CPU. FLASHPORT_CPU_ISA=generic|avx2|avx512 picks a lower one (tests cover
// every table this CPU can run); asking for one the CPU lacks is an error.
const TileKernels& tile_kernels();
// The table for one ISA, or nullptr when this CPU or build can't run it.
const TileKernels* tile_kernels_for(const std::string& isa);

}  // namespace flashport::cpu
