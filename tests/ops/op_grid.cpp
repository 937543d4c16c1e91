// Full and pairwise attention test grids.
#include "op_grid.h"

#include <algorithm>
#include <numeric>

#include "support/rng.h"

namespace flashport::test {
namespace {

// The grids are fixed for a given seed (not the run seed): the same cases on every run and machine.
uint64_t next_random(uint64_t& state) { return splitmix64(state); }

constexpr size_t N_AXES = 9;  // impl, dtype, length, head_dim, ratio, mask, layout, lse, isa

std::array<size_t, N_AXES> axis_sizes(const GridAxes& a) {
    return {a.impls.size(),  a.dtypes.size(),  a.lengths.size(), a.head_dims.size(), a.gqa_ratios.size(),
            a.masks.size(),  a.layouts.size(), a.lse.size(),     a.cpu_isas.size()};
}

AttentionCase case_at(const GridAxes& a, const std::array<size_t, N_AXES>& v) {
    return grid_case(a.impls[v[0]], a.dtypes[v[1]], a.lengths[v[2]], a.head_dims[v[3]], a.gqa_ratios[v[4]],
                     a.masks[v[5]], a.layouts[v[6]], a.lse[v[7]], a.cpu_isas[v[8]], a.device);
}

}  // namespace

const char* mask_name(Mask mask) {
    switch (mask) {
        case Mask::NONE: return "none";
        case Mask::CAUSAL: return "causal";
        case Mask::WINDOW: return "window";
        case Mask::CAUSAL_WINDOW: return "causal+window";
    }
    return "?";
}

AttentionCase grid_case(AttentionImpl impl, DType dtype, LengthPair len, int64_t head_dim, int64_t ratio, Mask mask,
                        Layout layout, bool lse, const std::string& cpu_isa, Device device) {
    AttentionCase c;
    const int64_t work = len.q_len * len.kv_len;
    c.batch = work <= 10000 ? 2 : 1;
    c.n_kv_heads = work <= 100000 ? 2 : 1;
    c.n_heads = ratio * c.n_kv_heads;
    c.q_len = len.q_len;
    c.kv_len = len.kv_len;
    c.head_dim = head_dim;
    c.dtype = dtype;
    c.impl = impl;
    c.causal = mask == Mask::CAUSAL || mask == Mask::CAUSAL_WINDOW;
    c.window_left = mask == Mask::WINDOW || mask == Mask::CAUSAL_WINDOW ? len.kv_len / 4 : -1;
    c.layout = layout;
    c.lse = lse;
    c.cpu_isa = cpu_isa;
    c.device = device;
    return c;
}

std::vector<AttentionCase> full_grid(const GridAxes& a) {
    const auto n = axis_sizes(a);
    std::vector<AttentionCase> cases;
    uint64_t rng = 0x5eed;
    std::array<size_t, N_AXES> v{};
    for (v[0] = 0; v[0] < n[0]; ++v[0])
        for (v[1] = 0; v[1] < n[1]; ++v[1])
            for (v[2] = 0; v[2] < n[2]; ++v[2])
                for (v[3] = 0; v[3] < n[3]; ++v[3])
                    for (v[4] = 0; v[4] < n[4]; ++v[4])
                        for (v[5] = 0; v[5] < n[5]; ++v[5]) {
                            for (size_t ax = 6; ax < N_AXES; ++ax) v[ax] = size_t(next_random(rng) % n[ax]);
                            cases.push_back(case_at(a, v));
                        }
    return cases;
}

std::vector<AttentionCase> pairwise_grid(const GridAxes& a, uint64_t seed) {
    const auto n = axis_sizes(a);
    for (size_t x : n)
        if (x == 0) return {};
    // covered[x][y][vx * n[y] + vy] for axes x < y
    std::vector<std::vector<std::vector<char>>> covered(N_AXES, std::vector<std::vector<char>>(N_AXES));
    size_t uncovered = 0;
    for (size_t x = 0; x < N_AXES; ++x)
        for (size_t y = x + 1; y < N_AXES; ++y) {
            covered[x][y].assign(n[x] * n[y], 0);
            uncovered += n[x] * n[y];
        }
    auto is_covered = [&](size_t x, size_t vx, size_t y, size_t vy) {
        return x < y ? covered[x][y][vx * n[y] + vy] != 0 : covered[y][x][vy * n[x] + vx] != 0;
    };
    constexpr size_t UNSET = ~size_t(0);
    // New pairs a (partial) row would cover.
    auto gain = [&](const std::array<size_t, N_AXES>& row) {
        size_t g = 0;
        for (size_t x = 0; x < N_AXES; ++x)
            for (size_t y = x + 1; y < N_AXES; ++y)
                if (row[x] != UNSET && row[y] != UNSET && !is_covered(x, row[x], y, row[y])) ++g;
        return g;
    };

    uint64_t rng = seed;
    std::vector<AttentionCase> cases;
    while (uncovered > 0) {
        // The uncovered pairs, to seed each candidate row with one of them.
        std::vector<std::array<size_t, 4>> open;
        for (size_t x = 0; x < N_AXES; ++x)
            for (size_t y = x + 1; y < N_AXES; ++y)
                for (size_t vx = 0; vx < n[x]; ++vx)
                    for (size_t vy = 0; vy < n[y]; ++vy)
                        if (!covered[x][y][vx * n[y] + vy]) open.push_back({x, vx, y, vy});

        std::array<size_t, N_AXES> best{};
        size_t best_gain = 0;
        for (int candidate = 0; candidate < 40; ++candidate) {
            std::array<size_t, N_AXES> row;
            row.fill(UNSET);
            const auto& seed_pair = open[next_random(rng) % open.size()];
            row[seed_pair[0]] = seed_pair[1];
            row[seed_pair[2]] = seed_pair[3];
            std::array<size_t, N_AXES> order;
            std::iota(order.begin(), order.end(), size_t(0));
            for (size_t i = N_AXES - 1; i > 0; --i) std::swap(order[i], order[next_random(rng) % (i + 1)]);
            for (size_t ax : order) {
                if (row[ax] != UNSET) continue;
                size_t pick = 0, pick_gain = 0, ties = 0;
                for (size_t val = 0; val < n[ax]; ++val) {
                    row[ax] = val;
                    const size_t g = gain(row);
                    if (g > pick_gain || val == 0) {
                        pick = val, pick_gain = g, ties = 1;
                    } else if (g == pick_gain && next_random(rng) % ++ties == 0) {
                        pick = val;  // reservoir choice among equally good values
                    }
                }
                row[ax] = pick;
            }
            const size_t g = gain(row);
            if (g > best_gain) best = row, best_gain = g;
        }
        for (size_t x = 0; x < N_AXES; ++x)
            for (size_t y = x + 1; y < N_AXES; ++y) covered[x][y][best[x] * n[y] + best[y]] = 1;
        uncovered -= best_gain;
        cases.push_back(case_at(a, best));
    }
    return cases;
}

std::vector<AttentionCase> nan_cases(AttentionImpl impl, const std::vector<DType>& dtypes, Device device) {
    std::vector<AttentionCase> cases;
    for (DType dtype : dtypes)
        for (NanAt at : {NanAt::Q, NanAt::K, NanAt::V})
            for (bool decode : {false, true}) {
                AttentionCase c;
                c.impl = impl, c.dtype = dtype, c.device = device, c.nan_at = at, c.lse = true;
                c.batch = 2, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 64;
                c.q_len = decode ? 1 : 70, c.kv_len = decode ? 300 : 150, c.causal = !decode;
                cases.push_back(c);
            }
    return cases;
}

}  // namespace flashport::test
