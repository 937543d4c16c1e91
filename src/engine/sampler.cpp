// Sampling and stop conditions; see sampler.h for the order of the steps and why.
//
// The filters and the draw are backends/cpu/sample.h's, which the `sample` op's CPU kernel runs too
// (flashport/sample.h): one implementation of transformers' warpers.
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/sample.h"
#include "flashport/error.h"

namespace flashport::engine {
namespace {

constexpr float NEG_INF = -std::numeric_limits<float>::infinity();

uint64_t splitmix64(uint64_t& state) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

SampleParams sample_params(const SamplingParams& p) {
    SampleParams s;
    s.temperature = p.temperature;
    s.top_k =
        int32_t(std::clamp<int64_t>(p.top_k, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()));
    s.top_p = p.top_p;
    s.min_p = p.min_p;
    s.repetition_penalty = p.repetition_penalty;
    s.seed = p.seed;
    return s;
}

void validate(const SamplingParams& p) {
    validate(sample_params(p), 0);  // the op's checks and words; a negative top_k stays negative in 32 bits
}

// ---------------------------------------------------------------------------------------------- Rng

Rng::Rng(uint64_t seed) {
    for (uint64_t& s : s_) s = splitmix64(seed);  // never all zero: splitmix64 is a bijection of a counter
}

uint64_t Rng::next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
}

double Rng::uniform() { return double(next() >> 11) * 0x1.0p-53; }

// ---------------------------------------------------------------------------------------------- Sampler

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) { validate(params); }

void Sampler::penalise(std::span<const int32_t> context) {
    const float r = params_.repetition_penalty;
    const int64_t vocab = int64_t(scores_.size());
    seen_.assign(scores_.size(), 0);
    // Each distinct id once, as transformers' gather/scatter does, however often it occurs.
    for (size_t i = 0; i < context.size(); ++i) {
        const int64_t id = context[i];
        FP_CHECK(id >= 0 && id < vocab, "sampling: token id ", id, " at context position ", i,
                 " is outside the vocabulary [0, ", vocab, ")");
        if (seen_[size_t(id)]) continue;
        seen_[size_t(id)] = 1;
        scores_[size_t(id)] = cpu::penalised(scores_[size_t(id)], r);
    }
}

void Sampler::run(std::span<const float> logits, std::span<const int32_t> context) {
    FP_CHECK(!logits.empty(), "sampling: the logits are empty (vocabulary of 0 tokens)");
    FP_CHECK(logits.size() <= size_t(std::numeric_limits<int32_t>::max()), "sampling: a vocabulary of ",
             logits.size(), " tokens does not fit int32 ids");
    scores_.assign(logits.begin(), logits.end());
    for (size_t i = 0; i < scores_.size(); ++i)
        FP_CHECK(!std::isnan(scores_[i]) && scores_[i] != std::numeric_limits<float>::infinity(),
                 "sampling: the logit of token ", i, " is ", scores_[i], " (NaN or +inf: the forward pass diverged)");
    if (params_.repetition_penalty != 1.0f) penalise(context);
    candidates_.clear();
    if (params_.greedy()) return;
    cpu::filter_candidates(scores_, {params_.temperature, params_.top_k, params_.top_p, params_.min_p}, candidates_);
    FP_CHECK(!candidates_.empty(), "sampling: every logit is -inf, there is no token to sample");
}

void Sampler::process(std::span<float> logits, std::span<const int32_t> context) {
    run(logits, context);
    if (params_.greedy()) {
        std::copy(scores_.begin(), scores_.end(), logits.begin());
        return;
    }
    std::fill(logits.begin(), logits.end(), NEG_INF);
    for (int32_t id : candidates_) logits[size_t(id)] = scores_[size_t(id)];
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> context) {
    run(logits, context);
    if (params_.greedy()) {
        // The first maximum, as torch.argmax.
        return int32_t(std::max_element(scores_.begin(), scores_.end()) - scores_.begin());
    }
    return cpu::draw_candidate(scores_, candidates_, rng_.uniform());
}

// ---------------------------------------------------------------------------------------------- stopping

StopMatcher::StopMatcher(std::vector<std::string> stop_strings) : stops_(std::move(stop_strings)) {
    for (const std::string& s : stops_) FP_CHECK(!s.empty(), "stop strings must not be empty");
}

size_t StopMatcher::hold_back(std::string_view text) const {
    size_t best = 0;
    for (const std::string& stop : stops_) {
        for (size_t k = std::min(stop.size() - 1, text.size()); k > best; --k) {
            if (text.substr(text.size() - k) == std::string_view(stop).substr(0, k)) {
                best = k;
                break;
            }
        }
    }
    return best;
}

StopMatcher::Step StopMatcher::push(std::string_view decoded) {
    Step step;
    if (stopped_) return step;
    pending_ += decoded;
    // Text emitted earlier could not start a stop string (it would have been held back), so the
    // earliest match, if any, lies within pending_.
    size_t first = std::string::npos;
    for (const std::string& stop : stops_) first = std::min(first, pending_.find(stop));
    if (first != std::string::npos) {
        step.text = pending_.substr(0, first);
        step.stopped = stopped_ = true;
        pending_.clear();
        return step;
    }
    const size_t emit = pending_.size() - hold_back(pending_);
    step.text = pending_.substr(0, emit);
    pending_.erase(0, emit);
    return step;
}

std::string StopMatcher::flush() {
    std::string out;
    out.swap(pending_);
    return stopped_ ? std::string() : out;
}

const char* stop_reason_name(StopReason reason) {
    switch (reason) {
        case StopReason::NONE: return "none";
        case StopReason::EOS: return "eos";
        case StopReason::STOP_STRING: return "stop_string";
        case StopReason::MAX_TOKENS: return "max_tokens";
    }
    return "?";
}

Stopper::Stopper(StopConditions conditions)
    : conditions_(std::move(conditions)), matcher_(conditions_.stop_strings) {
    FP_CHECK(conditions_.max_new_tokens >= 0, "max_new_tokens must be >= 0 (0: no limit), got ",
             conditions_.max_new_tokens);
}

bool Stopper::is_eos(int32_t token) const {
    return std::find(conditions_.eos_ids.begin(), conditions_.eos_ids.end(), token) != conditions_.eos_ids.end();
}

Stopper::Step Stopper::on_token(int32_t token, std::string_view decoded) {
    Step step;
    if (reason_ != StopReason::NONE) {
        step.reason = reason_;
        return step;
    }
    ++generated_;
    if (!conditions_.ignore_eos && is_eos(token)) {
        step.text = matcher_.flush();
        step.reason = reason_ = StopReason::EOS;
        return step;
    }
    StopMatcher::Step m = matcher_.push(decoded);
    step.text = std::move(m.text);
    if (m.stopped) {
        step.reason = reason_ = StopReason::STOP_STRING;
    } else if (conditions_.max_new_tokens > 0 && generated_ >= conditions_.max_new_tokens) {
        step.text += matcher_.flush();
        step.reason = reason_ = StopReason::MAX_TOKENS;
    }
    return step;
}

}  // namespace flashport::engine
