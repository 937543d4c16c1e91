// UTF-8 validation / lossy decoding (Unicode's maximal-subpart rule) and GPT-2's byte alphabet.
#include <gtest/gtest.h>

#include <set>

#include "byte_level.h"
#include "flashport/error.h"
#include "utf8.h"

namespace fpt = flashport::tokenizer;
using namespace std::string_literals;

TEST(Utf8, AcceptsWellFormedAndRejectsIllFormed) {
    EXPECT_EQ(fpt::utf8::find_invalid("plain ascii"), std::string_view::npos);
    EXPECT_EQ(fpt::utf8::find_invalid("é中😀\xF4\x8F\xBF\xBF"), std::string_view::npos);  // up to U+10FFFF
    EXPECT_EQ(fpt::utf8::find_invalid("a\xC0\xAF"), 1u);                                 // overlong '/'
    EXPECT_EQ(fpt::utf8::find_invalid("ab\xED\xA0\x80"), 2u);                            // surrogate U+D800
    EXPECT_EQ(fpt::utf8::find_invalid("\xF4\x90\x80\x80"), 0u);                          // above U+10FFFF
    EXPECT_EQ(fpt::utf8::find_invalid("\xE4\xB8"), 0u);                                  // truncated
    EXPECT_EQ(fpt::utf8::find_invalid("x\x80"), 1u);                                     // stray continuation
    EXPECT_EQ(fpt::utf8::find_invalid("\xFF"), 0u);
    EXPECT_EQ(fpt::utf8::find_invalid("nul\0ok"s), std::string_view::npos);  // NUL is valid UTF-8
}

TEST(Utf8, CheckValidNamesTheOffset) {
    try {
        fpt::utf8::check_valid("abc\xFF", "the input");
        FAIL() << "no error";
    } catch (const flashport::Error& e) {
        EXPECT_NE(std::string(e.what()).find("byte 0xff at offset 3"), std::string::npos) << e.what();
    }
}

TEST(Utf8, LossyReplacesMaximalSubparts) {
    const std::string r = "\xEF\xBF\xBD";
    EXPECT_EQ(fpt::utf8::to_valid_lossy("ok"), "ok");
    // E4 B8 is a truncated 3-byte sequence: one replacement, then 'A'.
    EXPECT_EQ(fpt::utf8::to_valid_lossy("\xE4\xB8"
                                        "A"),
              r + "A");
    // E0 80: 80 is not a valid second byte after E0, so E0 and 80 are two maximal subparts.
    EXPECT_EQ(fpt::utf8::to_valid_lossy("\xE0\x80"), r + r);
    // F0 9F 98 alone at the end: one replacement.
    EXPECT_EQ(fpt::utf8::to_valid_lossy("\xF0\x9F\x98"), r);
    EXPECT_EQ(fpt::utf8::to_valid_lossy("\xC0\xAF"), r + r);
    EXPECT_EQ(fpt::utf8::to_valid_lossy("a\xFF"
                                        "b"),
              "a" + r + "b");
}

TEST(Utf8, CompletePrefixHoldsBackOnlyAnUnfinishedTail) {
    EXPECT_EQ(fpt::utf8::complete_prefix_length("abc"), 3u);
    EXPECT_EQ(fpt::utf8::complete_prefix_length("ab\xE4\xB8"), 2u);    // 中 cut after 2 bytes
    EXPECT_EQ(fpt::utf8::complete_prefix_length("\xF0\x9F\x98"), 0u);  // 😀 cut after 3 bytes
    EXPECT_EQ(fpt::utf8::complete_prefix_length("a\xFF"), 2u);         // invalid: nothing to wait for
    EXPECT_EQ(fpt::utf8::complete_prefix_length("\xE0\x80"), 2u);      // already ill-formed
    EXPECT_EQ(fpt::utf8::complete_prefix_length("\xE4\xB8\xAD"), 3u);
}

TEST(ByteLevel, TableIsABijectionOntoPrintableCharacters) {
    std::set<char32_t> seen;
    for (int b = 0; b < 256; ++b) {
        const char32_t c = fpt::byte_level::byte_to_char(static_cast<unsigned char>(b));
        EXPECT_TRUE(seen.insert(c).second) << "byte " << b;
        EXPECT_EQ(fpt::byte_level::char_to_byte(c), b);
        EXPECT_GT(c, U' ') << "byte " << b << " maps to a control or space";
    }
    EXPECT_EQ(fpt::byte_level::byte_to_char(' '), U'Ġ');
    EXPECT_EQ(fpt::byte_level::byte_to_char('\n'), U'Ċ');
    EXPECT_EQ(fpt::byte_level::byte_to_char('a'), U'a');
    EXPECT_EQ(fpt::byte_level::byte_to_char(0xE9), U'é');  // printable Latin-1 stands for itself
    EXPECT_EQ(fpt::byte_level::byte_to_char(0x00), U'Ā');
    EXPECT_EQ(fpt::byte_level::byte_to_char(0xAD), U'Ń');  // soft hyphen is shifted
    EXPECT_EQ(fpt::byte_level::char_to_byte(U'中'), -1);
}

TEST(ByteLevel, TokenStringsRoundTripToBytes) {
    EXPECT_EQ(fpt::byte_level::token_to_bytes("Ġthe"), " the");
    EXPECT_EQ(fpt::byte_level::token_to_bytes("ä½łå¥½"), "你好");
    EXPECT_EQ(fpt::byte_level::bytes_to_token(" the\n"), "ĠtheĊ");
    std::string all;
    for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
    EXPECT_EQ(fpt::byte_level::token_to_bytes(fpt::byte_level::bytes_to_token(all)), all);
    // A character outside the alphabet: tokenizers' decoder falls back to the token's own UTF-8.
    EXPECT_EQ(fpt::byte_level::token_to_bytes("<|中|>"), "<|中|>");
    EXPECT_EQ(fpt::byte_level::token_to_bytes("a b"), "a b");
}
