// libFuzzer target: a tokenizer.json through Tokenizer::from_json; a tokenizer it accepts must
// encode and decode a fixed text (check_encode_decode).
#include <cstddef>
#include <cstdint>

#include "tokenizer_fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    fuzz::refuse_with_error_only([&] {
        const auto tok = fuzz::fpt::Tokenizer::from_json(fuzz::as_text(data, size));
        fuzz::check_encode_decode(tok, "Hello, world! 你好 <|im_end|> 123\n\n  x");
    });
    return 0;
}
