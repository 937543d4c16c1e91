// The normalizer stage of tokenizer.json. Qwen's is NFC; a null normalizer and a Sequence of NFC
// steps are accepted too. Anything else is refused when loading, naming the type, because skipping a
// normalizer would silently change the ids.
#pragma once

#include <string>
#include <string_view>

#include "json_util.h"

namespace flashport::tokenizer {

class Normalizer {
public:
    // `j` is the "normalizer" member (may be JSON null); `where` names it in errors.
    static Normalizer from_json(const json_util::Json& j, std::string_view where);

    bool is_identity() const { return !nfc_; }

    // NFC of valid UTF-8 text (utf8proc).
    std::string apply(std::string_view text) const;

private:
    bool nfc_ = false;
};

// Unicode NFC via utf8proc; the input must be valid UTF-8. ASCII is returned unchanged without a call.
std::string nfc(std::string_view text);

}  // namespace flashport::tokenizer
