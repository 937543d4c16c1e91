// Tool calling in Qwen's form (Qwen2.5, Qwen3; as vLLM's "hermes" parser reads it): the request's
// tools and an assistant turn's call arguments are written into the prompt as Python's json.dumps
// writes them (the chat template's `tojson`), and the model answers a call as
//   <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>
// after any text of its own, one block per call. The reply's text splits into that content and
// OpenAI's tool_calls.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flashport::server {

// JSON text as Python's json.dumps(x, ensure_ascii=False) writes it: ", " and ": " separators, keys in
// the order given, non-ASCII as is, control characters as \u00XX. That is what transformers' (and
// @huggingface/jinja's) `tojson` filter gives a chat template.
std::string python_json(const nlohmann::ordered_json& j);

struct ToolCall {
    std::string id;         // "call_..." (random)
    std::string name;
    std::string arguments;  // JSON text, as OpenAI's API carries it
};

// The model's reply split at its first <tool_call>: the text before it (nullopt when only
// whitespace), and the calls. An unclosed last block is read up to the end, as vLLM does. No call
// when a block's JSON does not parse or lacks a string "name": the whole reply is then content.
struct ParsedReply {
    std::optional<std::string> content;
    std::vector<ToolCall> calls;
};
ParsedReply parse_tool_calls(std::string_view text);

// How a stream holds back text that may be a tool call: text is released until "<tool_call>" starts
// (a tail that could be the start of the tag is kept until the next text decides), and everything
// from the tag on is kept for parse_tool_calls at the end.
class ToolCallStream {
public:
    std::string push(std::string_view text);  // the text that may go out now
    std::string held() const { return held_; }
    bool in_call() const { return in_call_; }

private:
    std::string held_;
    bool in_call_ = false;
};

}  // namespace flashport::server
