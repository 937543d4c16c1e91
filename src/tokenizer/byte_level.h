// Byte-level BPE's alphabet (GPT-2): each of the 256 byte values is shown as one printable Unicode
// character, so that a vocabulary of byte strings can be stored as JSON text. Printable Latin-1 bytes
// stand for themselves; the other 68 (controls, space, DEL, NBSP, soft hyphen...) are shifted to
// U+0100.. in byte order. 'Ġ' (U+0120) is the space, 'Ċ' (U+010A) the newline.
//
// The tokenizer works on raw bytes internally and uses this table only at the edges: to turn the
// vocabulary and merges into bytes when loading, and to read token strings given in that alphabet.
#pragma once

#include <string>
#include <string_view>

namespace flashport::tokenizer::byte_level {

// The character that stands for byte b.
char32_t byte_to_char(unsigned char b);

// The byte that character c stands for, or -1 when c is not in the alphabet.
int char_to_byte(char32_t c);

// Raw bytes of a token string, by the rule of Hugging Face's ByteLevel decoder: when every character
// is in the alphabet, the bytes they stand for; otherwise the token's own UTF-8 (added tokens such as
// "<|im_end|>" take the first branch, being printable ASCII; ones with spaces or CJK take the second).
// `token` must be valid UTF-8.
std::string token_to_bytes(std::string_view token);

// The token string (in the alphabet) for raw bytes: the inverse of token_to_bytes' first branch.
std::string bytes_to_token(std::string_view bytes);

}  // namespace flashport::tokenizer::byte_level
