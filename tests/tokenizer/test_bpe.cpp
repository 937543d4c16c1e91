// BPE merge order, both merges spellings, ignore_merges, and the pre-tokenizer's splits, on small
// hand-made tokenizers where the right answer can be worked out by hand.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "flashport/error.h"
#include "pretokenize.h"
#include "tokenizer_test_util.h"

namespace fpt = flashport::tokenizer;
using Ids = std::vector<fpt::TokenId>;
using nlohmann::json;
using tokenizer_test::tiny;

namespace {

json tiny_json() {
    return json::parse(tokenizer_test::read_file(tokenizer_test::data_dir() / "tiny" / "tokenizer.json"));
}

fpt::Tokenizer load(const json& j) {
    return fpt::Tokenizer::from_json(j.dump());
}

std::vector<std::string> pieces(const json& pre_tokenizer, std::string_view text) {
    const auto p = fpt::PreTokenizer::from_json(pre_tokenizer, "test pre_tokenizer");
    std::vector<std::string_view> words;
    p.split(text, words);
    return {words.begin(), words.end()};
}

json qwen_pre_tokenizer() {
    return tiny_json()["pre_tokenizer"];
}

}  // namespace

// The tiny tokenizer's merges, by rank: Ġ t, h e, Ġt he, l l, e ll, h ell, hell o, Ġ Ġ, ĠĠ ĠĠ, Ċ Ċ.
// Ids: bytes are 0..255 (their own value), merges 256.. in that order.
TEST(Bpe, MergesApplyInRankOrderNotLongestMatch) {
    // h e l l o: "h e" (rank 1) before "l l" (3), after which "e ll" and "h ell" can no longer apply:
    // "hello" (262) is in the vocabulary but BPE does not reach it.
    EXPECT_EQ(tiny().encode("hello"), (Ids{257, 259, 'o'}));
    EXPECT_EQ(tiny().encode("ell"), (Ids{260}));   // l l, then e ll
    EXPECT_EQ(tiny().encode(" the"), (Ids{258}));  // Ġ t, h e, then Ġt he
    EXPECT_EQ(tiny().encode("the"), (Ids{'t', 257}));
}

TEST(Bpe, EqualRanksMergeLeftmostFirst) {
    EXPECT_EQ(tiny().encode("lll"), (Ids{259, 'l'}));
    EXPECT_EQ(tiny().encode("llll"), (Ids{259, 259}));
    // Runs of spaces: ĠĠ pairs from the left, then ĠĠĠĠ. "      x" pre-tokenizes as 5 spaces + " x".
    EXPECT_EQ(tiny().encode("     "), (Ids{264, ' '}));
}

TEST(Bpe, StringAndArrayMergesAreEquivalent) {
    json j = tiny_json();
    json strings = json::array();
    for (const auto& m : j["model"]["merges"])
        strings.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
    j["model"]["merges"] = strings;
    const auto t = load(j);
    for (const char* s : {"hello the world", "  lll  ell\n\n\nhell", "the  the   the"})
        EXPECT_EQ(t.encode(s), tiny().encode(s)) << s;
}

TEST(Bpe, IgnoreMergesTakesWholeWordTokens) {
    json j = tiny_json();
    j["model"]["ignore_merges"] = true;
    EXPECT_EQ(load(j).encode("hello"), (Ids{262}));
    EXPECT_EQ(load(j).encode("hellx"), (Ids{257, 259, 'x'}));
}

TEST(Bpe, MissingByteTokenIsAnError) {
    json j = tiny_json();
    j["model"]["vocab"].erase("z");
    const auto t = load(j);
    EXPECT_EQ(t.encode("abc"), (Ids{'a', 'b', 'c'}));
    try {
        t.encode("z");
        FAIL() << "no error";
    } catch (const flashport::Error& e) {
        EXPECT_NE(std::string(e.what()).find("byte 0x7a has no token"), std::string::npos) << e.what();
    }
}

TEST(Bpe, RecognisesModelWithoutType) {
    json j = tiny_json();
    j["model"].erase("type");  // old files: tokenizers infers BPE from the members
    EXPECT_EQ(load(j).encode("hello"), tiny().encode("hello"));
}

TEST(Bpe, LongWordsAreLinearish) {
    // One 200k-letter word: the priority queue keeps this fast (a quadratic loop would take minutes).
    const std::string word(200000, 'l');
    const auto ids = tiny().encode(word);
    EXPECT_EQ(ids, Ids(100000, 259));
}

TEST(PreTokenizer, QwenRegexSplits) {
    EXPECT_EQ(pieces(qwen_pre_tokenizer(), "Hello  world's 2024!\n\n  x"),
              (std::vector<std::string>{"Hello", " ", " world", "'s", " ", "2", "0", "2", "4", "!\n\n", " ", " x"}));
    EXPECT_EQ(pieces(qwen_pre_tokenizer(), "HE'LL"), (std::vector<std::string>{"HE", "'LL"}));  // (?i:'ll)
    EXPECT_EQ(pieces(qwen_pre_tokenizer(), "a\tb\n"), (std::vector<std::string>{"a", "\tb", "\n"}));
}

TEST(PreTokenizer, UnicodeWhitespaceNeedsUcp) {
    // With PCRE2_UCP, U+3000 and NBSP are \s: a run of two splits as lone space + space-prefixed word,
    // like ASCII spaces. Without UCP they would be "other" characters and stick together.
    EXPECT_EQ(pieces(qwen_pre_tokenizer(), "a\u3000\u3000b"), (std::vector<std::string>{"a", "\u3000", "\u3000b"}));
    EXPECT_EQ(pieces(qwen_pre_tokenizer(), "a\u00a0\u00a0b"), (std::vector<std::string>{"a", "\u00a0", "\u00a0b"}));
    EXPECT_EQ(pieces(qwen_pre_tokenizer(), "x\u3000"), (std::vector<std::string>{"x", "\u3000"}));
}

TEST(PreTokenizer, StringPatternAndGpt2ByteLevel) {
    const json literal = {
        {"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"String", "."}}}, {"behavior", "Isolated"}, {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
    EXPECT_EQ(pieces(literal, "a.b..c"), (std::vector<std::string>{"a", ".", "b", ".", ".", "c"}));
    const json gpt2 = {{"type", "ByteLevel"}, {"add_prefix_space", false}};  // use_regex defaults to true
    EXPECT_EQ(pieces(gpt2, "Hello world's  123"), (std::vector<std::string>{"Hello", " world", "'s", " ", " 123"}));
}

TEST(PreTokenizer, EveryByteLandsInOneWord) {
    const std::string text = "mixed 中文 text,\t\ttabs   and\r\nnewlines 😀👍🏽 ١٢٣\u3000end  ";
    std::string joined;
    for (const auto& p : pieces(qwen_pre_tokenizer(), text)) joined += p;
    EXPECT_EQ(joined, text);
}
