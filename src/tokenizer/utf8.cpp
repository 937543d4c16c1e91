#include "utf8.h"

#include "flashport/error.h"

namespace flashport::tokenizer::utf8 {
namespace {

// How far the bytes at s[i] agree with a well-formed sequence: `valid` bytes matched, out of `need`.
// valid == need: complete; valid < need and the string ended: truncated; otherwise ill-formed, and
// `valid` (at least 1) is the maximal subpart to replace with one U+FFFD.
struct Probe {
    std::size_t valid;
    std::size_t need;
    bool ended;  // stopped because the input ran out, not because of a bad byte
};

Probe probe(std::string_view s, std::size_t i) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) return {1, 1, false};
    std::size_t need = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte (Table 3-7)
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 3;
        if (b0 == 0xE0) lo = 0xA0;  // no overlongs
        if (b0 == 0xED) hi = 0x9F;  // no surrogates
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 4;
        if (b0 == 0xF0) lo = 0x90;  // no overlongs
        if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
    } else {
        return {1, 0, false};  // C0, C1, F5..FF, or a stray continuation byte
    }
    std::size_t valid = 1;
    for (std::size_t k = 1; k < need; ++k) {
        if (i + k >= s.size()) return {valid, need, true};
        const auto b = static_cast<unsigned char>(s[i + k]);
        const unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
        if (b < l || b > h) return {valid, need, false};
        ++valid;
    }
    return {valid, need, false};
}

}  // namespace

std::size_t sequence_length(std::string_view s, std::size_t i) {
    const Probe p = probe(s, i);
    return p.valid == p.need ? p.need : 0;
}

std::size_t find_invalid(std::string_view s) {
    for (std::size_t i = 0; i < s.size();) {
        if (static_cast<unsigned char>(s[i]) < 0x80) {  // fast path for ASCII runs
            ++i;
            continue;
        }
        const std::size_t n = sequence_length(s, i);
        if (n == 0) return i;
        i += n;
    }
    return std::string_view::npos;
}

void check_valid(std::string_view s, std::string_view what) {
    const std::size_t bad = find_invalid(s);
    if (bad != std::string_view::npos) {
        static const char* hex = "0123456789abcdef";
        const auto b = static_cast<unsigned char>(s[bad]);
        fail(what, " is not valid UTF-8: byte 0x", hex[b >> 4], hex[b & 15], " at offset ", bad);
    }
}

std::string to_valid_lossy(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) {
        const Probe p = probe(s, i);
        if (p.valid == p.need) {
            out.append(s.substr(i, p.need));
        } else {
            out.append("\xEF\xBF\xBD");
        }
        i += p.valid;
    }
    return out;
}

std::size_t complete_prefix_length(std::string_view s) {
    for (std::size_t i = 0; i < s.size();) {
        const Probe p = probe(s, i);
        if (p.ended) return i;
        i += p.valid;
    }
    return s.size();
}

char32_t decode_at(std::string_view s, std::size_t i, std::size_t n) {
    const auto b = [&](std::size_t k) { return static_cast<char32_t>(static_cast<unsigned char>(s[i + k])); };
    switch (n) {
        case 1:
            return b(0);
        case 2:
            return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
        case 3:
            return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
        default:
            return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
    }
}

void append(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

}  // namespace flashport::tokenizer::utf8
