#include "server/openai_response.h"

#include <atomic>
#include <chrono>
#include <random>

namespace flashport::server {
namespace {

using nlohmann::json;

std::string token_text(const ResponseContext& c, int32_t id) {
    if (!c.tokenizer || id < 0 || size_t(id) >= c.tokenizer->vocab_size()) return std::to_string(id);
    const int32_t ids[1] = {id};
    return c.tokenizer->decode(ids);
}

json bytes_of(const std::string& s) {
    json b = json::array();
    for (unsigned char ch : s) b.push_back(int(ch));
    return b;
}

// A token's text may be part of a UTF-8 character; json dump() replaces what is invalid. `offset` is
// where the first token's text starts in the choice's text (the completions form's text_offset); it
// is moved past the last one, so a stream's chunks count on from each other.
json logprobs_json(const ResponseContext& c, const std::vector<TokenLogprob>& lps, size_t& offset) {
    if (c.chat) {
        json content = json::array();
        for (const TokenLogprob& lp : lps) {
            const std::string t = token_text(c, lp.token);
            json top = json::array();
            for (const auto& [id, v] : lp.top) {
                const std::string tt = token_text(c, id);
                top.push_back({{"token", tt}, {"logprob", v}, {"bytes", bytes_of(tt)}});
            }
            content.push_back({{"token", t}, {"logprob", lp.logprob}, {"bytes", bytes_of(t)}, {"top_logprobs", top}});
        }
        return {{"content", content}};
    }
    json tokens = json::array(), token_logprobs = json::array(), top = json::array(), offsets = json::array();
    for (const TokenLogprob& lp : lps) {
        const std::string t = token_text(c, lp.token);
        tokens.push_back(t);
        token_logprobs.push_back(lp.scored ? json(lp.logprob) : json());
        json alternatives = json::object();
        for (const auto& [id, v] : lp.top) alternatives[token_text(c, id)] = v;
        top.push_back(lp.scored ? alternatives : json());
        offsets.push_back(offset);
        offset += t.size();
    }
    return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}, {"text_offset", offsets}};
}

json or_null(const std::string& s) {
    return s.empty() ? json() : json(s);
}

}  // namespace

ResponseContext make_response_context(bool chat, const std::string& model, bool logprobs,
                                      const tokenizer::Tokenizer* tokenizer) {
    static std::atomic<uint64_t> counter{0};
    static const uint64_t boot = std::random_device{}();
    char id[48];
    std::snprintf(id, sizeof id, "%s-%08llx%08llx", chat ? "chatcmpl" : "cmpl", (unsigned long long)(boot & 0xffffffff),
                  (unsigned long long)counter.fetch_add(1));
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    return {chat, id, std::chrono::duration_cast<std::chrono::seconds>(now).count(), model, logprobs, tokenizer};
}

json usage_json(int64_t prompt_tokens, int64_t completion_tokens) {
    return {{"prompt_tokens", prompt_tokens},
            {"completion_tokens", completion_tokens},
            {"total_tokens", prompt_tokens + completion_tokens}};
}

json chunk_json(const ResponseContext& c, const std::string& text, const std::vector<TokenLogprob>& lps,
                const std::string& finish_reason, bool first, size_t* text_offset) {
    json choice = {{"index", 0}, {"finish_reason", or_null(finish_reason)}};
    size_t from_zero = 0;
    choice["logprobs"] = c.logprobs && !lps.empty() ? logprobs_json(c, lps, text_offset ? *text_offset : from_zero) : json();
    if (c.chat) {
        json delta = json::object();
        if (first) delta["role"] = "assistant";
        if (!text.empty() || (first && finish_reason.empty())) delta["content"] = text;
        choice["delta"] = delta;
    } else {
        choice["text"] = text;
    }
    return {{"id", c.id},
            {"object", c.chat ? "chat.completion.chunk" : "text_completion"},
            {"created", c.created},
            {"model", c.model},
            {"choices", json::array({choice})}};
}

json tool_calls_chunk_json(const ResponseContext& c, const std::vector<ToolCall>& calls,
                           const std::string& finish_reason) {
    json list = json::array();
    for (size_t i = 0; i < calls.size(); ++i)
        list.push_back({{"index", i},
                        {"id", calls[i].id},
                        {"type", "function"},
                        {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}});
    json choice = {{"index", 0}, {"finish_reason", finish_reason == "stop" ? "tool_calls" : finish_reason},
                   {"logprobs", json()}};
    choice["delta"] = {{"tool_calls", list}};
    return {{"id", c.id},
            {"object", "chat.completion.chunk"},
            {"created", c.created},
            {"model", c.model},
            {"choices", json::array({choice})}};
}

json usage_chunk_json(const ResponseContext& c, int64_t prompt_tokens, int64_t completion_tokens) {
    return {{"id", c.id},
            {"object", c.chat ? "chat.completion.chunk" : "text_completion"},
            {"created", c.created},
            {"model", c.model},
            {"choices", json::array()},
            {"usage", usage_json(prompt_tokens, completion_tokens)}};
}

json final_json(const ResponseContext& c, const std::vector<FinalChoice>& choices) {
    json list = json::array();
    int64_t prompt_tokens = 0, completion_tokens = 0;
    for (size_t i = 0; i < choices.size(); ++i) {
        const FinalChoice& f = choices[i];
        json choice = {{"index", i}, {"finish_reason", or_null(f.finish_reason)}};
        size_t offset = 0;
        choice["logprobs"] = c.logprobs ? logprobs_json(c, f.logprobs, offset) : json();
        if (c.chat && c.tool_calls) {
            // The text before the first call is the content (null when there is none), as OpenAI's
            // replies with calls have it; a reply that stopped to call ends with "tool_calls".
            const ParsedReply reply = parse_tool_calls(f.text);
            json message = {{"role", "assistant"}, {"content", reply.content ? json(*reply.content) : json()}};
            if (!reply.calls.empty()) {
                json calls = json::array();
                for (const ToolCall& call : reply.calls)
                    calls.push_back({{"id", call.id},
                                     {"type", "function"},
                                     {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
                message["tool_calls"] = calls;
                if (f.finish_reason == "stop") choice["finish_reason"] = "tool_calls";
            }
            choice["message"] = message;
        } else if (c.chat) {
            choice["message"] = {{"role", "assistant"}, {"content", f.text}};
        } else {
            choice["text"] = f.text;
        }
        list.push_back(std::move(choice));
        prompt_tokens += f.prompt_tokens;
        completion_tokens += f.completion_tokens;
    }
    return {{"id", c.id},
            {"object", c.chat ? "chat.completion" : "text_completion"},
            {"created", c.created},
            {"model", c.model},
            {"choices", list},
            {"usage", usage_json(prompt_tokens, completion_tokens)}};
}

}  // namespace flashport::server
