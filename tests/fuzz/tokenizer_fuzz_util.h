// Pieces shared by the tokenizer's fuzz targets: the tiny test tokenizer and the checks a loaded
// tokenizer must pass on any text.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "flashport/tokenizer.h"
#include "fuzz_util.h"

namespace fuzz {

namespace fpt = flashport::tokenizer;

// tests/data/tokenizer/tiny/tokenizer.json: a small byte-level BPE with <|im_start|> and <|im_end|>.
inline const std::string& tiny_tokenizer_json() {
    static const std::string text = [] {
        std::ifstream in(FP_FUZZ_DATA_DIR "/tokenizer/tiny/tokenizer.json", std::ios::binary);
        std::ostringstream ss;
        ss << in.rdbuf();
        require(in.good() && !ss.str().empty(), "cannot read " FP_FUZZ_DATA_DIR "/tokenizer/tiny/tokenizer.json");
        return ss.str();
    }();
    return text;
}

inline const fpt::Tokenizer& tiny_tokenizer() {
    static const auto tok = fpt::Tokenizer::from_json(tiny_tokenizer_json());
    return tok;
}

// Encodes `text` both ways (special-token text parsed or not); decoding the ids whole and through
// the streaming decoder must agree. Invalid UTF-8 may only be refused with flashport::Error.
inline void check_encode_decode(const fpt::Tokenizer& tok, std::string_view text) {
    for (const bool allow_special : {true, false}) {
        std::vector<fpt::TokenId> ids;
        try {
            ids = tok.encode(text, allow_special);
        } catch (const flashport::Error&) {
            return;
        }
        const std::string whole = tok.decode(ids);
        fpt::StreamDecoder stream(tok);
        std::string streamed;
        for (const auto id : ids) streamed += stream.push(id);
        streamed += stream.finish();
        require(streamed == whole, "streamed decoding differs from decode()");
    }
}

}  // namespace fuzz
