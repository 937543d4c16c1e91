// Teacher-forced scoring (see perplexity.h).
#include "engine/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "flashport/error.h"

namespace flashport::engine {

TokenScore score_token(std::span<const float> logits, int32_t target) {
    FP_CHECK(!logits.empty() && target >= 0 && size_t(target) < logits.size(), "score_token: target ", target,
             " outside the vocabulary of ", logits.size());
    size_t best = 0;
    for (size_t i = 1; i < logits.size(); ++i)
        if (logits[i] > logits[best]) best = i;
    const double m = logits[best];
    double sum = 0;
    for (float l : logits) sum += std::exp(double(l) - m);
    const double lse = m + std::log(sum);
    return {double(logits[size_t(target)]) - lse, int32_t(best), m - lse};
}

PerplexityResult perplexity(Engine& engine, std::span<const int32_t> ids, const PerplexityOptions& options) {
    FP_CHECK(ids.size() >= 2, "perplexity: need at least 2 tokens to score, got ", ids.size());
    FP_CHECK(options.window >= 0, "perplexity: window must be >= 0, got ", options.window);
    FP_CHECK(!engine.has_pending(), "perplexity: the engine is busy with other sequences");
    const int64_t window = std::min(options.window > 0 ? options.window : engine.context(), engine.context());
    FP_CHECK(window >= 2, "perplexity: the window must hold at least 2 tokens, got ", window);

    PerplexityResult r;
    const auto start = std::chrono::steady_clock::now();
    double nll = 0;
    for (size_t w0 = 0; w0 + 1 < ids.size(); w0 += size_t(window)) {
        const std::span<const int32_t> win = ids.subspan(w0, std::min(size_t(window), ids.size() - w0));
        if (win.size() < 2) break;
        const SeqId seq = engine.add_sequence(win, /*all_logits=*/true);
        while (engine.has_pending()) {
            for (const SeqLogits& out : engine.step()) {
                for (int64_t i = 0; i < out.rows; ++i) {
                    const int64_t pos = out.position + i;  // predicts win[pos + 1]
                    if (pos + 1 >= int64_t(win.size())) continue;
                    const int32_t target = win[size_t(pos + 1)];
                    const TokenScore s = score_token(out.row(i), target);
                    nll -= s.target_logprob;
                    r.targets.push_back(target);
                    r.target_logprobs.push_back(float(s.target_logprob));
                    r.top1_ids.push_back(s.top1);
                    r.top1_logprobs.push_back(float(s.top1_logprob));
                }
            }
        }
        engine.release(seq);
    }
    r.scored = int64_t(r.targets.size());
    r.mean_nll = nll / double(r.scored);
    r.perplexity = std::exp(r.mean_nll);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r.tok_s = r.seconds > 0 ? double(ids.size()) / r.seconds : 0.0;
    return r;
}

}  // namespace flashport::engine
