// libFuzzer target: a chat template (chat_template.jinja) and a conversation, rendered by
// format_chat and encode_chat with the tiny tokenizer. The input is NUL-separated fields:
//   <flags byte><template> \0 <role> \0 <content> \0 <role> \0 <content> ...
// flags: bit 0 add_generation_prompt, bit 1 enable_thinking given, bit 2 its value, bit 3
// parse_special_in_content. An assistant content holding \x1f is split there into content and
// reasoning_content. With special-token text parsed, encode_chat must equal encode() of
// format_chat's text, as the header promises.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer_fuzz_util.h"

namespace {

std::vector<std::string_view> split_fields(std::string_view s) {
    std::vector<std::string_view> out;
    for (std::size_t at = 0;;) {
        const std::size_t nul = s.find('\0', at);
        out.push_back(s.substr(at, nul == std::string_view::npos ? std::string_view::npos : nul - at));
        if (nul == std::string_view::npos) return out;
        at = nul + 1;
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    namespace fpt = fuzz::fpt;
    const std::uint8_t flags = data[0];
    const auto fields = split_fields(fuzz::as_text(data + 1, size - 1));
    fpt::ChatOptions opt;
    opt.add_generation_prompt = flags & 1;
    if (flags & 2) opt.enable_thinking = (flags & 4) != 0;
    opt.parse_special_in_content = (flags & 8) != 0;
    std::vector<fpt::ChatMessage> msgs;
    for (std::size_t i = 1; i + 1 < fields.size(); i += 2) {
        fpt::ChatMessage m{std::string(fields[i]), std::string(fields[i + 1]), std::nullopt};
        if (const std::size_t sep = m.content.find('\x1f'); m.role == "assistant" && sep != std::string::npos) {
            m.reasoning_content = m.content.substr(sep + 1);
            m.content.resize(sep);
        }
        msgs.push_back(std::move(m));
    }
    fuzz::refuse_with_error_only([&] {
        const auto tok = fpt::Tokenizer::from_json(fuzz::tiny_tokenizer_json(), {}, fields[0]);
        const std::string text = fpt::format_chat(tok, msgs, opt);
        const auto ids = fpt::encode_chat(tok, msgs, opt);
        if (opt.parse_special_in_content)
            fuzz::require(ids == tok.encode(text, true), "encode_chat differs from encode(format_chat(...))");
    });
    return 0;
}
