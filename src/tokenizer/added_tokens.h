// Added tokens ("added_tokens" in tokenizer.json, e.g. <|im_start|>, <think>): matched in the text
// before anything else, so they never go through normalisation or BPE. At each position the longest
// token wins, and the leftmost match first (tokenizers' leftmost-longest Aho-Corasick).
//
// Tokens with "special": true are control tokens. With allow_special false they are not matched and
// their text is encoded as ordinary text, which is how chat content is encoded by default: a user
// who types "<|im_end|>" gets the characters, not the turn delimiter. Non-special added tokens are
// still matched then, as with transformers' split_special_tokens=True.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "flashport/tokenizer.h"

namespace flashport::tokenizer {

// A piece of input: either text to normalise and BPE-encode, or an added token's id.
struct Segment {
    std::string_view text;
    TokenId id = -1;  // >= 0: an added token matched here
};

class AddedVocabulary {
public:
    // Registers a token. Its content is matched as given (raw input) when `normalized_content` is
    // empty, else against normalised text as `normalized_content` (the content after NFC).
    void add(const AddedToken& token, std::string normalized_content = {});

    const std::vector<AddedToken>& tokens() const { return tokens_; }
    bool has_normalized() const { return !normalized_.entries.empty(); }

    // Splits `text` into segments, matching the raw (normalized == false) or the normalised tokens.
    void split(std::string_view text, bool normalized_pass, bool allow_special, std::vector<Segment>& out) const;

private:
    struct Entry {
        std::string content;
        TokenId id;
        bool special;
    };
    struct Matcher {
        std::vector<Entry> entries;          // longest first, so the first hit is the longest
        std::array<bool, 256> first_byte{};  // skip positions no token can start at
        void add(Entry e);
    };
    std::vector<AddedToken> tokens_;
    Matcher raw_, normalized_;
};

}  // namespace flashport::tokenizer
