#include "byte_level.h"

#include <array>

#include "utf8.h"

namespace flashport::tokenizer::byte_level {
namespace {

struct Tables {
    std::array<char32_t, 256> to_char{};
    std::array<int, 512> to_byte{};  // every character of the alphabet is below U+0144

    Tables() {
        to_byte.fill(-1);
        auto printable = [](int b) {
            return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        };
        int shifted = 0;
        for (int b = 0; b < 256; ++b) {
            const char32_t c = printable(b) ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + shifted++);
            to_char[b] = c;
            to_byte[c] = b;
        }
    }
};

const Tables& tables() {
    static const Tables t;
    return t;
}

}  // namespace

char32_t byte_to_char(unsigned char b) {
    return tables().to_char[b];
}

int char_to_byte(char32_t c) {
    return c < 512 ? tables().to_byte[c] : -1;
}

std::string token_to_bytes(std::string_view token) {
    std::string out;
    out.reserve(token.size());
    for (std::size_t i = 0; i < token.size();) {
        const std::size_t n = utf8::sequence_length(token, i);
        const int b = n == 0 ? -1 : char_to_byte(utf8::decode_at(token, i, n));
        if (b < 0) return std::string(token);
        out.push_back(static_cast<char>(b));
        i += n;
    }
    return out;
}

std::string bytes_to_token(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size() * 2);
    for (const char ch : bytes) utf8::append(out, byte_to_char(static_cast<unsigned char>(ch)));
    return out;
}

}  // namespace flashport::tokenizer::byte_level
