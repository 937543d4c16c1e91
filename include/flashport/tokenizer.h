// Tokenizer: Hugging Face tokenizer.json (byte-level BPE, as Qwen2/Qwen2.5/Qwen3 ship it), the
// optional tokenizer_config.json, Qwen's ChatML chat formatting, and streaming decoding.
//
//   auto tok = flashport::tokenizer::Tokenizer::from_dir("path/to/model");
//   std::vector<TokenId> ids = tok.encode("Hello, world");          // no BOS/EOS is ever added
//   std::string text = tok.decode(ids);
//
// The ids are those of Hugging Face's tokenizers for the same file (tested against the real Qwen3
// tokenizer). Components a file may use that flashport does not implement are refused when loading,
// with an error naming the component, rather than producing different ids.
//
// Every error is a flashport::Error. A loaded Tokenizer is immutable apart from an internal cache
// and may be used from several threads at once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace flashport::tokenizer {

using TokenId = std::int32_t;

// A token from tokenizer.json's "added_tokens" (or tokenizer_config.json's "added_tokens_decoder").
struct AddedToken {
    TokenId id = -1;
    std::string content;
    bool special = false;     // a control token (<|im_start|>...): see Tokenizer::encode's allow_special
    bool normalized = false;  // matched against normalised (NFC) text rather than the raw input
};

// What tokenizer_config.json (and a chat_template.jinja beside it) adds. All optional.
struct TokenizerConfig {
    struct Special {
        std::string text;
        TokenId id = -1;
    };
    std::optional<Special> bos, eos, pad, unk;
    std::string chat_template;   // the default template; empty when the folder has none
    bool add_bos_token = false;  // recorded for callers; encode() itself never adds tokens
};

class Tokenizer {
public:
    // Loads dir/tokenizer.json, plus dir/tokenizer_config.json and dir/chat_template.jinja when present.
    static Tokenizer from_dir(const std::filesystem::path& dir);
    // The same from file contents. `config_json` may be empty; `origin` prefixes error messages.
    static Tokenizer from_json(std::string_view tokenizer_json, std::string_view config_json = {},
                               std::string_view chat_template_jinja = {}, std::string_view origin = "tokenizer.json");

    Tokenizer(Tokenizer&&) noexcept;
    Tokenizer& operator=(Tokenizer&&) noexcept;
    ~Tokenizer();

    // Token ids of `text`, which must be valid UTF-8 (an Error names the first bad byte otherwise).
    // Nothing is added (no BOS/EOS): transformers' add_special_tokens=False.
    // allow_special true: special-token text in `text` becomes the control token, as transformers
    // does. false: it is encoded as plain text (the default for chat content; see encode_chat).
    std::vector<TokenId> encode(std::string_view text, bool allow_special = true) const;

    // Text of `ids`. Bytes that do not form valid UTF-8 (a character cut off, or garbage the model
    // produced) become U+FFFD, as tokenizers' decode does. An id outside the vocabulary is an Error.
    std::string decode(std::span<const TokenId> ids, bool skip_special = false) const;

    // Raw bytes of one token (possibly part of a UTF-8 character). Error for an unknown id.
    std::string_view token_bytes(TokenId id) const;
    // Id of a token given as tokenizer.json spells it (added-token content, or the byte-level
    // alphabet of the vocabulary: "Ġthe"), if there is one.
    std::optional<TokenId> token_to_id(std::string_view token) const;
    bool is_special(TokenId id) const;
    // One past the largest id (the embedding table must have at least this many rows).
    std::size_t vocab_size() const;

    const std::vector<AddedToken>& added_tokens() const;
    const TokenizerConfig& config() const;

private:
    struct Impl;
    explicit Tokenizer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// Decodes ids one at a time for streaming output. Bytes of a character split across tokens are held
// back until the character is complete, so no fragment or U+FFFD is printed for it in between. The
// concatenation of every push() and finish() equals decode() of all the ids.
class StreamDecoder {
public:
    explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special = false);
    // Text that became complete with this token (often empty for a partial character).
    std::string push(TokenId id);
    // Whatever is still held back, as U+FFFD if incomplete; the decoder is then empty again.
    std::string finish();

private:
    const Tokenizer* tokenizer_;
    bool skip_special_;
    std::string pending_;
};

// ---- Chat (Qwen ChatML) -------------------------------------------------------------------------

// A function call in an assistant turn, as Qwen's templates write it: the function's name, and its
// arguments as JSON text in Python's json.dumps form (what the template's `tojson` writes for the
// arguments object; callers holding JSON text parse it and write it that way, as vLLM does).
struct ChatToolCall {
    std::string name;
    std::string arguments;
};

struct ChatMessage {
    std::string role;  // "system", "user", "assistant" or "tool"
    std::string content;
    // Qwen3: an assistant turn's thinking, given separately. When absent, a "<think>...</think>"
    // block inside `content` is split off, as Qwen3's template does.
    std::optional<std::string> reasoning_content;
    std::vector<ChatToolCall> tool_calls = {};  // an assistant turn's calls, written after its content
};

struct ChatOptions {
    bool add_generation_prompt = true;  // end with "<|im_start|>assistant\n" for the model to continue
    // Qwen3: false appends an empty "<think>\n\n</think>\n\n" to the generation prompt (thinking off).
    // Unset behaves as transformers' default (the variable undefined in the template).
    std::optional<bool> enable_thinking;
    // Content may contain special-token text ("<|im_end|>"). false (default): it is encoded as plain
    // text, so a user cannot forge turns. true: parsed as control tokens, as transformers does.
    bool parse_special_in_content = false;
    // The functions the model may call, each as JSON text in Python's json.dumps form (the template's
    // `tool | tojson`). Non-empty: the system turn carries Qwen's "# Tools" block listing them.
    std::vector<std::string> tools = {};
};

// The prompt text transformers' apply_chat_template renders for these messages with the tokenizer's
// chat template (which must be Qwen's ChatML: Qwen2, Qwen2.5 or Qwen3 style). Errors for a folder
// without a chat template, a non-ChatML template, or a role the template does not render.
std::string format_chat(const Tokenizer& tokenizer, std::span<const ChatMessage> messages,
                        const ChatOptions& options = {});

// The ids of that prompt. The turn delimiters are always control tokens; content follows
// options.parse_special_in_content. With content free of special-token text the ids equal
// encode(format_chat(...)).
std::vector<TokenId> encode_chat(const Tokenizer& tokenizer, std::span<const ChatMessage> messages,
                                 const ChatOptions& options = {});

// ---- `flashport tokenize` --------------------------------------------------------------------

struct TokenizeOptions {
    bool json = false;          // a JSON array "[1,2,3]" instead of space-separated ids
    bool allow_special = true;  // special-token text in the input becomes control tokens
};

// Reads all of `in` (the text, byte for byte, newlines included) and writes its ids followed by a
// newline. Adds no special tokens.
void tokenize_stream(const Tokenizer& tokenizer, std::istream& in, std::ostream& out,
                     const TokenizeOptions& options = {});

}  // namespace flashport::tokenizer
