// decode() and the streaming decoder: characters split across tokens, invalid byte sequences,
// special tokens, unknown ids.
#include <gtest/gtest.h>

#include <random>

#include "flashport/error.h"
#include "tokenizer_test_util.h"
#include "utf8.h"

namespace fpt = flashport::tokenizer;
using Ids = std::vector<fpt::TokenId>;
using tokenizer_test::qwen3;

namespace {

const std::string kReplacement = "\xEF\xBF\xBD";

std::string stream_all(const Ids& ids, std::vector<std::string>* chunks = nullptr, bool skip_special = false) {
    fpt::StreamDecoder d(qwen3(), skip_special);
    std::string out;
    for (const auto id : ids) {
        const std::string c = d.push(id);
        if (chunks) chunks->push_back(c);
        out += c;
    }
    const std::string tail = d.finish();
    if (chunks) chunks->push_back(tail);
    return out + tail;
}

}  // namespace

TEST(Decode, CharactersSplitAcrossTokensAreHeldBack) {
    // Rare characters are encoded as several byte-level tokens, some holding part of a character.
    const std::string text = "家族: 👨‍👩‍👧‍👦 𠀀𪚥 🧑🏿‍💻 done";
    const Ids ids = qwen3().encode(text);
    std::size_t partial = 0;
    for (const auto id : ids) partial += fpt::utf8::find_invalid(qwen3().token_bytes(id)) != std::string_view::npos;
    ASSERT_GT(partial, 0u) << "the test text should contain tokens that split a character";

    std::vector<std::string> chunks;
    EXPECT_EQ(stream_all(ids, &chunks), text);
    for (const auto& c : chunks) {
        EXPECT_EQ(fpt::utf8::find_invalid(c), std::string_view::npos);
        EXPECT_EQ(c.find(kReplacement), std::string::npos) << "a partial character leaked as U+FFFD";
    }
}

TEST(Decode, StreamEqualsDecodeOnRandomIds) {
    // Random ids produce arbitrary byte soup, invalid UTF-8 included: the stream must still agree
    // with one decode() of everything, chunk boundaries notwithstanding.
    std::mt19937 rng(7);
    for (fpt::TokenId id = 0; id < 256; ++id) ASSERT_EQ(qwen3().token_bytes(id).size(), 1u) << id;
    std::uniform_int_distribution<int> any(0, static_cast<int>(qwen3().vocab_size()) - 1);
    std::uniform_int_distribution<int> low(0, 255);  // ids 0..255 are the single-byte tokens in Qwen's vocabulary
    for (int trial = 0; trial < 300; ++trial) {
        Ids ids(1 + trial % 25);
        for (auto& id : ids) id = (rng() % 3 == 0) ? any(rng) : low(rng);
        for (const bool skip : {false, true}) {
            const std::string whole = qwen3().decode(ids, skip);
            EXPECT_EQ(stream_all(ids, nullptr, skip), whole) << "trial " << trial;
            EXPECT_EQ(fpt::utf8::find_invalid(whole), std::string_view::npos);
        }
    }
}

TEST(Decode, IncompleteTailBecomesOneReplacementAtFinish) {
    const auto id = qwen3().token_to_id("ð");  // byte 0xF0: the lead byte of a 4-byte sequence
    ASSERT_TRUE(id.has_value());
    fpt::StreamDecoder d(qwen3());
    EXPECT_EQ(d.push(9707), "Hello");
    EXPECT_EQ(d.push(*id), "");
    EXPECT_EQ(d.finish(), kReplacement);
    EXPECT_EQ(d.finish(), "");
    EXPECT_EQ(qwen3().decode(Ids{9707, *id}), "Hello" + kReplacement);
}

TEST(Decode, SkipSpecialDropsControlTokensOnly) {
    const Ids ids = qwen3().encode("<|im_start|>assistant\n<think>\n</think>\n\nHi!<|im_end|>");
    EXPECT_EQ(qwen3().decode(ids), "<|im_start|>assistant\n<think>\n</think>\n\nHi!<|im_end|>");
    EXPECT_EQ(qwen3().decode(ids, true), "assistant\n<think>\n</think>\n\nHi!");
    EXPECT_EQ(stream_all(ids, nullptr, true), "assistant\n<think>\n</think>\n\nHi!");
}

TEST(Decode, UnknownIdIsAnError) {
    for (const fpt::TokenId bad : {-1, 151669, 1 << 30}) {
        try {
            qwen3().decode(Ids{9707, bad});
            ADD_FAILURE() << "no error for id " << bad;
        } catch (const flashport::Error& e) {
            EXPECT_NE(std::string(e.what()).find("unknown token id " + std::to_string(bad)), std::string::npos)
                << e.what();
        }
        fpt::StreamDecoder d(qwen3());
        EXPECT_THROW(d.push(bad), flashport::Error);
    }
}
