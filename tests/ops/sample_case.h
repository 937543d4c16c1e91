// sample (flashport/sample.h): the cases the CPU test (test_sample.cpp) and the GPU test
// (tests/gpu/test_sample_gpu.cpp) run, and the float64 check that tells a rounding difference from
// a wrong token.
//
// A case is [rows, vocab] logits in one dtype (rows padded by 3 elements), each row with one of
// sample_settings()'s settings (rotating through the list, so every setting meets every logit shape)
// and its own seed and counter. Logit shapes, by row: normal with std 2 (a few tokens dominate), std
// 0.05 (near-uniform, as a random-weight model gives: ~all tokens stay in a 0.95 nucleus), and
// quarter-steps (many exact ties, at the k-th score and at the top-p boundary); 5% of the entries
// of the first and last shapes are -inf (so vocab 1025 has near-uniform rows of > 1024 candidates). Rows using the
// penalty read their own seen set, a random 10% of the vocabulary.
//
// The device sums in fp32 and the CPU in double, so a GPU token may differ from the CPU's where u
// or a filter boundary lies within that rounding. classify_sample() accepts a different token only
// when, in float64, the top-p cut (mass above the last kept token against top_p · total), a kept
// token's exp(s - m) against min_p, or a cumulative sum of the draw against u · total lies within
// SAMPLE_NEAR_TOL of the total mass, and the token passed top-k (which is exact on both sides).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/cpu/sample.h"
#include "flashport/sample.h"
#include "ops/ops_test_util.h"

namespace flashport::test {

// fp32 sums of up to 152k terms (in segments of ~300, then a tree) against double ones: ~1e-6 of the
// total in practice; 1e-5 leaves a margin and still calls only a tiny share of draws "near".
constexpr double SAMPLE_NEAR_TOL = 1e-5;

struct SampleSetting {
    std::string name;
    SampleParams p;  // seed, counter and seen_row are set per row
    bool seen = false;
};

inline std::vector<SampleSetting> sample_settings(int64_t vocab) {
    auto s = [](float t, int32_t k, float top_p, float min_p, float pen) {
        SampleParams p;
        p.temperature = t;
        p.top_k = k;
        p.top_p = top_p;
        p.min_p = min_p;
        p.repetition_penalty = pen;
        return p;
    };
    const int32_t v = int32_t(vocab);
    return {
        {"greedy", s(0, 0, 1, 0, 1)},
        {"greedy_penalty", s(0, 0, 1, 0, 1.3f), true},
        {"temperature", s(0.7f, 0, 1, 0, 1)},
        {"top_k1", s(1, 1, 1, 0, 1)},
        {"top_k20", s(1, 20, 1, 0, 1)},
        {"top_k_vocab", s(1.2f, v, 1, 0, 1)},
        {"top_p0.5", s(1, 0, 0.5f, 0, 1)},
        {"top_p0.8", s(1, 0, 0.8f, 0, 1)},
        {"top_p0.95", s(1, 0, 0.95f, 0, 1)},
        {"top_p1", s(1.3f, 0, 1, 0, 1)},
        {"top_p0", s(1, 0, 0, 0, 1)},
        {"min_p0.1", s(1, 0, 1, 0.1f, 1)},
        {"penalty", s(1, 0, 1, 0, 1.3f), true},
        {"qwen", s(0.7f, 20, 0.8f, 0, 1.05f), true},
        {"top_k50_p0.9_min_p0.05", s(0.9f, 50, 0.9f, 0.05f, 1.1f), true},
        {"top_p0.9_min_p0.02", s(1, 0, 0.9f, 0.02f, 0.8f), true},
        {"top_k2000_p0.95", s(1, 2000, 0.95f, 0, 1)},
    };
}

struct SampleData {
    std::unique_ptr<HostTensor> x;  // [rows, vocab], rows padded by 3 elements
    std::vector<SampleParams> params;
    std::vector<std::string> setting;           // per row, for messages
    std::vector<uint32_t> seen;                 // [rows, words]: row r is row r's seen set (if it uses one)
    std::vector<std::vector<int32_t>> context;  // the same sets as id lists (engine::Sampler's form)
    int64_t words = 0;
    SampleData(DType dt, int64_t rows, int64_t vocab)
        : x(std::make_unique<HostTensor>(dt, std::vector<int64_t>{rows, vocab}, 3)) {}
    int64_t rows() const { return x->view.dim(0); }
    int64_t vocab() const { return x->view.dim(1); }
    SeenSets seen_sets() { return {seen.data(), rows(), words, Device::cpu()}; }
    std::vector<float> row(int64_t r) const {
        std::vector<float> v(static_cast<size_t>(vocab()));
        for (int64_t i = 0; i < vocab(); ++i) v[size_t(i)] = float(x->get(r * vocab() + i));
        return v;
    }
};

// Rows use settings[(r + offset) % size]; seeds and counters come from rng.
inline SampleData make_sample_data(Rng& rng, DType dt, int64_t rows, int64_t vocab, size_t offset,
                                   const std::vector<SampleSetting>& settings) {
    SampleData d(dt, rows, vocab);
    d.words = (vocab + 31) / 32;
    d.seen.assign(size_t(rows * d.words), 0);
    d.context.resize(size_t(rows));
    const double inf = std::numeric_limits<double>::infinity();
    for (int64_t r = 0; r < rows; ++r) {
        const int shape = int((r + int64_t(offset)) % 3);  // with 17 settings: every pair in 51 rows
        for (int64_t i = 0; i < vocab; ++i) {
            double v = shape == 0   ? 2.0 * rng.normal()
                       : shape == 1 ? 0.05 * rng.normal()
                                    : std::round(4 * rng.normal()) / 4;
            if (shape != 1 && vocab > 1 && rng.uniform() < 0.05) v = -inf;
            d.x->set(r * vocab + i, v);
        }
        const SampleSetting& s = settings[size_t(r + int64_t(offset)) % settings.size()];
        SampleParams p = s.p;
        p.seed = rng.next();
        p.counter = int64_t(rng.below(1 << 20));
        if (s.seen) {
            p.seen_row = int32_t(r);
            for (int64_t i = 0; i < vocab; ++i)
                if (rng.uniform() < 0.1) {
                    d.seen[size_t(r * d.words + i / 32)] |= uint32_t(1) << (i % 32);
                    d.context[size_t(r)].push_back(int32_t(i));
                    d.context[size_t(r)].push_back(int32_t(i));  // twice: the penalty applies once
                }
        }
        d.params.push_back(p);
        d.setting.push_back(s.name);
    }
    return d;
}

enum class SampleMatch { SAME, NEAR, WRONG };

// Whether `got` is an acceptable token for row r of d when the CPU op chose `want` (see the file's
// comment). Bad rows (ids < 0) must match exactly.
inline SampleMatch classify_sample(const SampleData& d, int64_t r, int32_t got, int32_t want) {
    if (got == want) return SampleMatch::SAME;
    if (want < 0 || got < 0 || got >= d.vocab()) return SampleMatch::WRONG;
    const SampleParams& p = d.params[size_t(r)];
    std::vector<float> s = d.row(r);
    if (p.repetition_penalty != 1.0f && p.seen_row >= 0)
        for (int64_t i = 0; i < d.vocab(); ++i)
            if ((d.seen[size_t(p.seen_row * d.words + i / 32)] >> (i % 32)) & 1u)
                s[size_t(i)] = cpu::penalised(s[size_t(i)], p.repetition_penalty);
    if (p.temperature == 0.0f) return SampleMatch::WRONG;  // greedy is exact
    if (p.temperature != 1.0f)
        for (float& v : s) v /= p.temperature;
    std::vector<int32_t> c;  // top-k survivors, sorted by (score desc, id asc)
    for (int64_t i = 0; i < d.vocab(); ++i)
        if (s[size_t(i)] != -std::numeric_limits<float>::infinity()) c.push_back(int32_t(i));
    std::sort(c.begin(), c.end(), [&](int32_t a, int32_t b) {
        return s[size_t(a)] > s[size_t(b)] || (s[size_t(a)] == s[size_t(b)] && a < b);
    });
    if (p.top_k > 0 && size_t(p.top_k) < c.size()) {
        const float kth = s[size_t(c[size_t(p.top_k - 1)])];
        while (s[size_t(c.back())] < kth) c.pop_back();
    }
    if (std::find(c.begin(), c.end(), got) == c.end()) return SampleMatch::WRONG;
    const double m = s[size_t(c[0])];
    auto e = [&](int32_t id) { return std::exp(double(s[size_t(id)]) - m); };
    double total = 0.0;
    for (int32_t id : c) total += e(id);
    bool near = false;
    size_t keep = c.size();
    if (p.top_p < 1.0f && c.size() > 1) {
        const double target = double(p.top_p) * total;
        double above = 0.0;
        size_t j = 0;
        for (; j < c.size(); ++j) {
            if (j > 0 && above >= target) break;
            above += e(c[j]);
        }
        keep = j;
        const double before = above - e(c[keep - 1]);  // the mass above the last kept token
        near |=
            std::abs(above - target) <= SAMPLE_NEAR_TOL * total || std::abs(before - target) <= SAMPLE_NEAR_TOL * total;
    }
    c.resize(keep);
    if (p.min_p > 0.0f)
        for (int32_t id : c) near |= std::abs(e(id) - double(p.min_p)) <= SAMPLE_NEAR_TOL;
    if (p.min_p > 0.0f && c.size() > 1) std::erase_if(c, [&](int32_t id) { return e(id) < double(p.min_p); });
    std::sort(c.begin(), c.end());
    double w = 0.0;
    for (int32_t id : c) w += e(id);
    const double u = sample_uniform(p.seed, p.counter) * w;
    double cum = 0.0;
    for (int32_t id : c) {
        cum += e(id);
        near |= std::abs(cum - u) <= SAMPLE_NEAR_TOL * w;
    }
    return near ? SampleMatch::NEAR : SampleMatch::WRONG;
}

// The tokens `ids` (n draws) against softmax(kept) (scores, -inf: filtered, must never appear): Pearson's
// chi-square below its 99.9% quantile (Wilson-Hilferty), so a right draw fails for 1 seed in 1000 and
// a wrong set, wrong weights or a biased u fail by far.
inline void expect_frequencies(const std::vector<int32_t>& ids, const std::vector<float>& kept, int n) {
    float m = -std::numeric_limits<float>::infinity();
    for (float v : kept) m = std::max(m, v);
    std::vector<double> prob(kept.size());
    double z = 0.0;
    for (size_t i = 0; i < kept.size(); ++i) z += prob[i] = std::isinf(kept[i]) ? 0.0 : std::exp(double(kept[i]) - m);
    std::vector<int> counts(kept.size());
    for (int32_t id : ids) {
        ASSERT_TRUE(id >= 0 && size_t(id) < kept.size()) << id;
        ++counts[size_t(id)];
    }
    double chi2 = 0.0;
    int df = -1;
    for (size_t i = 0; i < kept.size(); ++i) {
        if (prob[i] == 0.0) {
            EXPECT_EQ(counts[i], 0) << "token " << i << " was filtered out but drawn";
            continue;
        }
        ++df;
        const double e = prob[i] / z * n;
        chi2 += (counts[i] - e) * (counts[i] - e) / e;
    }
    ASSERT_GE(df, 1);
    const double a = 2.0 / (9.0 * df), q = df * std::pow(1.0 - a + 3.0902 * std::sqrt(a), 3.0);
    EXPECT_LT(chi2, q) << df << " degrees of freedom";
}

}  // namespace flashport::test
