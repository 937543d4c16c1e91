// libFuzzer target for the tokenizer's parsers and encoder (build: see CMakeLists.txt here).
// The first input byte picks the mode:
//   even: the rest is a tokenizer.json; loading it must succeed or throw flashport::Error, and a
//         loaded tokenizer must encode and decode a fixed text;
//   odd:  the rest is text for the tiny tokenizer: encode (both allow_special settings), decode and
//         stream-decode must agree, or encode must reject invalid UTF-8 with flashport::Error.
// Seeds: tests/data/tokenizer/tiny and tests/data/tokenizer/broken.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "flashport/error.h"
#include "flashport/tokenizer.h"

namespace fpt = flashport::tokenizer;

namespace {

const fpt::Tokenizer& tiny() {
    static const auto tok = fpt::Tokenizer::from_dir(FP_TOKENIZER_DATA_DIR "/tiny");
    return tok;
}

void check(bool ok) {
    if (!ok) std::abort();
}

void fuzz_text(const fpt::Tokenizer& tok, const std::string& text) {
    for (const bool allow_special : {true, false}) {
        std::vector<fpt::TokenId> ids;
        try {
            ids = tok.encode(text, allow_special);
        } catch (const flashport::Error&) {
            return;  // invalid UTF-8
        }
        const std::string whole = tok.decode(ids);
        fpt::StreamDecoder stream(tok);
        std::string streamed;
        for (const auto id : ids) streamed += stream.push(id);
        streamed += stream.finish();
        check(streamed == whole);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
    if (data[0] % 2 == 0) {
        try {
            const auto tok = fpt::Tokenizer::from_json(rest);
            fuzz_text(tok, "Hello, world! 你好 <|im_end|> 123");
        } catch (const flashport::Error&) {
        }
    } else {
        fuzz_text(tiny(), rest);
    }
    return 0;
}
