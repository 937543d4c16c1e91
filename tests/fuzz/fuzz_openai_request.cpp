// libFuzzer target: an HTTP request body through `flashport serve`'s request parser
// (parse_completion_request), as chat (first byte odd) or as text completion, with the tiny test
// tokenizer. A bad body may only be refused with ApiError (the 4xx the server sends) or
// flashport::Error; a body it accepts must fit the context it was checked against, every prompt of
// it (a completions batch), with ids in the vocabulary.
#include <cstddef>
#include <cstdint>

#include "server/api_error.h"
#include "server/openai_request.h"
#include "tokenizer_fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    static const flashport::server::ServedModel model = [] {
        flashport::server::ServedModel m;
        m.id = "tiny";
        m.tokenizer = &fuzz::tiny_tokenizer();
        m.context = 64;
        m.vocab_size = int64_t(m.tokenizer->vocab_size());
        m.defaults.stop.max_new_tokens = 16;
        return m;
    }();
    const bool chat = (data[0] & 1) != 0;
    const std::string body(fuzz::as_text(data + 1, size - 1));
    try {
        const auto r = flashport::server::parse_completion_request(body, chat, model);
        fuzz::require(!r.prompts.empty() && r.prompts.size() <= flashport::server::MAX_PROMPTS_PER_REQUEST,
                      "an accepted request has 1 to MAX_PROMPTS_PER_REQUEST prompts");
        fuzz::require(!chat || r.prompts.size() == 1, "a chat request has one prompt");
        fuzz::require(r.n >= 1 && r.prompts.size() * size_t(r.n) <= flashport::server::MAX_PROMPTS_PER_REQUEST,
                      "an accepted request asks for 1 to MAX_PROMPTS_PER_REQUEST choices");
        fuzz::require(!r.stream || (r.prompts.size() == 1 && r.n == 1), "a streamed request has one choice");
        for (const auto& prompt : r.prompts) {
            fuzz::require(!prompt.empty(), "an accepted request's prompts have tokens");
            fuzz::require(int64_t(prompt.size()) + r.options.stop.max_new_tokens <= model.context,
                          "an accepted request fits the context");
            for (const int32_t id : prompt) fuzz::require(id >= 0 && id < model.vocab_size, "ids in the vocabulary");
        }
        fuzz::require(r.options.stop.max_new_tokens >= (r.echo ? 0 : 1),
                      "an accepted request generates at least one token (none only with echo)");
        fuzz::require(!chat || !r.echo, "echo is a completions field");
        for (const auto& [id, bias] : r.logit_bias)
            fuzz::require(id >= 0 && id < model.vocab_size && bias >= -100 && bias <= 100, "logit_bias in range");
        fuzz::require(r.logit_bias.size() <= 300, "at most 300 logit_bias entries");
        fuzz::require(!r.json_object || model.tokenizer, "JSON mode only with a tokenizer");
    } catch (const flashport::server::ApiError& e) {
        fuzz::require(e.status >= 400 && e.status < 500, "a refused body is a 4xx");
    } catch (const flashport::Error&) {
    }
    return 0;
}
