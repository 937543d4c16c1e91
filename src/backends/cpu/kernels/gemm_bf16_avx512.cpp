// gemm_bf16 (gemm_bf16.h) for AVX512-BF16. The build gives this file -mavx512f -mavx512bw
// -mavx512bf16; has_gemm_bf16 checks the CPU before anything here runs.
#include <immintrin.h>

#include "backends/cpu/kernels/gemm_bf16.h"

namespace flashport::cpu {
namespace {

constexpr int MR = 4, NR = 4;  // tokens × rows per register block: 16 accumulators + 4 w + 1 x vectors

inline __m512bh load_bf16(const uint16_t* p, __mmask32 mask) {
    return (__m512bh)_mm512_maskz_loadu_epi16(mask, p);
}

typedef float v16f __attribute__((vector_size(64)));

// The sum of the 16 lanes by swapping halves, quarters, pairs and neighbours, written with vector
// shuffles that GCC (12+) and clang both spell __builtin_shufflevector: GCC 12's
// _mm512_reduce_add_ps and _mm512_shuffle_f32x4 trip -Werror=uninitialized inside its own header.
inline float lane_sum(__m512 acc) {
    v16f v = (v16f)acc;
    v += __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
    v += __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11);
    v += __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
    v += __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
    return v[0];
}

// One block of MT tokens × NT rows over the whole k: 32 bf16 of each row per step, the last step
// masked (zeros add nothing), then one lane sum per output.
template <int MT, int NT>
void block(const uint16_t* x, int64_t ldx, const uint16_t* w, int64_t ldw, int64_t k, float* y, int64_t ldy) {
    __m512 acc[MT][NT];
    for (int t = 0; t < MT; ++t)
        for (int n = 0; n < NT; ++n) acc[t][n] = _mm512_setzero_ps();
    for (int64_t i = 0; i < k; i += 32) {
        const __mmask32 mask = k - i >= 32 ? ~__mmask32(0) : __mmask32((uint32_t(1) << (k - i)) - 1);
        __m512bh wv[NT];
        for (int n = 0; n < NT; ++n) wv[n] = load_bf16(w + n * ldw + i, mask);
        for (int t = 0; t < MT; ++t) {
            const __m512bh xv = load_bf16(x + t * ldx + i, mask);
            for (int n = 0; n < NT; ++n) acc[t][n] = _mm512_dpbf16_ps(acc[t][n], xv, wv[n]);
        }
    }
    for (int t = 0; t < MT; ++t)
        for (int n = 0; n < NT; ++n) y[t * ldy + n] = lane_sum(acc[t][n]);
}

using BlockFn = void (*)(const uint16_t*, int64_t, const uint16_t*, int64_t, int64_t, float*, int64_t);

template <int MT>
constexpr BlockFn pick(int nt) {
    return nt == 1 ? block<MT, 1> : nt == 2 ? block<MT, 2> : nt == 3 ? block<MT, 3> : block<MT, 4>;
}
constexpr BlockFn pick(int mt, int nt) {
    return mt == 1 ? pick<1>(nt) : mt == 2 ? pick<2>(nt) : mt == 3 ? pick<3>(nt) : pick<4>(nt);
}

}  // namespace

bool has_gemm_bf16() {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512bf16");
}

void gemm_bf16(const uint16_t* x, int64_t ldx, int64_t tokens, const uint16_t* w, int64_t ldw, int64_t rows, int64_t k,
               float* y, int64_t ldy) {
    for (int64_t t0 = 0; t0 < tokens; t0 += MR) {
        const int mt = int(tokens - t0 < MR ? tokens - t0 : MR);
        for (int64_t n0 = 0; n0 < rows; n0 += NR) {
            const int nt = int(rows - n0 < NR ? rows - n0 : NR);
            pick(mt, nt)(x + t0 * ldx, ldx, w + n0 * ldw, ldw, k, y + t0 * ldy + n0, ldy);
        }
    }
}

}  // namespace flashport::cpu
