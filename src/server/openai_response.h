// The JSON bodies of completion responses in OpenAI's shapes: the whole reply (non-streaming), the
// chunks of a stream, usage, and logprobs (chat's `content` list, or the legacy completions form).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "flashport/tokenizer.h"
#include "server/channel.h"
#include "server/tool_calls.h"

namespace flashport::server {

struct ResponseContext {
    bool chat = false;
    std::string id;  // "chatcmpl-..." or "cmpl-..."
    int64_t created = 0;
    std::string model;
    bool logprobs = false;
    const tokenizer::Tokenizer* tokenizer = nullptr;
    bool tool_calls = false;  // chat with tools: the reply's <tool_call> blocks become tool_calls (tool_calls.h)
};

ResponseContext make_response_context(bool chat, const std::string& model, bool logprobs,
                                      const tokenizer::Tokenizer* tokenizer);

nlohmann::json usage_json(int64_t prompt_tokens, int64_t completion_tokens);

// One stream chunk: text and its logprobs, or (finish_reason set) the last choice chunk. Chat's
// first chunk carries the role. text_offset: the stream's running text_offset (completions' logprobs),
// advanced past this chunk's tokens.
nlohmann::json chunk_json(const ResponseContext& c, const std::string& text, const std::vector<TokenLogprob>& lps,
                          const std::string& finish_reason, bool first, size_t* text_offset = nullptr);
// A stream's tool calls, read from the text it held back (ToolCallStream): one delta with every call,
// ending the choice ("tool_calls" where the reply stopped by itself, else the reason given).
nlohmann::json tool_calls_chunk_json(const ResponseContext& c, const std::vector<ToolCall>& calls,
                                     const std::string& finish_reason);
// The usage chunk stream_options.include_usage asks for: no choices.
nlohmann::json usage_chunk_json(const ResponseContext& c, int64_t prompt_tokens, int64_t completion_tokens);

// One choice of a whole reply: choice i of the request's prompts, and its share of the usage.
struct FinalChoice {
    std::string text;
    std::vector<TokenLogprob> logprobs;
    std::string finish_reason;
    int64_t prompt_tokens = 0, completion_tokens = 0;
};
// The whole reply: the choices in order (index i), usage summed over them.
nlohmann::json final_json(const ResponseContext& c, const std::vector<FinalChoice>& choices);

}  // namespace flashport::server
