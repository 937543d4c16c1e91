// Parsing and validating the body of POST /v1/chat/completions and /v1/completions into what the
// scheduler runs. Everything a client can get wrong is an ApiError (400, or 404 for an unknown
// model) naming the field, before any engine work: the body is parsed by the project's strict JSON
// reader (depth limit, duplicate keys refused, invalid UTF-8 refused), unknown fields are refused
// as OpenAI does ("Unrecognized request argument"), and lengths are checked against the context.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/generate.h"
#include "flashport/tokenizer.h"

namespace flashport::server {

// What the request parser needs to know about the server.
struct ServedModel {
    std::string id;                                   // the name /v1/models lists and requests must use
    const tokenizer::Tokenizer* tokenizer = nullptr;  // null: the folder works with token ids only
    engine::GenerateOptions defaults;                 // the CLI's sampling and stop defaults
    bool fixed_seed = false;                          // --seed was given: requests without a seed use it
    int64_t context = 0;                              // the model's context in tokens
    int64_t vocab_size = 0;
};

struct CompletionRequest {
    bool chat = false;
    bool stream = false, include_usage = false;
    // One prompt per choice: chat has one; completions take a string, token ids, or an array of either
    // (choice i answers prompts[i], as lm-evaluation-harness batches its requests). Never empty.
    std::vector<std::vector<int32_t>> prompts;
    engine::GenerateOptions options;  // defaults overridden by the request; max_new_tokens resolved (0 only with echo)
    int top_logprobs = -1;            // -1: no logprobs; else how many alternatives per token
    // Completions: the choice's text starts with the prompt's, and with logprobs its tokens lead the
    // logprobs (the first with a null logprob): how clients score a text (lm-evaluation-harness's
    // loglikelihood sends echo, logprobs and max_tokens 1).
    bool echo = false;
    // Choices per prompt: choice i · n + j is prompt i's j-th, sampled with seed + j (the same text n
    // times under greedy decoding).
    int n = 1;
    // OpenAI's logit adjustments, applied on the host before sampling: logit_bias (token id → a bias
    // in [-100, 100]), and presence / frequency penalties on the tokens generated so far.
    std::vector<std::pair<int32_t, float>> logit_bias;
    float presence_penalty = 0, frequency_penalty = 0;
    // Chat with tools (tool_choice "auto"): the tools are in the prompt, and the reply's <tool_call>
    // blocks become OpenAI's tool_calls (tool_calls.h).
    bool tool_calls = false;
    // response_format {"type": "json_object"}: the reply is one JSON object (json_constraint.h).
    bool json_object = false;
};

// Choices one request may ask for (prompts × n): each becomes a job of its own in the scheduler's queue.
constexpr size_t MAX_PROMPTS_PER_REQUEST = 64;

// The body of a completions (chat = false) or chat completions request.
CompletionRequest parse_completion_request(const std::string& body, bool chat, const ServedModel& model);

// The JSON object of a body (400 when it is not one); shared by /tokenize and /detokenize.
nlohmann::json parse_body_object(const std::string& body);

}  // namespace flashport::server
