// The generation loop (see generate.h).
#include "engine/generate.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "flashport/error.h"
#include "flashport/memory.h"
#include "flashport/tokenizer.h"

namespace flashport::engine {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}

// Steps the engine until `seq` has logits. Other sequences' results are dropped: a Session owns its
// engine's time while it generates (the server drives Engine directly to interleave requests).
SeqLogits run_until_logits(Engine& engine, SeqId seq, StepOutput output) {
    for (;;) {
        std::vector<SeqLogits> results = engine.step(output);
        FP_CHECK(!results.empty() || engine.has_pending(), "generate: the engine has nothing to run");
        for (const SeqLogits& r : results)
            if (r.seq == seq) return r;
    }
}

// The KV-cache tokens a request may use: the prompt plus its reply, at most up to the context. Clamped
// before adding: max_new_tokens may be anything up to INT64_MAX (0 means no limit).
int64_t request_tokens(const Engine& engine, int64_t prompt_len, const GenerateOptions& options) {
    const int64_t context = engine.context(), max_new = options.stop.max_new_tokens;
    return std::min(context, prompt_len + (max_new == 0 ? context : std::min(max_new, context)));
}

}  // namespace

int64_t max_prompt_tokens(const Engine& engine, const GenerateOptions& options) {
    const int64_t context = engine.context(), capacity = engine.cache().capacity_tokens();
    if (capacity == 0 || request_tokens(engine, context, options) <= capacity) return context;
    // request_tokens(p) = p + reply here (it stays below the context), so the largest p is:
    return std::max<int64_t>(0, capacity - (request_tokens(engine, 0, options)));
}

Session::Session(Engine& engine, const tokenizer::Tokenizer* tokenizer) : engine_(&engine), tokenizer_(tokenizer) {}

Session::~Session() {
    reset();
}

void Session::reset() {
    if (seq_ >= 0 && engine_->contains(seq_)) engine_->release(seq_);
    seq_ = -1;
}

int64_t Session::load_prompt(std::span<const int32_t> prompt) {
    FP_CHECK(!prompt.empty(), "generate: the prompt is empty (at least one token is needed)");
    if (seq_ < 0) {
        seq_ = engine_->add_sequence(prompt);
        return 0;
    }
    // The longest cached prefix the new prompt shares, less one token: the last prompt token must run
    // through the model to give the next-token logits.
    const std::vector<int32_t>& have = engine_->tokens(seq_);
    const size_t limit = std::min<size_t>({have.size(), size_t(engine_->cached(seq_)), prompt.size() - 1});
    size_t common = 0;
    while (common < limit && have[common] == prompt[common]) ++common;
    engine_->truncate(seq_, int64_t(common));
    engine_->append(seq_, prompt.subspan(common));
    return int64_t(common);
}

GenerateResult Session::generate(std::span<const int32_t> prompt, const GenerateOptions& options,
                                 const TokenCallback& on_token) {
    validate(options.sampling);
    FP_CHECK(tokenizer_ || options.stop.stop_strings.empty(),
             "generate: stop strings need a tokenizer (this model folder has no tokenizer.json)");
    FP_CHECK(options.stop.max_new_tokens >= 0, "generate: max_new_tokens must be >= 0, got ",
             options.stop.max_new_tokens);
    // A sized KV cache must hold the whole request: say so before any work rather than mid-answer.
    const int64_t capacity = engine_->cache().capacity_tokens();
    const int64_t need = request_tokens(*engine_, int64_t(prompt.size()), options);
    FP_CHECK(capacity == 0 || need <= capacity, "generate: the request needs up to ", need, " tokens of KV cache (",
             prompt.size(), " prompt + ", options.stop.max_new_tokens, " new), the cache holds ", capacity,
             " (--ctx / --kv-memory); shorten the prompt, lower --max-tokens or raise the limit");

    GenerateResult result;
    result.prompt_ids.assign(prompt.begin(), prompt.end());
    const Device device = engine_->model().device();
    reset_peak(device);
    const Clock::time_point start = Clock::now();
    result.stats.prompt_tokens = int64_t(prompt.size());
    result.stats.cached_tokens = load_prompt(prompt);

    Sampler sampler(options.sampling);
    // Plain greedy decoding takes its argmax on the model's device (Engine::step's GREEDY): the same
    // first maximum the sampler would take, without bringing the logits to the host. On a GPU every
    // other setting is drawn there too (SAMPLED, under Engine::set_sampling: the same filters, a
    // uniform number from the seed and the position), so no step brings the logits back and decode
    // steps replay from graphs. The CPU keeps the Sampler, whose seeded tokens are as they were.
    const bool device_greedy = options.sampling.greedy() && options.sampling.repetition_penalty == 1.0f;
    const bool device_sampled = !device_greedy && !engine_->model().device().is_cpu();
    if (device_sampled) engine_->set_sampling(seq_, options.sampling);
    const StepOutput output = device_greedy    ? StepOutput::GREEDY
                              : device_sampled ? StepOutput::SAMPLED
                                               : StepOutput::LOGITS;
    Stopper stopper(options.stop);
    std::optional<tokenizer::StreamDecoder> decoder;
    if (tokenizer_) decoder.emplace(*tokenizer_);
    std::vector<int32_t> context(prompt.begin(), prompt.end());  // the repetition penalty's "seen" set
    const auto emit = [&](int32_t token, const std::string& text) {
        result.text += text;
        if (on_token) on_token(token, text);
    };

    Clock::time_point first = start;
    SeqLogits logits = run_until_logits(*engine_, seq_, output);
    result.stats.prefill_s = seconds(start, Clock::now());
    for (;;) {
        const int32_t token = output != StepOutput::LOGITS ? logits.token : sampler.sample(logits.last(), context);
        result.generated_ids.push_back(token);
        context.push_back(token);
        // An id past the tokenizer's vocabulary (models pad their embedding table: Qwen's has ~270
        // more rows than its tokenizer has tokens) decodes to nothing, as tokenizers' decode skips it.
        const bool known = decoder && size_t(token) < tokenizer_->vocab_size();
        const Stopper::Step step = stopper.on_token(token, known ? decoder->push(token) : std::string());
        if (result.generated_ids.size() == 1) {
            first = Clock::now();
            result.stats.ttft_s = seconds(start, first);
        }
        emit(token, step.text);
        result.reason = step.reason;
        if (result.reason != StopReason::NONE) break;
        if (int64_t(context.size()) >= engine_->context()) {  // the next token would have no position
            result.reason = StopReason::MAX_TOKENS;
            break;
        }
        engine_->append(seq_, token);
        logits = run_until_logits(*engine_, seq_, output);
    }
    const Clock::time_point end = Clock::now();
    if (result.reason != StopReason::STOP_STRING) {
        std::string tail = stopper.finish();
        if (decoder) tail += decoder->finish();
        if (!tail.empty()) emit(-1, tail);
    }

    GenerateStats& s = result.stats;
    s.generated_tokens = int64_t(result.generated_ids.size());
    const int64_t prefilled = s.prompt_tokens - s.cached_tokens;
    s.prefill_tok_s = s.prefill_s > 0 ? double(prefilled) / s.prefill_s : 0.0;
    s.decode_s = seconds(first, end);
    s.decode_tok_s = s.generated_tokens > 1 && s.decode_s > 0 ? double(s.generated_tokens - 1) / s.decode_s : 0.0;
    s.peak_bytes = memory_stats(device).peak_bytes;
    s.kv_cache_bytes = int64_t(engine_->cache().bytes());
    return result;
}

GenerateResult generate(Engine& engine, const tokenizer::Tokenizer* tokenizer, std::span<const int32_t> prompt,
                        const GenerateOptions& options, const TokenCallback& on_token) {
    Session session(engine, tokenizer);
    return session.generate(prompt, options, on_token);
}

}  // namespace flashport::engine
