// Loading details: tokenizer_config.json (special tokens, chat template forms, added_tokens_decoder),
// normalised added tokens, and concurrent use.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <thread>

#include "flashport/error.h"
#include "tokenizer_test_util.h"

namespace fpt = flashport::tokenizer;
using Ids = std::vector<fpt::TokenId>;
using nlohmann::json;

namespace {

std::string tiny_text() {
    return tokenizer_test::read_file(tokenizer_test::data_dir() / "tiny" / "tokenizer.json");
}

}  // namespace

// Tiny ids: bytes 0..255, merges 256..265, <|endoftext|> 266, <|im_start|> 267, <|im_end|> 268, <think> 269.
TEST(Loading, ConfigSpecialTokensAndAddedTokensDecoder) {
    const json cfg = {
        {"bos_token", {{"__type", "AddedToken"}, {"content", "<|endoftext|>"}}},
        {"eos_token", "<|im_end|>"},
        {"pad_token", nullptr},
        {"add_bos_token", true},
        {"chat_template",
         json::array({{{"name", "tool_use"}, {"template", "T"}}, {{"name", "default"}, {"template", "D"}}})},
        {"added_tokens_decoder",
         {{"268", {{"content", "<|im_end|>"}, {"special", true}}},  // repeats tokenizer.json: fine
          {"270", {{"content", "<extra>"}, {"special", true}, {"normalized", false}}}}},
    };
    const auto tok = fpt::Tokenizer::from_json(tiny_text(), cfg.dump());
    ASSERT_TRUE(tok.config().bos && tok.config().eos);
    EXPECT_EQ(tok.config().bos->id, 266);
    EXPECT_EQ(tok.config().eos->id, 268);
    EXPECT_FALSE(tok.config().pad.has_value());
    EXPECT_TRUE(tok.config().add_bos_token);
    EXPECT_EQ(tok.config().chat_template, "D");
    EXPECT_EQ(tok.vocab_size(), 271u);
    EXPECT_EQ(tok.encode("a<extra>b"), (Ids{'a', 270, 'b'}));
    EXPECT_TRUE(tok.is_special(270));
    const Ids plain = tok.encode("a<extra>b", false);  // special: plain text when not allowed
    EXPECT_EQ(std::count(plain.begin(), plain.end(), 270), 0);
    EXPECT_EQ(tok.decode(plain), "a<extra>b");
    // chat_template.jinja, when present, wins over the config's template (as in transformers).
    EXPECT_EQ(fpt::Tokenizer::from_json(tiny_text(), cfg.dump(), "J").config().chat_template, "J");
}

TEST(Loading, AddedTokensMatchLongestFirst) {
    json j = json::parse(tiny_text());
    j["added_tokens"].push_back({{"id", 270}, {"content", "<|im_end|>!"}, {"special", true}, {"normalized", false}});
    const auto tok = fpt::Tokenizer::from_json(j.dump());
    EXPECT_EQ(tok.encode("<|im_end|>!<|im_end|>"), (Ids{270, 268}));
}

TEST(Loading, NormalizedAddedTokensMatchAfterNfc) {
    json j = json::parse(tiny_text());
    // Content given decomposed (e + combining acute); normalized: matched against NFC text, so both
    // spellings of the input hit it.
    j["added_tokens"].push_back({{"id", 270}, {"content", "<e\u0301>"}, {"special", false}, {"normalized", true}});
    const auto tok = fpt::Tokenizer::from_json(j.dump());
    EXPECT_EQ(tok.encode("x<\u00e9>y"), (Ids{'x', 270, 'y'}));
    EXPECT_EQ(tok.encode("x<e\u0301>y"), (Ids{'x', 270, 'y'}));
}

TEST(Loading, NullNormalizerKeepsDecomposedText) {
    json j = json::parse(tiny_text());
    j["normalizer"] = nullptr;
    const auto raw = fpt::Tokenizer::from_json(j.dump());
    EXPECT_EQ(raw.decode(raw.encode("e\u0301")), "e\u0301");
    EXPECT_EQ(tokenizer_test::tiny().decode(tokenizer_test::tiny().encode("e\u0301")), "\u00e9");
    j["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array({{{"type", "NFC"}}})}};
    const auto seq = fpt::Tokenizer::from_json(j.dump());
    EXPECT_EQ(seq.decode(seq.encode("e\u0301")), "\u00e9");
}

TEST(Loading, ConcurrentEncodesAgree) {
    const auto& tok = tokenizer_test::qwen3();
    const std::string text = "Concurrent use shares the word cache: 你好, world! 12345 " + std::string(200, 'z');
    const Ids expected = tok.encode(text);
    std::vector<std::thread> threads;
    std::vector<int> ok(4, 0);
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            int good = 1;
            for (int k = 0; k < 200; ++k) good &= tok.encode(text + std::to_string(k)).size() >= expected.size();
            good &= tok.encode(text) == expected;
            ok[t] = good;
        });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(ok, std::vector<int>(4, 1));
}
