// UTF-8 helpers shared by the tokenizer: strict validation (the encoder rejects invalid input rather
// than guessing), and lossy conversion for decoding, which must accept any byte sequence because a
// model can emit tokens that split or garble a character.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace flashport::tokenizer::utf8 {

// Length of the well-formed sequence starting at s[i] (1-4), or 0 if the bytes there are not one.
// "Well-formed" is Unicode's Table 3-7: no overlongs, no surrogates, nothing above U+10FFFF.
std::size_t sequence_length(std::string_view s, std::size_t i);

// Offset of the first byte that is not part of a well-formed sequence, or npos if s is valid UTF-8.
std::size_t find_invalid(std::string_view s);

// Throws flashport::Error naming `what` and the offset of the first invalid byte.
void check_valid(std::string_view s, std::string_view what);

// s with each maximal ill-formed subpart replaced by U+FFFD: the "substitution of maximal subparts"
// practice that Rust's String::from_utf8_lossy (and so Hugging Face's decoder) follows.
std::string to_valid_lossy(std::string_view s);

// Length of the longest prefix of s that does not end inside an incomplete (but so far valid)
// sequence. A streaming decoder emits this prefix and holds the rest back until more bytes arrive.
std::size_t complete_prefix_length(std::string_view s);

// Decodes the code point of a well-formed sequence of length n at s[i].
char32_t decode_at(std::string_view s, std::size_t i, std::size_t n);

// Appends the UTF-8 encoding of a valid scalar value.
void append(std::string& out, char32_t cp);

}  // namespace flashport::tokenizer::utf8
