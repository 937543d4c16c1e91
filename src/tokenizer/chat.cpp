// Qwen's ChatML chat formatting, reproducing what transformers' apply_chat_template renders with the
// templates Qwen ships (we do not run Jinja). The template text only selects the behaviours:
//   - Qwen2 / Qwen2.5: when the chat does not open with a system message, a default one is inserted;
//     its text is read from the template's '<|im_start|>system\n...<|im_end|>' literal.
//   - Qwen3 (the template mentions reasoning_content): assistant turns after the last user query
//     carry a "<think>\n...\n</think>\n\n" block, earlier ones lose theirs; enable_thinking=false
//     appends an empty think block to the generation prompt.
//   - Templates that render tool results as <tool_response> inside a user turn (Qwen2.5, Qwen3).
//   - Tool calling (Qwen2.5, Qwen3: the template carries Qwen's "# Tools" text): the tools listed in the
//     system turn, after the system message or Qwen2.5's default one; an assistant turn's calls as
//     <tool_call> blocks after its content. The two templates write these the same way.
// The goldens in tests/data/tokenizer/chat_goldens.json come from transformers itself.
#include <optional>
#include <string>
#include <vector>

#include "flashport/error.h"
#include "flashport/tokenizer.h"

namespace flashport::tokenizer {
namespace {

constexpr std::string_view kStart = "<|im_start|>";
constexpr std::string_view kEnd = "<|im_end|>";

struct ChatStyle {
    std::optional<std::string> default_system;
    bool thinking = false;         // Qwen3's <think> handling of assistant turns
    bool thinking_switch = false;  // enable_thinking=false adds an empty think block to the prompt
    bool tool_responses = false;   // role "tool" rendered as <tool_response> in a user turn
    bool tool_calls = false;       // Qwen's "# Tools" system block and <tool_call> turns
};

// Qwen2.5's and Qwen3's tool prompt around the listed tools, as rendered. Their templates hold it as
// double-quoted literals, where it is checked for (jinja_quoted) before tools are rendered at all.
constexpr std::string_view kToolsHead =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with "
    "function signatures within <tools></tools> XML tags:\n<tools>";
constexpr std::string_view kToolsTail =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call>";
// An assistant turn's call opens with this (the template's '<tool_call>\n{"name": "' literal).
constexpr std::string_view kCallOpen = "<tool_call>\n{\"name\": \"";

// s as the body of a double-quoted Jinja literal: newlines and quotes escaped.
std::string jinja_quoted(std::string_view s) {
    std::string out;
    for (char c : s) {
        if (c == '\n') out += "\\n";
        else if (c == '"') out += "\\\"";
        else out.push_back(c);
    }
    return out;
}

// Undoes the escapes of a Jinja string literal.
std::string unescape(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\\' && i + 1 < s.size()) {
            const char c = s[++i];
            out.push_back(c == 'n' ? '\n' : c == 't' ? '\t' : c);
        } else {
            out.push_back(s[i]);
        }
    }
    return out;
}

// The literal system turn a Qwen2/Qwen2.5 template inserts when the chat has no system message:
// '<|im_start|>system\nYou are ...<|im_end|>\n' inside one quoted literal. A template that only
// concatenates messages[0].content there (Qwen3) has a quote right after "system\n" and no default.
std::optional<std::string> default_system(std::string_view tmpl) {
    for (const std::string_view head :
         {std::string_view("<|im_start|>system\\n"), std::string_view("<|im_start|>system\n")}) {
        for (std::size_t at = tmpl.find(head); at != std::string_view::npos; at = tmpl.find(head, at + 1)) {
            const std::size_t begin = at + head.size();
            const std::size_t end = tmpl.find(kEnd, begin);
            const std::size_t quote = tmpl.find_first_of("'\"", begin);
            if (end != std::string_view::npos && (quote == std::string_view::npos || end < quote) && end > begin)
                return unescape(tmpl.substr(begin, end - begin));
        }
    }
    return std::nullopt;
}

ChatStyle detect_style(const Tokenizer& tok) {
    const std::string& t = tok.config().chat_template;
    FP_CHECK(!t.empty(),
             "this tokenizer has no chat template (tokenizer_config.json chat_template or chat_template.jinja), "
             "which chat formatting needs");
    FP_CHECK(
        t.find(kStart) != std::string::npos && t.find(kEnd) != std::string::npos,
        "the chat template is not ChatML (no <|im_start|> / <|im_end|>): flashport formats Qwen's ChatML chats only");
    FP_CHECK(tok.token_to_id(kStart) && tok.token_to_id(kEnd),
             "the chat template uses <|im_start|> and <|im_end|>, "
             "but the tokenizer has no such tokens");
    ChatStyle s;
    s.default_system = default_system(t);
    s.thinking = t.find("reasoning_content") != std::string::npos;
    s.thinking_switch = t.find("enable_thinking") != std::string::npos;
    s.tool_responses = t.find("<tool_response>") != std::string::npos;
    s.tool_calls = t.find(jinja_quoted(kToolsHead)) != std::string::npos &&
                   t.find(jinja_quoted(kToolsTail)) != std::string::npos &&
                   t.find("<tool_call>\\n{\"name\": \"") != std::string::npos;
    return s;
}

// Python's str.lstrip('\n') / rstrip('\n') / strip('\n'), as the Qwen3 template uses them.
std::string_view lstrip_nl(std::string_view s) {
    while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
    return s;
}
std::string_view rstrip_nl(std::string_view s) {
    while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
    return s;
}
// s.split(sep)[0] and s.split(sep)[-1].
std::string_view before_first(std::string_view s, std::string_view sep) {
    return s.substr(0, s.find(sep));
}
std::string_view after_last(std::string_view s, std::string_view sep) {
    const std::size_t at = s.rfind(sep);
    return at == std::string_view::npos ? s : s.substr(at + sep.size());
}

// The rendered chat as text runs between control tokens, so that content can be encoded without
// parsing special tokens while the delimiters stay control tokens.
struct Piece {
    bool control;
    std::string text;
};

class Renderer {
public:
    std::vector<Piece> pieces;
    void control(std::string_view token) { pieces.push_back({true, std::string(token)}); }
    void text(std::string_view s) {
        if (s.empty()) return;
        if (pieces.empty() || pieces.back().control) pieces.push_back({false, {}});
        pieces.back().text.append(s);
    }
    void turn(std::string_view role, std::string_view body) {
        control(kStart);
        text(role);
        text("\n");
        text(body);
        control(kEnd);
        text("\n");
    }
};

// An assistant turn's calls after its content: each a <tool_call> block, on a line of its own unless it
// is the first and the turn has no content (Qwen3; Qwen2.5 passes has_content true: every call on its own line).
void render_calls(Renderer& r, const ChatMessage& m, bool has_content) {
    for (std::size_t k = 0; k < m.tool_calls.size(); ++k) {
        if (k > 0 || has_content) r.text("\n");
        r.text(kCallOpen);
        r.text(m.tool_calls[k].name);
        r.text("\", \"arguments\": ");
        r.text(m.tool_calls[k].arguments);
        r.text("}\n</tool_call>");
    }
}

void render_assistant(Renderer& r, const ChatStyle& style, const ChatMessage& m, bool after_last_query, bool last) {
    if (!style.thinking) {
        if (m.tool_calls.empty()) {
            r.turn(m.role, m.content);
            return;
        }
        // Qwen2.5: the content, if any, on the next line; then each call on a line of its own.
        r.control(kStart);
        r.text(m.role);
        if (!m.content.empty()) {
            r.text("\n");
            r.text(m.content);
        }
        render_calls(r, m, /*has_content=*/true);
        r.control(kEnd);
        r.text("\n");
        return;
    }
    std::string_view content = m.content;
    std::string_view reasoning;
    if (m.reasoning_content) {
        reasoning = *m.reasoning_content;
    } else if (content.find("</think>") != std::string_view::npos) {
        content = lstrip_nl(after_last(m.content, "</think>"));
        reasoning = lstrip_nl(after_last(rstrip_nl(before_first(m.content, "</think>")), "<think>"));
    }
    r.control(kStart);
    r.text(m.role);
    if (after_last_query && (last || !reasoning.empty())) {
        r.text("\n<think>\n");
        r.text(rstrip_nl(lstrip_nl(reasoning)));
        r.text("\n</think>\n\n");
        r.text(lstrip_nl(content));
    } else {
        r.text("\n");
        r.text(content);
    }
    render_calls(r, m, !content.empty());
    r.control(kEnd);
    r.text("\n");
}

std::vector<Piece> render(const Tokenizer& tok, std::span<const ChatMessage> msgs, const ChatOptions& opt) {
    const ChatStyle style = detect_style(tok);
    FP_CHECK(!msgs.empty(), "a chat needs at least one message");
    for (const auto& m : msgs) {
        FP_CHECK(m.role == "system" || m.role == "user" || m.role == "assistant" || m.role == "tool", "chat role \"",
                 m.role, "\" is not one Qwen's template renders (system, user, assistant, tool)");
    }
    bool calls = !opt.tools.empty();
    for (const auto& m : msgs) calls = calls || !m.tool_calls.empty();
    FP_CHECK(!calls || style.tool_calls,
             "this chat template does not write Qwen's tool prompt (its \"# Tools\" block and <tool_call> "
             "turns), so tools and tool calls cannot be formatted for it");
    Renderer r;
    const std::size_t n = msgs.size();
    if (!opt.tools.empty()) {
        // The system message (or Qwen2.5's default one), then the tools, in one system turn.
        const std::string* system = msgs[0].role == "system" ? &msgs[0].content
                                    : style.default_system    ? &*style.default_system
                                                              : nullptr;
        r.control(kStart);
        r.text("system\n");
        if (system) {
            r.text(*system);
            r.text("\n\n");
        }
        r.text(kToolsHead);
        for (const std::string& tool : opt.tools) {
            r.text("\n");
            r.text(tool);
        }
        r.text(kToolsTail);
        r.control(kEnd);
        r.text("\n");
    } else if (msgs[0].role == "system") {
        r.turn("system", msgs[0].content);
    } else if (style.default_system) {
        r.turn("system", *style.default_system);
    }
    // Qwen3: the last user message that is not a wrapped tool result.
    std::size_t last_query = n - 1;
    for (std::size_t k = n; k-- > 0;) {
        const std::string& c = msgs[k].content;
        const bool tool_result = c.starts_with("<tool_response>") && c.ends_with("</tool_response>");
        if (msgs[k].role == "user" && !tool_result) {
            last_query = k;
            break;
        }
    }
    for (std::size_t i = 0; i < n; ++i) {
        const ChatMessage& m = msgs[i];
        if (m.role == "system" && i == 0) continue;  // already rendered above
        if (m.role == "assistant") {
            render_assistant(r, style, m, i > last_query, i + 1 == n);
        } else if (m.role == "tool" && style.tool_responses) {
            if (i == 0 || msgs[i - 1].role != "tool") {
                r.control(kStart);
                r.text("user");
            }
            r.text("\n<tool_response>\n");
            r.text(m.content);
            r.text("\n</tool_response>");
            if (i + 1 == n || msgs[i + 1].role != "tool") {
                r.control(kEnd);
                r.text("\n");
            }
        } else {
            r.turn(m.role, m.content);
        }
    }
    if (opt.add_generation_prompt) {
        r.control(kStart);
        r.text("assistant\n");
        if (style.thinking_switch && opt.enable_thinking == false) r.text("<think>\n\n</think>\n\n");
    }
    return r.pieces;
}

}  // namespace

std::string format_chat(const Tokenizer& tokenizer, std::span<const ChatMessage> messages, const ChatOptions& options) {
    std::string out;
    for (const Piece& p : render(tokenizer, messages, options)) out += p.text;
    return out;
}

std::vector<TokenId> encode_chat(const Tokenizer& tokenizer, std::span<const ChatMessage> messages,
                                 const ChatOptions& options) {
    std::vector<TokenId> ids;
    for (const Piece& p : render(tokenizer, messages, options)) {
        if (p.control) {
            ids.push_back(*tokenizer.token_to_id(p.text));
        } else {
            // A run holds template text and content together, tokenized as one string exactly as
            // transformers tokenizes the text between two special tokens.
            const auto run = tokenizer.encode(p.text, options.parse_special_in_content);
            ids.insert(ids.end(), run.begin(), run.end());
        }
    }
    return ids;
}

}  // namespace flashport::tokenizer
