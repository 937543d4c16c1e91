// AMD's wave-level matrix instructions emulated on ROCm's HIP CPU Runtime, for tests: the MFMA
// (gfx908/90a/940) and dot2 (gfx906) builtins that mfma.cuh's portable spellings map to. Included only
// by mfma.cuh under FLASHPORT_HIP_CPU; no hardware build sees it. It checks data movement, not speed:
// no AMD GPU was available, and nothing here says how fast the real instructions are.
//
// An MFMA is one operation of the whole 64-lane wave: every lane contributes 4 values of A and 4 of
// B, and every lane receives its own fragment of D = A * B + C. The runtime runs a block's threads as
// fibers on one host thread and implements __shfl by writing each lane's value to a per-warp
// scratchpad (hip::detail::Tile::scratchpad), a block barrier, a read, and a second barrier. The
// emulation uses the same mechanism: each lane publishes its operands, all lanes meet, each lane
// computes its own D elements from the 64 published operand sets, and all meet again before the
// scratchpad can be reused. Like a shuffle, every thread of the block must therefore reach each call
// (vendor/hip_cpu.h logs it as a shuffle step and aborts a test where a thread strays).
//
// Lane layouts (one block, CBSZ = ABID = BLGP = 0), for an M x N x K instruction with M = N and
// G = 64 / M lane groups, each group holding 4 consecutive k:
//   A[i][k]: lane i + M * (k / 4), element k % 4          (i < M, k < K = 4 G)
//   B[k][j]: lane j + N * (k / 4), element k % 4
//   D[i][j]: lane j + N * ((i / 4) % G), register (i % 4) + 4 * (i / (4 G))
// 32x32x8 (G = 2): 16 D registers per lane; 16x16x16 (G = 4): 4. The bf16 `_1k` forms (gfx90a/940)
// have the f16 forms' shapes and layouts. Sources, and the test that reproduces them:
// tests/gpu/test_mfma_emulation.cpp and docs/gpu.md ("MFMA and dot2 emulation").
//
// Arithmetic: products of 16-bit values are exact in float64, the K products and C are summed in
// float64 and rounded once to float. The hardware's internal order and precision are not publicly
// specified; kernels' tests compare against float64 with tolerances, and the layout test uses small
// integers, whose sums are exact in any order.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace fp_hip_cpu {

// Operand and accumulator registers of one lane. Structs rather than GCC vector types: a 64-byte
// vector passed by value changes the x86 ABI without AVX-512 (-Wpsabi), and kernels only index them.
template <typename T, int N>
struct Regs {
    T v[N];
    constexpr T& operator[](int i) { return v[i]; }
    constexpr const T& operator[](int i) const { return v[i]; }
};
using i16x2 = Regs<uint16_t, 2>;  // two fp16 values: a packed 32-bit VGPR, element 0 in bits 15:0
using i16x4 = Regs<uint16_t, 4>;  // four fp16 or bf16 values: a VGPR pair
using f32x4 = Regs<float, 4>;
using f32x16 = Regs<float, 16>;

inline double fp16_value(uint16_t h) {
    const int exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    double v;
    if (exp == 0)
        v = std::ldexp(double(man), -24);  // subnormal
    else if (exp == 31)
        v = man ? NAN : INFINITY;
    else
        v = std::ldexp(double(man | 0x400), exp - 25);
    return (h & 0x8000) ? -v : v;
}
inline double bf16_value(uint16_t h) {
    const uint32_t u = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

// This lane's index in its wave, as the runtime's shuffles compute it (`id` is the fiber's friend,
// found by argument-dependent lookup).
inline uint32_t wave_lane() {
    return id(hip::detail::Fiber::this_fiber()) % warpSize;
}

// D = A * B + C for one M x N x (4 * 64 / M) instruction; `bf16` picks the element format.
template <int M, typename Acc>
inline Acc wave_mfma(const i16x4& a, const i16x4& b, const Acc& c, bool bf16) {
    constexpr int G = 64 / M, K = 4 * G, REGS = M * M / 64;
    static_assert(M * G == 64 && sizeof(Acc) == REGS * sizeof(float), "one block of 64 lanes");
    struct Operands {
        i16x4 a, b;
    };
    step(SHUFFLE);  // the block-uniform barrier/shuffle sequence is checked (vendor/hip_cpu.h)
    const uint32_t lane = wave_lane();
    auto& pad = hip::detail::Tile::scratchpad<Operands>();  // this warp's 64 slots
    pad[lane] = {a, b};
    hip::detail::Tile::this_tile().barrier();
    const auto value = [bf16](uint16_t h) { return bf16 ? bf16_value(h) : fp16_value(h); };
    Acc d;
    const int j = int(lane) % M, group = int(lane) / M;
    for (int r = 0; r < REGS; ++r) {
        const int i = 4 * G * (r / 4) + 4 * group + r % 4;  // the D layout above, inverted
        double sum = c[r];
        for (int k = 0; k < K; ++k) sum += value(pad[i + M * (k / 4)].a[k % 4]) * value(pad[j + M * (k / 4)].b[k % 4]);
        d[r] = float(sum);
    }
    hip::detail::Tile::this_tile().barrier();  // no lane overwrites the pad before all have read it
    return d;
}

// v_dot2_f32_f16 (gfx906): a.lo * b.lo + a.hi * b.hi + c, per lane (no cross-lane traffic).
inline float dot2_f32_f16(uint32_t a, uint32_t b, float c) {
    return float(fp16_value(uint16_t(a)) * fp16_value(uint16_t(b)) +
                 fp16_value(uint16_t(a >> 16)) * fp16_value(uint16_t(b >> 16)) + double(c));
}

}  // namespace fp_hip_cpu
