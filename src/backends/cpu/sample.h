// The sampling filters and the draw, shared by the `sample` op's CPU kernel and engine::Sampler, so
// the two implement transformers' warpers once (flashport/sample.h, engine/sampler.h).
//
// Every filter works on a candidate list, the ids whose score is still finite: with Qwen's defaults
// (top_k = 20) top-p, min-p and the draw touch 20 entries instead of the 151,936 of the vocabulary.
// Probabilities are computed in double from fp32 scores: the same sets as transformers' fp32
// softmax except where a cumulative sum lands within rounding of the top-p boundary.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "flashport/ops.h"
#include "flashport/sample.h"

namespace flashport::cpu {

// The repetition penalty of one score (transformers' RepetitionPenaltyLogitsProcessor).
inline float penalised(float s, float r) {
    return s < 0.0f ? s * r : s / r;
}

struct SampleFilter {
    float temperature = 1.0f;  // > 0 (greedy never reaches the filters)
    int64_t top_k = 0;
    float top_p = 1.0f;
    float min_p = 0.0f;
};

// scores: one penalised row [vocab], divided by the temperature in place (when it is not 1). Leaves in
// `candidates` the ids that survive top-k -> top-p -> min-p, in id order; empty when every score is
// -inf. The scores hold no NaN or +inf (the callers check).
void filter_candidates(std::span<float> scores, const SampleFilter& filter, std::vector<int32_t>& candidates);

// The inverse-CDF draw over `candidates` (id order, non-empty): the first id whose cumulative weight
// exp(s - s_max), summed in double, exceeds u · total, u in [0, 1).
int32_t draw_candidate(std::span<const float> scores, std::span<const int32_t> candidates, double u);

// The op's kernels; the op layer (src/ops/sample.cpp) has checked the views and every row's settings.
void sample(int32_t* ids, const TensorView& x, const SampleParams* params, const SeenSets& seen);
void mark_seen(const SeenSets& seen, const IndexView& ids, const int32_t* slots);

}  // namespace flashport::cpu
