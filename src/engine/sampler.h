// Picking the next token from logits, and deciding when generation stops.
//
// Sampler follows transformers' generate(): the repetition penalty, then (when sampling) the warpers
// in LogitsProcessorList order: temperature -> top-k -> top-p -> min-p, then a draw from the softmax
// of what is left. Greedy decoding (do_sample = false, or temperature 0) applies the penalty and takes
// the first maximum, as torch.argmax does. The draw uses the sampler's own generator (xoshiro256**,
// seeded through splitmix64), so a seed gives the same tokens on every machine for the same logits.
//
// StopMatcher and Stopper end generation on EOS ids and stop strings, releasing text only once it
// can no longer turn out to be the start of a stop string.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "flashport/sample.h"

namespace flashport::engine {

struct SamplingParams {
    bool do_sample = true;           // false: greedy
    float temperature = 1.0f;        // > 0; 0 means greedy
    int64_t top_k = 0;               // keep the k highest scores (ties with the k-th kept); 0: off
    float top_p = 1.0f;              // keep the smallest top set with probability >= top_p; 1: off
    float min_p = 0.0f;              // drop tokens with p < min_p · p_max; 0: off
    float repetition_penalty = 1.0f; // > 0; 1: off. Scores of tokens in the context: s > 0 → s / r, else s · r
    uint64_t seed = 0;

    bool greedy() const { return !do_sample || temperature == 0.0f; }
};

// Throws flashport::Error naming the field and its allowed range (flashport::validate(SampleParams)'s
// checks, on these settings as given).
void validate(const SamplingParams& params);

// The settings as the `sample` op reads them (flashport/sample.h): temperature as given (greedy()
// settings still have to be made temperature 0 by the caller), top_k clamped to int32, no seen row,
// counter 0.
SampleParams sample_params(const SamplingParams& params);

// xoshiro256** (Blackman & Vigna), seeded by expanding the seed with splitmix64.
class Rng {
public:
    explicit Rng(uint64_t seed);
    uint64_t next();
    double uniform();  // [0, 1) with 53 random bits

private:
    uint64_t s_[4];
};

class Sampler {
public:
    explicit Sampler(const SamplingParams& params);

    // The next token. logits: one score per vocabulary entry (NaN is an error); context: the prompt
    // and the tokens generated so far (the repetition penalty's "seen" set; ids must be in the vocab).
    int32_t sample(std::span<const float> logits, std::span<const int32_t> context);

    // The scores sample() draws from, in place: penalised, warped, and -inf where filtered (what
    // transformers' processors return). Greedy stops after the penalty. For tests and log-probs.
    void process(std::span<float> logits, std::span<const int32_t> context);

    const SamplingParams& params() const { return params_; }

private:
    // Applies every step to scores_, leaving the surviving token ids in candidates_.
    void run(std::span<const float> logits, std::span<const int32_t> context);
    void penalise(std::span<const int32_t> context);

    SamplingParams params_;
    Rng rng_;
    std::vector<float> scores_;
    std::vector<int32_t> candidates_;  // ids with a finite score, in no particular order
    std::vector<uint8_t> seen_;
};

// Incremental stop-string matching on decoded text. push() returns the text that is safe to show:
// everything except a tail that could still grow into a stop string (held back), or, once a stop
// string appears, the text before it (the stop string and anything after it are dropped). Lengths
// are in bytes; a held-back tail is a prefix of a stop string, so it starts on a UTF-8 boundary.
class StopMatcher {
public:
    explicit StopMatcher(std::vector<std::string> stop_strings = {});

    struct Step {
        std::string text;      // to emit now
        bool stopped = false;  // a stop string was found; later pushes return nothing
    };
    Step push(std::string_view decoded);
    // The end of generation: releases the held-back tail (empty once stopped).
    std::string flush();

    size_t held() const { return stopped_ ? 0 : pending_.size(); }
    bool stopped() const { return stopped_; }
    // How many trailing bytes of `text` are a proper prefix of some stop string (the longest such).
    size_t hold_back(std::string_view text) const;

private:
    std::vector<std::string> stops_;
    std::string pending_;  // text not yet emitted: always shorter than the longest stop string
    bool stopped_ = false;
};

enum class StopReason : uint8_t { NONE, EOS, STOP_STRING, MAX_TOKENS };
const char* stop_reason_name(StopReason reason);  // "none", "eos", "stop_string", "max_tokens"

struct StopConditions {
    std::vector<int32_t> eos_ids;           // from generation_config.json (eos_token_id, int or list)
    std::vector<std::string> stop_strings;
    bool ignore_eos = false;                // benchmarks: run to max_new_tokens whatever the model says
    int64_t max_new_tokens = 0;             // 0: no limit
};

// Per-sequence stop logic: feed each generated token and its decoded text (from the tokenizer's
// streaming decoder); emit what comes back; stop when the reason is not NONE.
class Stopper {
public:
    explicit Stopper(StopConditions conditions);

    struct Step {
        std::string text;
        StopReason reason = StopReason::NONE;
    };
    // An EOS token's own text is not emitted; what was held back is, since no stop string completed.
    Step on_token(int32_t token, std::string_view decoded);
    std::string finish() { return matcher_.flush(); }
    bool is_eos(int32_t token) const;
    int64_t generated() const { return generated_; }

private:
    StopConditions conditions_;
    StopMatcher matcher_;
    int64_t generated_ = 0;
    StopReason reason_ = StopReason::NONE;
};

}  // namespace flashport::engine
