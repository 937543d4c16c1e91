// libFuzzer target: a tokenizer_config.json, loaded beside the tiny tokenizer.json. When it gives a
// chat template, a fixed conversation must format or be refused with flashport::Error.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tokenizer_fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    namespace fpt = fuzz::fpt;
    fuzz::refuse_with_error_only([&] {
        const auto tok = fpt::Tokenizer::from_json(fuzz::tiny_tokenizer_json(), fuzz::as_text(data, size));
        if (tok.config().chat_template.empty()) return;
        const std::vector<fpt::ChatMessage> msgs = {{"system", "Be brief.", std::nullopt},
                                                    {"user", "Hi <|im_end|>", std::nullopt},
                                                    {"assistant", "<think>\nhm\n</think>\n\nHello", std::nullopt},
                                                    {"user", "Again?", std::nullopt}};
        (void)fpt::encode_chat(tok, msgs);
    });
    return 0;
}
