// libFuzzer target: arbitrary text through the tiny tokenizer's encoder, decoder and streaming
// decoder (check_encode_decode).
#include <cstddef>
#include <cstdint>

#include "tokenizer_fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    fuzz::check_encode_decode(fuzz::tiny_tokenizer(), fuzz::as_text(data, size));
    return 0;
}
