// Robustness: random bytes never crash encode (invalid UTF-8 is a clean error), random valid text
// round-trips, and every file of the broken corpus fails to load with the error it should.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <random>

#include "common/error_text.h"
#include "flashport/error.h"
#include "normalize.h"
#include "tokenizer_test_util.h"
#include "utf8.h"

namespace fpt = flashport::tokenizer;
using tokenizer_test::qwen3;

TEST(Robustness, RandomBytesNeverCrash) {
    std::mt19937 rng(1234);
    int rejected = 0;
    for (int trial = 0; trial < 3000; ++trial) {
        std::string s(rng() % 64, '\0');
        for (auto& c : s)
            c = static_cast<char>(trial % 2 ? rng() % 256 : 0x80 + rng() % 0x80);  // odd: any, even: high bytes
        try {
            const auto ids = qwen3().encode(s, trial % 3 != 0);
            EXPECT_EQ(fpt::utf8::find_invalid(s), std::string_view::npos);
            EXPECT_EQ(qwen3().decode(ids), fpt::nfc(s));
        } catch (const flashport::Error& e) {
            ++rejected;
            EXPECT_NE(std::string(e.what()).find("is not valid UTF-8"), std::string::npos) << e.what();
        }
    }
    EXPECT_GT(rejected, 0);
}

TEST(Robustness, RandomCodePointsRoundTrip) {
    // Valid UTF-8 drawn from all planes (no surrogates): encode must accept it and decode must give
    // back its NFC form.
    std::mt19937 rng(99);
    for (int trial = 0; trial < 2000; ++trial) {
        std::string s;
        const int n = static_cast<int>(rng() % 24);
        for (int k = 0; k < n; ++k) {
            char32_t cp;
            switch (rng() % 4) {
                case 0:
                    cp = rng() % 0x80;
                    break;
                case 1:
                    cp = 0x80 + rng() % (0x800 - 0x80);
                    break;
                case 2:
                    cp = 0x800 + rng() % (0x10000 - 0x800);
                    break;
                default:
                    cp = 0x10000 + rng() % (0x110000 - 0x10000);
                    break;
            }
            if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x';
            fpt::utf8::append(s, cp);
        }
        const auto ids = qwen3().encode(s);
        ASSERT_EQ(qwen3().decode(ids), fpt::nfc(s)) << "trial " << trial;
    }
}

TEST(Robustness, PathologicalInputs) {
    // Long runs that stress the regex's backtracking and BPE's merge queue.
    for (const std::string& s :
         {std::string(100000, ' ') + "x", std::string(100000, '\n'), std::string(50000, '!') + "a",
          std::string(30000, '\t') + " \n" + std::string(30000, ' '), std::string(100000, '7')}) {
        const auto ids = qwen3().encode(s);
        EXPECT_EQ(qwen3().decode(ids), s);
    }
}

TEST(Robustness, BrokenFilesGiveClearErrors) {
    const auto dir = tokenizer_test::data_dir() / "broken";
    const auto expected = nlohmann::json::parse(tokenizer_test::read_file(dir / "expected_errors.json"));
    const std::string tiny = tokenizer_test::read_file(tokenizer_test::data_dir() / "tiny" / "tokenizer.json");
    std::size_t checked = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        const std::string name = entry.path().filename().string();
        if (name == "expected_errors.json") continue;
        ASSERT_TRUE(expected.contains(name)) << name << " has no entry in expected_errors.json";
        const std::string phrase = expected[name].get<std::string>();
        const std::string data = tokenizer_test::read_file(entry.path());
        const bool is_config = name.starts_with("config_");
        try {
            if (is_config) {
                fpt::Tokenizer::from_json(tiny, data);
            } else {
                fpt::Tokenizer::from_json(data);
            }
            ADD_FAILURE() << name << " loaded without an error";
        } catch (const flashport::Error& e) {
            EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos)
                << name << ": the error should mention \"" << phrase << "\" but was: " << e.what();
        }
        ++checked;
    }
    EXPECT_EQ(checked, expected.size());
}

TEST(Robustness, MissingFolderAndFile) {
    EXPECT_THROW(fpt::Tokenizer::from_dir(tokenizer_test::data_dir() / "no_such_model"), flashport::Error);
    try {
        fpt::Tokenizer::from_dir(tokenizer_test::data_dir() / "broken");
        FAIL() << "no error";
    } catch (const flashport::Error& e) {
        EXPECT_NE(std::string(e.what()).find("no tokenizer.json in"), std::string::npos) << e.what();
    }
}

TEST(Robustness, TruncatedPrefixesOfARealFileNeverCrash) {
    // Every prefix of the tiny tokenizer.json at a stride: each must load or fail with flashport::Error.
    const std::string tiny = tokenizer_test::read_file(tokenizer_test::data_dir() / "tiny" / "tokenizer.json");
    for (std::size_t n = 0; n < tiny.size(); n += 37) {
        EXPECT_THROW(fpt::Tokenizer::from_json(tiny.substr(0, n)), flashport::Error) << n;
    }
}

// Issue 11: 100 000 nested brackets in tokenizer.json or tokenizer_config.json are a clear error,
// not a stack overflow (copying or printing a value recurses per level).
TEST(Robustness, DeepNestingIsAClearError) {
    std::string deep;
    for (int i = 0; i < 100000; ++i) deep += "[";
    for (int i = 0; i < 100000; ++i) deep += "]";
    const std::string tiny = tokenizer_test::read_file(tokenizer_test::data_dir() / "tiny" / "tokenizer.json");
    using flashport::test::error_of;
    const std::string tok = error_of([&] { fpt::Tokenizer::from_json(R"({"normalizer": )" + deep + "}"); });
    EXPECT_NE(tok.find("tokenizer.json: JSON nested deeper than 128 levels"), std::string::npos) << tok;
    const std::string cfg = error_of([&] { fpt::Tokenizer::from_json(tiny, R"({"bos_token": )" + deep + "}"); });
    EXPECT_NE(cfg.find("tokenizer_config.json: JSON nested deeper than 128 levels"), std::string::npos) << cfg;
}

// A value quoted in an error is a short prefix, however long it is in the file.
TEST(Robustness, LongValuesInErrorsAreCut) {
    nlohmann::json j =
        nlohmann::json::parse(tokenizer_test::read_file(tokenizer_test::data_dir() / "tiny" / "tokenizer.json"));
    j["model"]["vocab"][std::string(100000, 'q')] = "not an id";
    try {
        fpt::Tokenizer::from_json(j.dump());
        FAIL() << "loaded";
    } catch (const flashport::Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("qqq... (100000 bytes)\"] must be a non-negative integer id"), std::string::npos) << msg;
        EXPECT_LT(msg.size(), 300u);
    }
}
