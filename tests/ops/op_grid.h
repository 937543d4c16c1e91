// Test grids for the attention harness: the full Cartesian product of a few axes, and a pairwise
// covering selection (every pair of values of any two axes appears in at least one case), which is
// how a small CI subset still exercises every length, head dim, dtype, flag... in combination.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "op_harness.h"

namespace flashport::test {

enum class Mask : uint8_t { NONE, CAUSAL, WINDOW, CAUSAL_WINDOW };
const char* mask_name(Mask mask);

struct LengthPair {
    int64_t q_len, kv_len;
};

// The values each axis takes. Batch, head counts and the window size are derived from the lengths
// (see grid_case) so big problems stay affordable for the float64 reference.
struct GridAxes {
    std::vector<AttentionImpl> impls;
    std::vector<DType> dtypes;
    std::vector<LengthPair> lengths;
    std::vector<int64_t> head_dims;
    std::vector<int64_t> gqa_ratios;  // n_heads / n_kv_heads
    std::vector<Mask> masks;
    std::vector<Layout> layouts;
    std::vector<bool> lse;
    std::vector<std::string> cpu_isas{""};
    Device device = Device::cpu();
};

// The case for one value of each axis:
//   batch      2 when q_len · kv_len <= 10^4, else 1
//   n_kv_heads 2 when q_len · kv_len <= 10^5, else 1; n_heads = ratio · n_kv_heads
//   window     kv_len / 4 (0 for kv_len < 4: only the aligned key) for the WINDOW masks
AttentionCase grid_case(AttentionImpl impl, DType dtype, LengthPair len, int64_t head_dim, int64_t ratio, Mask mask,
                        Layout layout, bool lse, const std::string& cpu_isa, Device device);

// Every combination of impl × dtype × length × head_dim × ratio × mask. Layout, LSE and ISA are not
// multiplied in (that would be ~24× more); each case draws them from a fixed-seed generator, so every
// value still meets every other axis's values many times over, without lining up with any axis.
std::vector<AttentionCase> full_grid(const GridAxes& axes);

// A greedy (AETG-style) pairwise covering array over all the axes, deterministic for a given seed.
std::vector<AttentionCase> pairwise_grid(const GridAxes& axes, uint64_t seed = 1);

// NaN propagation cases (op_harness.h's NanAt): one NaN planted in Q, K or V of small problems that
// straddle the tiles, causal (so a NaN key has rows on both sides of it) and single-row decode-like,
// with LSE, for each dtype.
std::vector<AttentionCase> nan_cases(AttentionImpl impl, const std::vector<DType>& dtypes, Device device);

}  // namespace flashport::test
