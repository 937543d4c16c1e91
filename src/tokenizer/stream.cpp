// Streaming decode and the `flashport tokenize` command's body.
#include <istream>
#include <iterator>
#include <ostream>

#include "flashport/tokenizer.h"
#include "utf8.h"

namespace flashport::tokenizer {

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(&tokenizer), skip_special_(skip_special) {}

std::string StreamDecoder::push(TokenId id) {
    const std::string_view bytes = tokenizer_->token_bytes(id);  // checks the id even when skipped
    if (skip_special_ && tokenizer_->is_special(id)) return {};
    pending_.append(bytes);
    // Hold back only a tail that is a valid but unfinished sequence: anything else already decodes
    // the same way whatever follows, so emitting it now keeps push()s equal to one decode().
    const std::size_t n = utf8::complete_prefix_length(pending_);
    std::string out = utf8::to_valid_lossy(std::string_view(pending_).substr(0, n));
    pending_.erase(0, n);
    return out;
}

std::string StreamDecoder::finish() {
    std::string out = utf8::to_valid_lossy(pending_);
    pending_.clear();
    return out;
}

void tokenize_stream(const Tokenizer& tokenizer, std::istream& in, std::ostream& out, const TokenizeOptions& options) {
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    const std::vector<TokenId> ids = tokenizer.encode(text, options.allow_special);
    const char* sep = options.json ? "," : " ";
    if (options.json) out << '[';
    for (std::size_t i = 0; i < ids.size(); ++i) out << (i ? sep : "") << ids[i];
    if (options.json) out << ']';
    out << '\n';
}

}  // namespace flashport::tokenizer
