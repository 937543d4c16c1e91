// Teacher-forced scoring of a token sequence, like llama.cpp's perplexity tool: the model reads the
// text, and at every position the log-probability of the actual next token is taken from the logits.
//   perplexity = exp(mean over scored positions of −log p(x[t+1] | x[0..t]))
// A text longer than the window is scored in consecutive non-overlapping windows, each starting
// from an empty cache (so the first token of each window is only context, never scored).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/engine.h"

namespace flashport::engine {

struct PerplexityOptions {
    int64_t window = 0;  // tokens per window; 0: the model's context (max_position_embeddings)
};

struct PerplexityResult {
    double perplexity = 0;
    double mean_nll = 0;  // natural log
    int64_t scored = 0;   // positions scored
    // Per scored position, in text order (position t predicts token t + 1 of its window):
    std::vector<int32_t> targets;        // the actual next token
    std::vector<float> target_logprobs;  // its log-probability
    std::vector<int32_t> top1_ids;       // the model's most likely next token (first maximum)
    std::vector<float> top1_logprobs;    // its log-probability
    double seconds = 0;
    double tok_s = 0;  // tokens run through the model per second
};

// log-softmax of `logits` at `target` (and the arg-max, first maximum, with its log-probability),
// computed with a float64 sum: the one definition the CLI and the tests share.
struct TokenScore {
    double target_logprob = 0;
    int32_t top1 = 0;
    double top1_logprob = 0;
};
TokenScore score_token(std::span<const float> logits, int32_t target);

// Scores `ids` (at least 2 tokens) on `engine`, which must have no other pending work.
PerplexityResult perplexity(Engine& engine, std::span<const int32_t> ids, const PerplexityOptions& options = {});

}  // namespace flashport::engine
