// The sampling filters and the draw (sample.h), and the `sample` / `mark_seen` ops on the CPU.
#include "backends/cpu/sample.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/ops_cpu.h"
#include "core/counter_rng.h"
#include "flashport/error.h"

namespace flashport::cpu {
namespace {

constexpr float NEG_INF = -std::numeric_limits<float>::infinity();

float max_score(std::span<const float> scores, std::span<const int32_t> candidates) {
    float m = NEG_INF;
    for (int32_t id : candidates) m = std::max(m, scores[size_t(id)]);
    return m;
}

void keep_top_k(std::span<const float> scores, int64_t top_k, std::vector<int32_t>& candidates) {
    const size_t k = size_t(top_k);
    if (k == 0 || k >= candidates.size()) return;
    std::vector<int32_t> tmp = candidates;
    std::nth_element(tmp.begin(), tmp.begin() + ptrdiff_t(k - 1), tmp.end(),
                     [&](int32_t a, int32_t b) { return scores[size_t(a)] > scores[size_t(b)]; });
    const float kth = scores[size_t(tmp[k - 1])];
    // `scores < kth` is removed: ties with the k-th score stay, as in TopKLogitsWarper.
    std::erase_if(candidates, [&](int32_t id) { return scores[size_t(id)] < kth; });
}

void keep_top_p(std::span<const float> scores, float top_p, std::vector<int32_t>& candidates) {
    const size_t n = candidates.size();
    if (top_p >= 1.0f || n <= 1) return;
    // Descending by score (ties by id, so the result never depends on the sort's implementation).
    auto higher = [&](int32_t a, int32_t b) {
        const float sa = scores[size_t(a)], sb = scores[size_t(b)];
        return sa > sb || (sa == sb && a < b);
    };
    const float m = max_score(scores, candidates);
    double total = 0.0;
    for (int32_t id : candidates) total += std::exp(double(scores[size_t(id)]) - m);
    const double target = double(top_p) * total;
    // TopPLogitsWarper removes a token when the ascending cumulative probability up to and including
    // it is <= 1 - top_p, i.e. when the mass strictly above it is >= top_p. The top token always stays.
    // Sort only as much of the list as the nucleus needs: a growing prefix.
    size_t limit = std::min<size_t>(n, 64), keep = n;
    for (;;) {
        std::partial_sort(candidates.begin(), candidates.begin() + ptrdiff_t(limit), candidates.end(), higher);
        double above = 0.0;
        size_t j = 0;
        for (; j < limit; ++j) {
            if (j > 0 && above >= target) break;
            above += std::exp(double(scores[size_t(candidates[j])]) - m);
        }
        if (j < limit || limit == n) {
            keep = j;
            break;
        }
        limit = std::min(n, limit * 8);
    }
    candidates.resize(keep);
    std::sort(candidates.begin(), candidates.end());
}

void keep_min_p(std::span<const float> scores, float min_p, std::vector<int32_t>& candidates) {
    if (min_p <= 0.0f || candidates.size() <= 1) return;
    const float m = max_score(scores, candidates);
    // p < min_p · p_max  <=>  exp(s - s_max) < min_p (the softmax normaliser cancels).
    std::erase_if(candidates, [&](int32_t id) { return std::exp(double(scores[size_t(id)]) - m) < double(min_p); });
}

bool seen_bit(const uint32_t* row, int64_t id) {
    return (row[id / 32] >> (id % 32)) & 1u;
}

}  // namespace

void filter_candidates(std::span<float> scores, const SampleFilter& f, std::vector<int32_t>& candidates) {
    if (f.temperature != 1.0f)
        for (float& s : scores) s /= f.temperature;
    candidates.clear();
    for (size_t i = 0; i < scores.size(); ++i)
        if (scores[i] != NEG_INF) candidates.push_back(int32_t(i));
    if (candidates.empty()) return;
    keep_top_k(scores, f.top_k, candidates);
    keep_top_p(scores, f.top_p, candidates);
    keep_min_p(scores, f.min_p, candidates);
}

int32_t draw_candidate(std::span<const float> scores, std::span<const int32_t> candidates, double u) {
    // Candidates are in id order, so a u picks the same token on every machine. std::exp is glibc's,
    // correctly rounded in practice.
    const float m = max_score(scores, candidates);
    double total = 0.0;
    for (int32_t id : candidates) total += std::exp(double(scores[size_t(id)]) - m);
    const double target = u * total;
    double cum = 0.0;
    for (int32_t id : candidates) {
        cum += std::exp(double(scores[size_t(id)]) - m);
        if (cum > target) return id;
    }
    return candidates.back();  // u within rounding of the total
}

void sample(int32_t* ids, const TensorView& x, const SampleParams* params, const SeenSets& seen) {
    const Rows rows(x);
    const int64_t vocab = x.dim(1);
    std::vector<float> row(static_cast<size_t>(vocab));
    std::vector<int32_t> candidates;
    for (int64_t r = 0; r < rows.count(); ++r) {
        const SampleParams& p = params[r];
        load_row(row.data(), rows(r), x.dtype, vocab);
        bool bad = false;
        for (float s : row) bad |= std::isnan(s) || s == std::numeric_limits<float>::infinity();
        ids[r] = SAMPLE_BAD_ROW;
        if (bad) continue;
        if (p.repetition_penalty != 1.0f && p.seen_row >= 0) {
            const uint32_t* bits = seen.data + p.seen_row * seen.words;
            for (int64_t i = 0; i < vocab; ++i)
                if (seen_bit(bits, i)) row[size_t(i)] = penalised(row[size_t(i)], p.repetition_penalty);
        }
        if (p.temperature == 0.0f) {  // greedy: the first maximum, as torch.argmax
            const int64_t best = std::max_element(row.begin(), row.end()) - row.begin();
            if (row[size_t(best)] != NEG_INF) ids[r] = int32_t(best);
            continue;
        }
        filter_candidates(row, {p.temperature, p.top_k, p.top_p, p.min_p}, candidates);
        if (!candidates.empty()) ids[r] = draw_candidate(row, candidates, detail::counter_uniform(p.seed, p.counter));
    }
}

void mark_seen(const SeenSets& seen, const IndexView& ids, const int32_t* slots) {
    for (int64_t t = 0; t < ids.size; ++t) {
        const int64_t slot = slots[t], id = ids[t];
        if (slot < 0) continue;
        FP_CHECK(slot < seen.rows, "mark_seen: slot ", slot, " of token ", t, " is past the seen sets' ", seen.rows,
                 " rows");
        FP_CHECK(id >= 0 && id < seen.words * 32, "mark_seen: token id ", id, " at ", t, " is outside [0, ",
                 seen.words * 32, ") (", seen.words, " words of 32 ids per seen set)");
        seen.data[slot * seen.words + id / 32] |= uint32_t(1) << (id % 32);
    }
}

}  // namespace flashport::cpu
