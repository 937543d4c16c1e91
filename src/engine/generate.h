// The generation loop: prefill, then sample → stop check → decode, streaming text as it becomes
// final, with the figures `flashport generate` reports (TTFT, prefill and decode tok/s, peak memory).
//
//   Engine engine(model);
//   GenerateOptions opt;  opt.stop.max_new_tokens = 64;  opt.stop.eos_ids = {...};
//   GenerateResult r = generate(engine, &tokenizer, prompt_ids, opt,
//                               [](int32_t id, std::string_view text) { std::cout << text << std::flush; });
//
// A Session keeps its sequence in the engine between calls, so a chat's next turn prefills only what
// is new: each call finds the longest prefix of the new prompt that is already cached and feeds the
// rest. The tokenizer is optional: without one, text is empty and stop strings are refused.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "engine/sampler.h"

namespace flashport::tokenizer {
class Tokenizer;
}

namespace flashport::engine {

struct GenerateOptions {
    SamplingParams sampling;
    // EOS ids, stop strings, ignore_eos, max_new_tokens (0: until EOS or the context is full). A
    // sequence that reaches the model's context stops with reason MAX_TOKENS.
    StopConditions stop;
};

struct GenerateStats {
    int64_t prompt_tokens = 0;     // the prompt's length
    int64_t cached_tokens = 0;     // of which were already in the cache (a session's earlier turns)
    int64_t generated_tokens = 0;  // sampled tokens, EOS included
    double ttft_s = 0;             // call start → first token sampled and decoded
    double prefill_s = 0;          // call start → the prompt's logits
    double prefill_tok_s = 0;      // (prompt_tokens - cached_tokens) / prefill_s
    double decode_s = 0;           // first token → last token: the generated_tokens - 1 decode steps
    double decode_tok_s = 0;       // (generated_tokens - 1) / decode_s; 0 with fewer than 2 tokens
    int64_t peak_bytes = 0;        // tracked allocator peak on the engine's device during the call: KV cache +
                                   // activations + workspace (+ the uploaded weights on a GPU)
    int64_t kv_cache_bytes = 0;    // the cache pool at the end
};

struct GenerateResult {
    std::vector<int32_t> prompt_ids;
    std::vector<int32_t> generated_ids;  // includes a final EOS token, which the text omits
    std::string text;                    // what the callback received, concatenated
    StopReason reason = StopReason::NONE;
    GenerateStats stats;
};

// Called for each generated token with the text that became final with it (often empty: a partial
// UTF-8 character or a possible stop-string prefix is held back; without a tokenizer, always empty).
// A final call with token -1 flushes what was held back at the end.
using TokenCallback = std::function<void(int32_t token, std::string_view text)>;

class Session {
public:
    Session(Engine& engine, const tokenizer::Tokenizer* tokenizer);
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    GenerateResult generate(std::span<const int32_t> prompt, const GenerateOptions& options,
                            const TokenCallback& on_token = {});
    // Drops the cached conversation.
    void reset();

private:
    // Makes the engine's sequence hold `prompt`, reusing its cached prefix. Returns the cached count.
    int64_t load_prompt(std::span<const int32_t> prompt);

    Engine* engine_;
    const tokenizer::Tokenizer* tokenizer_;
    SeqId seq_ = -1;
};

// The longest prompt Session::generate accepts on `engine` with `options`: the model's context, or
// with a sized KV cache what leaves room for the reply (max_new_tokens, or up to the context). A chat
// trims its history to this.
int64_t max_prompt_tokens(const Engine& engine, const GenerateOptions& options);

// One generation on a fresh sequence, released afterwards.
GenerateResult generate(Engine& engine, const tokenizer::Tokenizer* tokenizer, std::span<const int32_t> prompt,
                        const GenerateOptions& options, const TokenCallback& on_token = {});

}  // namespace flashport::engine
