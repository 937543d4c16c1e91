#include "server/openai_request.h"

#include <algorithm>
#include <functional>
#include <random>
#include <set>

#include "engine/json_strict.h"
#include "flashport/error.h"
#include "server/api_error.h"
#include "server/tool_calls.h"

namespace flashport::server {
namespace {

using nlohmann::json;

// Bounds that keep every later computation small: OpenAI's own limits where it has them.
constexpr size_t MAX_STOP_STRINGS = 16;
constexpr size_t MAX_STOP_BYTES = 256;
constexpr size_t MAX_MESSAGES = 4096;
constexpr int MAX_TOP_LOGPROBS_CHAT = 20;
constexpr int MAX_LOGPROBS_COMPLETION = 5;
constexpr size_t MAX_LOGIT_BIAS = 300;
constexpr size_t MAX_TOOLS = 128;

std::string type_of(const json& j) {
    return engine::json_type_name(j);
}

ApiError wrong_type(const std::string& field, const char* expected, const json& j) {
    return bad_field(field, "'" + field + "' must be " + expected + ", got " + type_of(j));
}

double number_in(const json& body, const std::string& field, double lo, double hi) {
    const json& j = body.at(field);
    if (!j.is_number()) throw wrong_type(field, "a number", j);
    const double v = j.get<double>();
    if (!(v >= lo && v <= hi))
        throw bad_field(field, "'" + field + "' must be in [" + concat(lo) + ", " + concat(hi) + "], got " + j.dump());
    return v;
}

int64_t integer_in(const json& body, const std::string& field, int64_t lo, int64_t hi) {
    const json& j = body.at(field);
    // 5.0 is refused too: OpenAI's schema says integer, and a fraction would be silently cut.
    if (!j.is_number_integer() && !j.is_number_unsigned()) throw wrong_type(field, "an integer", j);
    if (j.is_number_unsigned() && j.get<uint64_t>() > uint64_t(INT64_MAX))
        throw bad_field(field, "'" + field + "' is out of range: " + j.dump());
    const int64_t v = j.get<int64_t>();
    if (v < lo || v > hi)
        throw bad_field(field, "'" + field + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                   "], got " + std::to_string(v));
    return v;
}

bool boolean(const json& body, const std::string& field) {
    const json& j = body.at(field);
    if (!j.is_boolean()) throw wrong_type(field, "a boolean", j);
    return j.get<bool>();
}

// A message's content: a string, or an array of {"type": "text", "text": "..."} parts (joined).
std::string content_text(const json& content, const std::string& where) {
    if (content.is_string()) return content.get<std::string>();
    if (!content.is_array()) throw wrong_type(where, "a string or an array of text parts", content);
    std::string text;
    for (const json& part : content) {
        if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
            !part["text"].is_string())
            throw bad_field(where, "'" + where +
                                       "': only parts of the form {\"type\": \"text\", \"text\": \"...\"} "
                                       "are supported");
        text += part["text"].get<std::string>();
    }
    return text;
}

// A JSON value of the request as the client ordered its keys (the strict reader's json sorts them):
// tools and call arguments go into the prompt in Python's json.dumps form, in the client's order, as
// transformers and vLLM write them.
using ordered_json = nlohmann::ordered_json;

// The request's tools (OpenAI's [{"type": "function", "function": {"name": ..., ...}}]), each as the
// template's `tool | tojson` writes it.
std::vector<std::string> tool_texts(const json& tools, const ordered_json& ordered) {
    if (!tools.is_array()) throw wrong_type("tools", "an array", tools);
    if (tools.size() > MAX_TOOLS)
        throw bad_field("tools", "'tools' holds " + std::to_string(tools.size()) + " tools; at most " +
                                     std::to_string(MAX_TOOLS));
    std::vector<std::string> out;
    for (size_t i = 0; i < tools.size(); ++i) {
        const json& t = tools[i];
        const std::string where = "tools[" + std::to_string(i) + "]";
        if (!t.is_object() || t.value("type", json()) != "function" || !t.contains("function") ||
            !t["function"].is_object() || !t["function"].contains("name") || !t["function"]["name"].is_string() ||
            t["function"]["name"].get<std::string>().empty())
            throw bad_field(where, where + " must be {\"type\": \"function\", \"function\": {\"name\": \"...\", ...}}");
        out.push_back(python_json(ordered[i]));
    }
    return out;
}

// An assistant turn's tool_calls: [{"id", "type": "function", "function": {"name", "arguments"}}], the
// arguments a JSON string (OpenAI's form, parsed and rewritten as vLLM does) or an object.
std::vector<tokenizer::ChatToolCall> call_texts(const json& calls, const ordered_json& ordered,
                                                const std::string& where) {
    if (!calls.is_array()) throw wrong_type(where, "an array", calls);
    std::vector<tokenizer::ChatToolCall> out;
    for (size_t k = 0; k < calls.size(); ++k) {
        const json& c = calls[k];
        const std::string at = where + "[" + std::to_string(k) + "]";
        if (!c.is_object() || !c.contains("function") || !c["function"].is_object() ||
            !c["function"].contains("name") || !c["function"]["name"].is_string())
            throw bad_field(at, at + " must be {\"type\": \"function\", \"function\": {\"name\": \"...\", "
                                     "\"arguments\": \"...\"}}");
        const json& f = c["function"];
        std::string arguments = "{}";
        if (f.contains("arguments") && f["arguments"].is_string()) {
            const std::string text = f["arguments"].get<std::string>();
            try {
                engine::parse_json_strict(text, at + ".function.arguments");  // depth and duplicate keys
            } catch (const Error& e) {
                throw bad_field(at, e.what());
            }
            arguments = python_json(ordered_json::parse(text));
        } else if (f.contains("arguments") && f["arguments"].is_object()) {
            arguments = python_json(ordered[k]["function"]["arguments"]);
        } else if (f.contains("arguments") && !f["arguments"].is_null()) {
            throw wrong_type(at + ".function.arguments", "a JSON string or an object", f["arguments"]);
        }
        out.push_back({f["name"].get<std::string>(), arguments});
    }
    return out;
}

// The chat's prompt. ordered: the body with the client's key order, for tools and call arguments.
std::vector<int32_t> chat_prompt(const json& body, const std::function<const ordered_json&()>& ordered,
                                 const std::vector<std::string>& tools, const ServedModel& model) {
    const json& messages = body["messages"];
    if (!messages.is_array()) throw wrong_type("messages", "an array", messages);
    if (messages.empty()) throw bad_field("messages", "'messages' must hold at least one message");
    if (messages.size() > MAX_MESSAGES)
        throw bad_field("messages", "'messages' holds " + std::to_string(messages.size()) + " messages; at most " +
                                        std::to_string(MAX_MESSAGES) + " are accepted");
    if (!model.tokenizer) throw ApiError(400, "this model has no tokenizer: use /v1/completions with token ids");
    std::vector<tokenizer::ChatMessage> chat;
    for (size_t i = 0; i < messages.size(); ++i) {
        const json& m = messages[i];
        const std::string where = "messages[" + std::to_string(i) + "]";
        if (!m.is_object()) throw wrong_type(where, "an object", m);
        if (!m.contains("role") || !m["role"].is_string())
            throw bad_field(where + ".role", where + " needs a string 'role'");
        std::string role = m["role"].get<std::string>();
        if (role == "developer") role = "system";  // OpenAI's newer name for the system role
        if (role != "system" && role != "user" && role != "assistant" && role != "tool")
            throw bad_field(where + ".role", "role '" + excerpt(role) +
                                                 "' is not supported (system, developer, user, "
                                                 "assistant, tool)");
        for (const auto& [key, value] : m.items())
            if (key != "role" && key != "content" && key != "name" && !(role == "assistant" && key == "tool_calls") &&
                !(role == "tool" && key == "tool_call_id"))
                throw bad_field(where + "." + key, "unrecognized field '" + excerpt(key) + "' in " + where);
        tokenizer::ChatMessage cm{role, "", std::nullopt, {}};
        const bool calls = role == "assistant" && m.contains("tool_calls") && !m["tool_calls"].is_null();
        if (calls) cm.tool_calls = call_texts(m["tool_calls"], ordered()["messages"][i]["tool_calls"], where + ".tool_calls");
        // An assistant turn that only calls tools may have null content (OpenAI's clients send that).
        if (!m.contains("content") || (m["content"].is_null() && !calls)) {
            if (!calls) throw bad_field(where + ".content", where + " needs 'content'");
        } else if (!m["content"].is_null()) {
            cm.content = content_text(m["content"], where + ".content");
        }
        chat.push_back(std::move(cm));
    }
    const tokenizer::Tokenizer& tok = *model.tokenizer;
    tokenizer::ChatOptions options;
    options.tools = tools;
    if (!tok.config().chat_template.empty()) {
        try {
            return tokenizer::encode_chat(tok, chat, options);
        } catch (const Error& e) {  // the request asks for what this template cannot write (tools)
            throw ApiError(400, e.what());
        }
    }
    if (!tools.empty() || std::any_of(chat.begin(), chat.end(), [](const auto& c) { return !c.tool_calls.empty(); }))
        throw bad_field("tools", "this model has no chat template, so it cannot be given tools");
    // A folder without a chat template (the embedded demo model is a plain-text model): the
    // contents one per line, so the model continues the text it was given.
    std::string text;
    for (const tokenizer::ChatMessage& m : chat) text += m.content + "\n";
    return tok.encode(text, /*allow_special=*/false);
}

// Token ids of one prompt given as ids: each within the vocabulary.
std::vector<int32_t> prompt_ids(const json& ids_json, const std::string& where, const ServedModel& model) {
    std::vector<int32_t> ids;
    for (const json& id : ids_json) {
        if (!id.is_number_integer() && !id.is_number_unsigned())
            throw bad_field("prompt", "'" + where + "' as an array of token ids must hold integers only, got " +
                                          type_of(id));
        const bool huge = id.is_number_unsigned() && id.get<uint64_t>() > uint64_t(INT64_MAX);
        const int64_t v = huge ? -1 : id.get<int64_t>();
        if (v < 0 || v >= model.vocab_size)
            throw bad_field("prompt", "token id " + excerpt(id.dump()) + " is outside the vocabulary [0, " +
                                          std::to_string(model.vocab_size) + ")");
        ids.push_back(int32_t(v));
    }
    return ids;
}

// A completion's prompts: a string, an array of token ids (one prompt), or an array of strings or of
// arrays of token ids (several, one choice each). An empty prompt is refused by the caller.
// A completion prompt is the model's raw input: special-token text in it ("<|im_start|>", a chat
// template a client applied itself) becomes the control token, as transformers, vLLM and llama.cpp's
// server read it. A chat message's content never does (chat_prompt): there it is the user's text.
std::vector<std::vector<int32_t>> completion_prompts(const json& prompt, const ServedModel& model) {
    const auto encode = [&](const json& s) {
        if (!model.tokenizer) throw bad_field("prompt", "this model has no tokenizer: give 'prompt' as token ids");
        return model.tokenizer->encode(s.get<std::string>(), /*allow_special=*/true);
    };
    if (prompt.is_string()) return {encode(prompt)};
    if (!prompt.is_array())
        throw wrong_type("prompt", "a string, an array of token ids, or an array of strings or of token-id arrays",
                         prompt);
    if (prompt.empty() || (!prompt[0].is_string() && !prompt[0].is_array())) return {prompt_ids(prompt, "prompt", model)};
    if (prompt.size() > MAX_PROMPTS_PER_REQUEST)
        throw bad_field("prompt", "'prompt' holds " + std::to_string(prompt.size()) + " prompts; at most " +
                                      std::to_string(MAX_PROMPTS_PER_REQUEST) + " are accepted in one request");
    std::vector<std::vector<int32_t>> prompts;
    for (size_t i = 0; i < prompt.size(); ++i) {
        const json& p = prompt[i];
        const std::string where = "prompt[" + std::to_string(i) + "]";
        if (p.is_string() && prompt[0].is_string())
            prompts.push_back(encode(p));
        else if (p.is_array() && prompt[0].is_array())
            prompts.push_back(prompt_ids(p, where, model));
        else
            throw bad_field("prompt", "'prompt' as an array of prompts must hold only strings or only arrays of "
                                      "token ids; " + where + " is " + type_of(p));
    }
    return prompts;
}

std::vector<std::string> stop_strings(const json& stop) {
    std::vector<std::string> out;
    if (stop.is_string()) {
        out.push_back(stop.get<std::string>());
    } else if (stop.is_array()) {
        for (const json& s : stop) {
            if (!s.is_string()) throw bad_field("stop", "'stop' must be a string or an array of strings");
            out.push_back(s.get<std::string>());
        }
    } else {
        throw wrong_type("stop", "a string or an array of strings", stop);
    }
    if (out.size() > MAX_STOP_STRINGS)
        throw bad_field("stop", "'stop' holds " + std::to_string(out.size()) + " strings; at most " +
                                    std::to_string(MAX_STOP_STRINGS));
    for (const std::string& s : out)
        if (s.empty() || s.size() > MAX_STOP_BYTES)
            throw bad_field("stop", "each stop string must be 1 to " + std::to_string(MAX_STOP_BYTES) + " bytes");
    return out;
}

// {"token id": bias}: OpenAI's form (ids as strings, biases in [-100, 100], at most 300 entries).
std::vector<std::pair<int32_t, float>> logit_bias(const json& j, const ServedModel& model) {
    if (!j.is_object()) throw wrong_type("logit_bias", "an object of token ids to biases", j);
    if (j.size() > MAX_LOGIT_BIAS)
        throw bad_field("logit_bias", "'logit_bias' holds " + std::to_string(j.size()) + " entries; at most " +
                                          std::to_string(MAX_LOGIT_BIAS));
    std::vector<std::pair<int32_t, float>> out;
    for (const auto& [key, value] : j.items()) {
        int64_t id = -1;
        const bool digits = !key.empty() && key.size() <= 10 && key.find_first_not_of("0123456789") == std::string::npos;
        if (digits) id = std::stoll(key);
        if (id < 0 || id >= model.vocab_size)
            throw bad_field("logit_bias", "logit_bias key '" + excerpt(key) + "' is not a token id in [0, " +
                                              std::to_string(model.vocab_size) + ")");
        if (!value.is_number()) throw wrong_type("logit_bias", "a number for each token id", value);
        const double bias = value.get<double>();
        if (!(bias >= -100 && bias <= 100))
            throw bad_field("logit_bias", "logit_bias values must be in [-100, 100], got " + value.dump());
        out.emplace_back(int32_t(id), float(bias));
    }
    return out;
}

// response_format: {"type": "text"} (the default) or {"type": "json_object"} (JSON mode: true). A
// schema ("json_schema") is refused: the constraint knows JSON's grammar, not a schema's.
bool json_object_format(const json& j, const ServedModel& model) {
    if (!j.is_object()) throw wrong_type("response_format", "an object", j);
    if (!j.contains("type")) throw bad_field("response_format", "'response_format' needs a 'type'");
    if (!j["type"].is_string()) throw wrong_type("response_format.type", "a string", j["type"]);
    const std::string type = j["type"].get<std::string>();
    if (type == "text") return false;
    if (type == "json_schema")
        throw bad_field("response_format.type",
                        "response_format type 'json_schema' is not supported; 'json_object' (any JSON object) is");
    if (type != "json_object")
        throw bad_field("response_format.type",
                        "response_format type '" + excerpt(type) + "' is not one of 'text', 'json_object'");
    if (!model.tokenizer)
        throw bad_field("response_format", "JSON mode needs a tokenizer; this model works with token ids only");
    return true;
}

}  // namespace

json parse_body_object(const std::string& body) {
    json j;
    try {
        j = engine::parse_json_strict(body, "request body");
    } catch (const Error& e) {
        throw ApiError(400, e.what());
    }
    if (!j.is_object()) throw ApiError(400, std::string("the request body must be a JSON object, got ") + type_of(j));
    return j;
}

CompletionRequest parse_completion_request(const std::string& body_text, bool chat, const ServedModel& model) {
    json body = parse_body_object(body_text);
    // null means "not given" for every optional field, as in OpenAI's API.
    for (auto it = body.begin(); it != body.end();) it = it->is_null() ? body.erase(it) : std::next(it);

    static const std::set<std::string> common = {"model",
                                                 "max_tokens",
                                                 "temperature",
                                                 "top_p",
                                                 "top_k",
                                                 "min_p",
                                                 "seed",
                                                 "stop",
                                                 "n",
                                                 "stream",
                                                 "stream_options",
                                                 "logprobs",
                                                 "user",
                                                 "presence_penalty",
                                                 "frequency_penalty",
                                                 "repetition_penalty",
                                                 "logit_bias",
                                                 "ignore_eos",
                                                 "response_format"};
    static const std::set<std::string> chat_only = {"messages",    "max_completion_tokens", "top_logprobs",
                                                    "tools",       "tool_choice",           "parallel_tool_calls"};
    static const std::set<std::string> completion_only = {"prompt", "echo", "suffix", "best_of"};
    for (const auto& [key, value] : body.items())
        if (!common.count(key) && !(chat ? chat_only : completion_only).count(key))
            throw bad_field(key, "Unrecognized request argument supplied: " + excerpt(key));

    if (body.contains("model")) {
        if (!body["model"].is_string()) throw wrong_type("model", "a string", body["model"]);
        if (body["model"] != model.id)
            throw ApiError(404,
                           "The model '" + excerpt(body["model"].get<std::string>()) +
                               "' does not exist; this "
                               "server serves '" +
                               model.id + "'",
                           "invalid_request_error", "model", "model_not_found");
    }
    if (body.contains("best_of")) integer_in(body, "best_of", 1, 1);
    if (body.contains("suffix")) throw bad_field("suffix", "'suffix' is not supported");
    if (body.contains("user") && !body["user"].is_string()) throw wrong_type("user", "a string", body["user"]);

    CompletionRequest r;
    r.chat = chat;
    if (chat) {
        if (!body.contains("messages")) throw bad_field("messages", "'messages' is required");
        std::optional<ordered_json> ordered;
        const auto ordered_body = [&]() -> const ordered_json& {
            if (!ordered) ordered = ordered_json::parse(body_text);  // valid: the strict reader took it
            return *ordered;
        };
        // tool_choice: "auto" (the default with tools) writes the tools into the prompt and reads calls
        // from the reply; "none" does neither. Forcing a call ("required", a named function) would
        // need constrained decoding, which flashport does not do.
        std::string choice = body.contains("tools") ? "auto" : "none";
        if (body.contains("tool_choice")) {
            const json& c = body["tool_choice"];
            if (!c.is_string() || (c != "auto" && c != "none"))
                throw bad_field("tool_choice", "'tool_choice' must be \"auto\" or \"none\" (forcing a call is not "
                                               "supported), got " + excerpt(c.dump()));
            choice = c.get<std::string>();
        }
        if (body.contains("parallel_tool_calls")) boolean(body, "parallel_tool_calls");  // Qwen may call several
        std::vector<std::string> tools;
        if (body.contains("tools")) tools = tool_texts(body["tools"], ordered_body()["tools"]);  // checked either way
        if (choice == "none") tools.clear();
        r.tool_calls = !tools.empty();
        r.prompts.push_back(chat_prompt(body, ordered_body, tools, model));
    } else {
        if (!body.contains("prompt")) throw bad_field("prompt", "'prompt' is required");
        r.prompts = completion_prompts(body["prompt"], model);
        if (body.contains("echo")) r.echo = boolean(body, "echo");
    }
    if (body.contains("n")) r.n = int(integer_in(body, "n", 1, int64_t(MAX_PROMPTS_PER_REQUEST)));
    if (r.prompts.size() * size_t(r.n) > MAX_PROMPTS_PER_REQUEST)
        throw bad_field("n", std::to_string(r.prompts.size()) + " prompts × n = " + std::to_string(r.n) +
                                 " choices; at most " + std::to_string(MAX_PROMPTS_PER_REQUEST) +
                                 " are accepted in one request");
    for (size_t i = 0; i < r.prompts.size(); ++i)
        if (r.prompts[i].empty())
            throw bad_field(chat ? "messages" : "prompt",
                            r.prompts.size() > 1 ? "prompt[" + std::to_string(i) + "] is empty (no tokens)"
                                                 : std::string("the prompt is empty (no tokens)"));

    engine::GenerateOptions& o = r.options;
    o = model.defaults;
    engine::SamplingParams& s = o.sampling;
    if (body.contains("temperature")) {
        s.temperature = float(number_in(body, "temperature", 0, 2));
        s.do_sample = s.temperature > 0;
    }
    if (body.contains("top_p")) s.top_p = float(number_in(body, "top_p", 0, 1));
    if (body.contains("top_k")) {
        const int64_t k = integer_in(body, "top_k", -1, model.vocab_size);
        s.top_k = k < 0 ? 0 : k;  // -1: off, as in vLLM
    }
    if (body.contains("min_p")) s.min_p = float(number_in(body, "min_p", 0, 1));
    if (body.contains("repetition_penalty"))
        s.repetition_penalty = float(number_in(body, "repetition_penalty", 0.01, 100));
    if (body.contains("seed")) {
        s.seed = uint64_t(integer_in(body, "seed", INT64_MIN, INT64_MAX));
    } else if (!model.fixed_seed) {
        static thread_local std::mt19937_64 fresh{std::random_device{}()};
        s.seed = fresh();  // without a seed, two identical requests may differ, as with OpenAI
    }
    try {
        engine::validate(s);
    } catch (const Error& e) {
        throw ApiError(400, e.what());
    }
    if (body.contains("presence_penalty")) r.presence_penalty = float(number_in(body, "presence_penalty", -2, 2));
    if (body.contains("frequency_penalty")) r.frequency_penalty = float(number_in(body, "frequency_penalty", -2, 2));
    if (body.contains("logit_bias")) r.logit_bias = logit_bias(body["logit_bias"], model);
    if (body.contains("response_format")) r.json_object = json_object_format(body["response_format"], model);
    if (body.contains("stop")) o.stop.stop_strings = stop_strings(body["stop"]);
    if (!o.stop.stop_strings.empty() && !model.tokenizer)
        throw bad_field("stop", "stop strings need a tokenizer; this model works with token ids only");
    if (body.contains("ignore_eos")) o.stop.ignore_eos = boolean(body, "ignore_eos");

    if (body.contains("stream")) r.stream = boolean(body, "stream");
    if (r.stream && r.prompts.size() * size_t(r.n) > 1)
        throw bad_field("stream", "streaming takes one choice per request (one prompt, n = 1); this one asks for " +
                                      std::to_string(r.prompts.size() * size_t(r.n)));
    if (body.contains("stream_options")) {
        const json& so = body["stream_options"];
        if (!r.stream) throw bad_field("stream_options", "'stream_options' is only allowed with stream: true");
        if (!so.is_object()) throw wrong_type("stream_options", "an object", so);
        for (const auto& [key, value] : so.items()) {
            if (key != "include_usage")
                throw bad_field("stream_options." + key, "unrecognized field in stream_options");
            if (!value.is_boolean()) throw wrong_type("stream_options.include_usage", "a boolean", value);
            r.include_usage = value.get<bool>();
        }
    }
    if (chat) {
        const bool logprobs = body.contains("logprobs") && boolean(body, "logprobs");
        if (body.contains("top_logprobs")) {
            if (!logprobs) throw bad_field("top_logprobs", "'top_logprobs' needs 'logprobs': true");
            r.top_logprobs = int(integer_in(body, "top_logprobs", 0, MAX_TOP_LOGPROBS_CHAT));
        } else if (logprobs) {
            r.top_logprobs = 0;
        }
    } else if (body.contains("logprobs")) {
        r.top_logprobs = int(integer_in(body, "logprobs", 0, MAX_LOGPROBS_COMPLETION));
    }

    // Lengths: each prompt and its reply must fit in the context together (the longest prompt decides).
    size_t longest = 0;
    for (const std::vector<int32_t>& p : r.prompts) longest = std::max(longest, p.size());
    const int64_t prompt_len = int64_t(longest);
    if (prompt_len >= model.context)
        throw ApiError(400,
                       "This model's maximum context length is " + std::to_string(model.context) +
                           " tokens; the prompt alone is " + std::to_string(prompt_len) + " tokens",
                       "invalid_request_error", chat ? "messages" : "prompt", "context_length_exceeded");
    const char* max_field = body.contains("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    if (body.contains(max_field)) {
        // 0 only with echo: the prompt scored (with logprobs) or repeated, nothing generated.
        const int64_t max_new = integer_in(body, max_field, r.echo ? 0 : 1, model.context);
        if (prompt_len + max_new > model.context)
            throw ApiError(400,
                           "This model's maximum context length is " + std::to_string(model.context) +
                               " tokens. However, you requested " + std::to_string(prompt_len + max_new) + " tokens (" +
                               std::to_string(prompt_len) + " in the prompt, " + std::to_string(max_new) +
                               " for the completion)",
                           "invalid_request_error", max_field, "context_length_exceeded");
        o.stop.max_new_tokens = max_new;
    } else {
        // The server default, cut to what the context leaves.
        const int64_t room = model.context - prompt_len;
        o.stop.max_new_tokens = o.stop.max_new_tokens > 0 ? std::min(o.stop.max_new_tokens, room) : room;
    }
    return r;
}

}  // namespace flashport::server
