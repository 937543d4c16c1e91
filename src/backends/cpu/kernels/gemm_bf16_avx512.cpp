// gemm_bf16 (gemm_bf16.h) for AVX512-BF16. The build gives this file -mavx512f -mavx512bw
// -mavx512bf16; has_gemm_bf16 checks the CPU before anything here runs.
//
// Packed-panel GEMM. vdpbf16ps adds, in each of 16 fp32 lanes, the products of one bf16 pair of
// each operand. With the weight packed as [k/2][64 rows][2] (a pair of k for each row, rows along
// the vector), one vector load gives 16 rows' pairs and a broadcast gives one token's pair, so
// every accumulator holds 16 finished outputs: no horizontal sums. Register block: 6 tokens × 4
// vectors (64 rows) = 24 accumulators, 4 weight vectors and 1 broadcast; each step of k loads 4
// vectors + 6 pairs for 24 vdpbf16ps (this VM's Zen 5 issues two 512-bit vdpbf16ps a cycle).
// The panel is packed once per KC pairs of k (64 rows × 128 pairs × 4 bytes = 32 KB, L1) into a
// stack buffer and reused by every token of the call, so packing is O(rows·k) against the
// O(tokens·rows·k) products; nothing is repacked at load time and nothing stays resident.
#include <immintrin.h>

#include <cstring>

#include "backends/cpu/kernels/gemm_bf16.h"

namespace flashport::cpu {
namespace {

constexpr int MR = 6;        // tokens per register block
constexpr int NV = 4;        // vectors of 16 rows per panel: 64 rows
constexpr int PR = NV * 16;  // rows per panel
constexpr int64_t KC = 128;  // pairs of k per packed chunk (a multiple of 16)

// One 16×16 transpose of 32-bit elements (bf16 pairs) in 4 stages: stage h swaps the off-diagonal
// h×h blocks of every 2h×2h block, i.e. swaps bit h of the row and column index; all four make the
// transpose. vpermt2d with constant indices (GCC 12's _mm512_shuffle_i32x4 trips
// -Werror=uninitialized inside its own header).
template <int H>
inline void swap_blocks(__m512i r[16]) {
    alignas(64) static constexpr struct Idx {
        int lo[16], hi[16];
        constexpr Idx() : lo(), hi() {
            for (int j = 0; j < 16; ++j) {
                lo[j] = (j & H) ? 16 + j - H : j;  // a's low blocks, then b's low blocks
                hi[j] = (j & H) ? 16 + j : j + H;  // a's high blocks, then b's high blocks
            }
        }
    } idx;
    const __m512i lo = _mm512_load_si512(idx.lo), hi = _mm512_load_si512(idx.hi);
    for (int i = 0; i < 16; ++i)
        if (!(i & H)) {
            const __m512i a = r[i], b = r[i + H];
            r[i] = _mm512_permutex2var_epi32(a, lo, b);
            r[i + H] = _mm512_permutex2var_epi32(a, hi, b);
        }
}

// panel[p·PR + r] = the pair (w[r][k0 + 2p], w[r][k0 + 2p + 1]) for r < PR, p < (k1 - k0 + 1) / 2
// rounded up to 16; rows ≥ rows and elements ≥ k1 are zeros (masked loads never touch them).
void pack(const uint16_t* w, int64_t ldw, int64_t rows, int64_t k0, int64_t k1, uint32_t* panel) {
    for (int g = 0; g < PR; g += 16)
        for (int64_t kb = k0; kb < k1; kb += 32) {
            const __mmask32 mask = k1 - kb >= 32 ? ~__mmask32(0) : __mmask32((uint32_t(1) << (k1 - kb)) - 1);
            __m512i r[16];
            for (int i = 0; i < 16; ++i)
                r[i] = g + i < rows ? _mm512_maskz_loadu_epi16(mask, w + (g + i) * ldw + kb) : _mm512_setzero_si512();
            swap_blocks<8>(r);
            swap_blocks<4>(r);
            swap_blocks<2>(r);
            swap_blocks<1>(r);
            uint32_t* dst = panel + (kb - k0) / 2 * PR + g;
            for (int p = 0; p < 16; ++p) _mm512_store_si512(dst + p * PR, r[p]);
        }
}

inline __m512bh pair(const uint16_t* x) {  // x[0], x[1] broadcast: vpbroadcastd
    uint32_t v;
    std::memcpy(&v, x, 4);
    return (__m512bh)_mm512_set1_epi32(int(v));
}

// MT tokens × NV vectors of rows over one packed chunk: `full` pairs of x from x, then, when `half`,
// x's last element alone (its partner is past k and may be anything, even NaN). Starts from zero
// on the first chunk and from y after. Only y's first nr rows are read or written (masks; a panel of
// fewer rows computes zero rows and drops them rather than needing narrower blocks).
template <int MT>
void block(const uint16_t* x, int64_t ldx, const uint32_t* panel, int64_t full, bool half, bool first, float* y,
           int64_t ldy, int64_t nr) {
    __mmask16 mask[NV];
    for (int n = 0; n < NV; ++n)
        mask[n] = nr >= 16 * (n + 1) ? 0xFFFF : nr > 16 * n ? __mmask16((1u << (nr - 16 * n)) - 1) : 0;
    __m512 acc[MT][NV];
    for (int t = 0; t < MT; ++t)
        for (int n = 0; n < NV; ++n)
            acc[t][n] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask[n], y + t * ldy + n * 16);
    for (int64_t p = 0; p < full; ++p) {
        const uint32_t* wp = panel + p * PR;
        __m512bh wv[NV];
        for (int n = 0; n < NV; ++n) wv[n] = (__m512bh)_mm512_load_si512(wp + n * 16);
        for (int t = 0; t < MT; ++t) {
            const __m512bh xv = pair(x + t * ldx + 2 * p);
            for (int n = 0; n < NV; ++n) acc[t][n] = _mm512_dpbf16_ps(acc[t][n], xv, wv[n]);
        }
    }
    if (half) {
        const uint32_t* wp = panel + full * PR;
        for (int t = 0; t < MT; ++t) {
            const __m512bh xv = (__m512bh)_mm512_set1_epi32(int(x[t * ldx + 2 * full]));  // high half zero
            for (int n = 0; n < NV; ++n)
                acc[t][n] = _mm512_dpbf16_ps(acc[t][n], xv, (__m512bh)_mm512_load_si512(wp + n * 16));
        }
    }
    for (int t = 0; t < MT; ++t)
        for (int n = 0; n < NV; ++n) _mm512_mask_storeu_ps(y + t * ldy + n * 16, mask[n], acc[t][n]);
}

using BlockFn = void (*)(const uint16_t*, int64_t, const uint32_t*, int64_t, bool, bool, float*, int64_t, int64_t);
constexpr BlockFn blocks[MR] = {block<1>, block<2>, block<3>, block<4>, block<5>, block<6>};

}  // namespace

bool has_gemm_bf16() {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512bf16");
}

void gemm_bf16(const uint16_t* x, int64_t ldx, int64_t tokens, const uint16_t* w, int64_t ldw, int64_t rows, int64_t k,
               float* y, int64_t ldy) {
    if (k <= 0) {
        for (int64_t t = 0; t < tokens; ++t) std::memset(y + t * ldy, 0, sizeof(float) * size_t(rows));
        return;
    }
    alignas(64) uint32_t panel[KC * PR];  // 32 KB of stack per thread
    for (int64_t n0 = 0; n0 < rows; n0 += PR) {
        const int64_t nr = rows - n0 < PR ? rows - n0 : PR;
        // k in chunks of 2·KC: pack the chunk's panel once, then every token block runs over it.
        for (int64_t k0 = 0; k0 < k; k0 += 2 * KC) {
            const int64_t k1 = k - k0 < 2 * KC ? k : k0 + 2 * KC;
            pack(w + n0 * ldw, ldw, nr, k0, k1, panel);
            const int64_t full = (k1 - k0) / 2;
            const bool half = (k1 - k0) % 2 != 0;  // only the last chunk can be odd
            for (int64_t t0 = 0; t0 < tokens; t0 += MR) {
                const int mt = int(tokens - t0 < MR ? tokens - t0 : MR);
                blocks[mt - 1](x + t0 * ldx + k0, ldx, panel, full, half, k0 == 0, y + t0 * ldy + n0, ldy, nr);
            }
        }
    }
}

}  // namespace flashport::cpu
