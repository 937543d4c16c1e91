// The pre-tokenizer stage: splits normalised text into words, which BPE then encodes one by one (BPE
// never merges across words). Supported, as Qwen2/Qwen3 (and GPT-2 style files) use them:
//   - Split with a Regex or String pattern, behavior "Isolated", invert false: each match is a word,
//     and so is each gap between matches;
//   - ByteLevel with add_prefix_space false, last in the chain; use_regex true adds GPT-2's split.
// Regexes run in PCRE2 with PCRE2_UTF | PCRE2_UCP, as the patterns are written for Unicode semantics:
// Qwen's needs the lookahead `\s+(?!\S)`, and without UCP `\s` misses U+3000 and NBSP while `\p{L}`
// works, which silently changes the split of CJK text.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "json_util.h"

namespace flashport::tokenizer {

// A compiled PCRE2 pattern (JIT-compiled where the platform allows). Thread-safe for matching.
class Regex {
public:
    // `literal`: match the pattern as a plain string (tokenizer.json's {"String": ...} form).
    Regex(std::string_view pattern, bool literal, std::string_view where);
    ~Regex();
    Regex(const Regex&) = delete;
    Regex& operator=(const Regex&) = delete;

    // Appends to `out` the matches of the pattern in `text` and the non-empty gaps between them, in
    // order ("Isolated"). Empty matches are skipped. `text` must be valid UTF-8.
    void split_isolated(std::string_view text, std::vector<std::string_view>& out) const;

private:
    struct Code;
    std::unique_ptr<Code> code_;
    std::string where_;
};

class PreTokenizer {
public:
    // `j` is the "pre_tokenizer" member; `where` names it in errors.
    static PreTokenizer from_json(const json_util::Json& j, std::string_view where);

    // Words of `text` in order; they view into `text`. Every byte of `text` lands in exactly one word.
    void split(std::string_view text, std::vector<std::string_view>& words) const;

private:
    std::vector<std::shared_ptr<const Regex>> stages_;  // applied in order, each to the previous pieces
};

}  // namespace flashport::tokenizer
