// JSON mode in `flashport serve` (src/server/json_constraint.h): the byte-level JSON recogniser against
// valid and invalid documents, its guards, nlohmann's parser on thousands of mutated documents, and the
// token choice on Qwen3's vocabulary (rejections, the full scan, no valid token, seeded sampling).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "flashport/tokenizer.h"
#include "server/json_constraint.h"

namespace flashport::server {
namespace {

bool whole(std::string_view doc, bool object_only = true) {
    JsonPrefix p(object_only);
    return p.feed(doc) && p.complete();
}

const std::vector<std::string> kValid = {
    "{}",
    " \n{ }\n",
    R"({"a": 1})",
    R"({"a":[1,-2.5e+3,0,0.1,-0,1E5,2e-7,true,false,null,"x\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"],"b":{"c":{}}})",
    "{\"\xc3\xa9\":\"\xe6\x97\xa5\xe6\x9c\xac\xf0\x9f\x8e\x89\"}",  // é, 日本, 🎉 as UTF-8
    "{\"k\": [[], [[]], {\"x\": [{}]}]}",
};

TEST(JsonPrefix, AcceptsDocumentsWholeAndByteByByte) {
    for (const std::string& doc : kValid) {
        EXPECT_TRUE(whole(doc)) << doc;
        JsonPrefix p;
        const size_t last = doc.find_last_not_of(" \n");
        for (size_t i = 0; i < doc.size(); ++i) {
            ASSERT_TRUE(p.feed(doc.substr(i, 1))) << doc << " at byte " << i;
            EXPECT_EQ(p.complete(), i >= last) << doc << " at byte " << i;
        }
    }
    // Any value at the top level where the mode allows it; a number closes with the byte after it.
    EXPECT_TRUE(whole("[1, 2]", false));
    EXPECT_TRUE(whole("\"s\"", false));
    JsonPrefix number(false);
    EXPECT_TRUE(number.feed("12"));
    EXPECT_FALSE(number.complete());
    EXPECT_TRUE(number.feed(" "));
    EXPECT_TRUE(number.complete());
}

TEST(JsonPrefix, RefusesWhatCannotBeJson) {
    const std::vector<std::string> bad = {
        "[1]", "\"a\"", "1", "x",  // json_object mode: an object at the top level
        R"({"a":01})", R"({"a":1.})", R"({"a":.5})", R"({"a":-})", R"({"a":1e})", R"({"a":+1})", R"({"a":1.e3})",
        R"({"a" 1})", "{,}", R"({"a":1,})", R"({"a":[1,]})", R"({"a":tru })", R"({"a":nul})", R"({"a":True})",
        "{\"a\":\"\x01\"}", R"({"a":"\q"})", R"({"a":"\u12G4"})",
        R"({"a":"\ud800"})", R"({"a":"\udc00"})", R"({"a":"\ud800\u0041"})", R"({"a":"\ud800x"})",
        "{\"a\":\"\xc0\x80\"}", "{\"a\":\"\xed\xa0\x80\"}", "{\"a\":\"\xf4\x90\x80\x80\"}", "{\"a\":\"\x80\"}",
        "{\"a\":\"\xe0\x80\x80\"}", "{\"a\":\"\xff\"}",
        R"({"a":1}})", "{}x", "{} {}", R"({"a":1])", R"({"a":[})", "{'a':1}", "{a:1}", R"({"a":1 "b":2})"};
    for (const std::string& doc : bad) EXPECT_FALSE(JsonPrefix().feed(doc)) << doc;
    // A prefix that is fine so far is not a document yet.
    JsonPrefix open;
    EXPECT_TRUE(open.feed(R"({"a": [1, {"b": "c)"));
    EXPECT_FALSE(open.complete());
}

TEST(JsonPrefix, GuardsDepthAndWhitespace) {
    JsonPrefix deep;
    ASSERT_TRUE(deep.feed(R"({"a":)"));
    ASSERT_TRUE(deep.feed(std::string(JsonPrefix::MAX_DEPTH - 1, '[')));
    EXPECT_FALSE(deep.accepts("["));
    EXPECT_TRUE(deep.accepts("1"));

    JsonPrefix spaces;
    ASSERT_TRUE(spaces.feed("{"));
    ASSERT_TRUE(spaces.feed(std::string(JsonPrefix::MAX_WHITESPACE, ' ')));
    EXPECT_FALSE(spaces.accepts("\n"));
    ASSERT_TRUE(spaces.feed(R"("k":)" + std::string(JsonPrefix::MAX_WHITESPACE, '\n')));  // a new run after "k":
    EXPECT_FALSE(spaces.accepts(" "));
    EXPECT_TRUE(spaces.accepts("1}"));
    // Inside strings whitespace is text, not counted.
    EXPECT_TRUE(whole("{\"" + std::string(200, ' ') + "\":1}"));
}

// Random objects (nested up to 3 deep, strings with escapes and multi-byte characters), written compact
// and indented, then mutated one byte at a time: the recogniser's verdict on the whole text must be
// nlohmann's (a parse that succeeds with an object at the top).
nlohmann::json random_value(std::mt19937& rng, int depth) {
    static const std::vector<std::string> words = {"", "a", "key", "\"q\"", "back\\slash", "tab\t", "\xc3\xa9t\xc3\xa9",
                                                   "\xf0\x9f\x98\x80", "\x01", "/"};
    std::uniform_int_distribution<int> kind(0, depth >= 3 ? 4 : 6);
    switch (kind(rng)) {
        case 0: return nullptr;
        case 1: return bool(rng() % 2);
        case 2: return int64_t(rng() % 2001) - 1000;
        case 3: return double(int64_t(rng() % 20001) - 10000) / 64.0;
        case 4: return words[rng() % words.size()];
        case 5: {
            nlohmann::json a = nlohmann::json::array();
            for (size_t i = rng() % 4; i > 0; --i) a.push_back(random_value(rng, depth + 1));
            return a;
        }
        default: {
            nlohmann::json o = nlohmann::json::object();
            for (size_t i = rng() % 4; i > 0; --i) {
                std::string key = words[rng() % words.size()];
                key.push_back(char('0' + i));
                o[key] = random_value(rng, depth + 1);
            }
            return o;
        }
    }
}

TEST(JsonPrefix, AgreesWithNlohmannOnMutatedDocuments) {
    std::mt19937 rng(20261205);
    const std::string inserts = "{}[]\":,.-+eE01 \n\\ux\x80\xc3";
    int checked = 0, valid = 0;
    for (int doc = 0; doc < 400; ++doc) {
        nlohmann::json o = nlohmann::json::object();
        for (size_t i = 1 + rng() % 4; i > 0; --i) o[std::string(1, char('k' + i))] = random_value(rng, 1);
        for (const int indent : {-1, 2}) {
            const std::string text = o.dump(indent);
            ASSERT_TRUE(whole(text)) << text;
            for (int m = 0; m < 12; ++m) {
                std::string t = text;
                const size_t at = rng() % t.size();
                switch (rng() % 3) {
                    case 0: t.erase(at, 1); break;
                    case 1: t.insert(at, 1, inserts[rng() % inserts.size()]); break;
                    default: t[at] = inserts[rng() % inserts.size()]; break;
                }
                bool theirs = false;
                try {
                    theirs = nlohmann::json::parse(t).is_object();
                } catch (const nlohmann::json::out_of_range&) {
                    continue;  // a number past double's range (1e609): JSON's grammar takes it, nlohmann does not
                } catch (const nlohmann::json::parse_error&) {
                }
                EXPECT_EQ(whole(t), theirs) << t;
                ++checked, valid += theirs;
            }
        }
    }
    EXPECT_GT(valid, checked / 20);  // the mutations left a fair share valid, so both verdicts were tested
}

// ---- the token choice, on Qwen3's vocabulary --------------------------------------------------------

std::string read_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

const tokenizer::Tokenizer& qwen3() {
    static const std::filesystem::path dir = std::filesystem::path(FP_TOKENIZER_DATA_DIR) / "qwen3";
    static tokenizer::Tokenizer tok =
        tokenizer::Tokenizer::from_json(read_file(dir / "tokenizer.json"), read_file(dir / "tokenizer_config.json"));
    return tok;
}

int32_t id_of(std::string_view text) {
    const std::vector<int32_t> ids = qwen3().encode(text, false);
    EXPECT_EQ(ids.size(), 1u) << text;
    return ids.empty() ? -1 : ids[0];
}

engine::SamplingParams greedy() {
    engine::SamplingParams p;
    p.do_sample = false;
    return p;
}

TEST(JsonConstraint, ChoosesTheBestTokenThatContinuesTheDocument) {
    const tokenizer::Tokenizer& tok = qwen3();
    JsonConstraint c(tok);
    engine::Sampler sampler(greedy());
    std::vector<float> scores(tok.vocab_size(), 0.0f);
    scores[size_t(id_of("hello"))] = 9;  // the model's favourite, but not JSON
    scores[size_t(id_of("{\""))] = 5;
    ASSERT_EQ(c.choose(sampler, scores, {}), id_of("{\""));
    c.accept(id_of("{\""));
    EXPECT_FALSE(c.complete());
    EXPECT_TRUE(c.allows(id_of("hello")));  // inside the key's string now: text, and '}' too
    EXPECT_TRUE(c.allows(id_of("}")));
    EXPECT_FALSE(c.allows(id_of("\n")));  // a raw control character is not
    c.accept(id_of("hello"));
    for (const std::string_view t : {"\":", "1", "}"}) {
        ASSERT_TRUE(c.allows(id_of(t))) << t;
        c.accept(id_of(t));
    }
    EXPECT_TRUE(c.complete());
    // Once the object has closed, nothing continues it (the server ends the reply there); special
    // tokens never do.
    EXPECT_FALSE(c.allows(id_of("}")));
    EXPECT_FALSE(c.allows(*tok.token_to_id("<|im_end|>")));
    EXPECT_FALSE(c.allows(-1));
    EXPECT_FALSE(c.allows(int32_t(tok.vocab_size())));
}

TEST(JsonConstraint, ScansEveryTokenAfterTooManyRejections) {
    const tokenizer::Tokenizer& tok = qwen3();
    std::vector<float> scores(tok.vocab_size(), -INFINITY);
    // More invalid favourites than the rejections allow, then the only valid candidate.
    const std::string letters = "abcdefghijklmnopqrstuvwxyz";
    for (size_t i = 0; i < letters.size(); ++i) scores[size_t(id_of(letters.substr(i, 1)))] = 30.0f - float(i);
    scores[size_t(id_of("{"))] = -5;
    {
        JsonConstraint c(tok);
        engine::Sampler sampler(greedy());
        std::vector<float> s = scores;
        EXPECT_EQ(c.choose(sampler, s, {}), id_of("{"));
    }
    {
        engine::SamplingParams p;
        p.do_sample = true, p.temperature = 1.0f, p.seed = 3;
        JsonConstraint c(tok);
        engine::Sampler sampler(p);
        std::vector<float> s = scores;
        EXPECT_EQ(c.choose(sampler, s, {}), id_of("{"));
    }
    // No candidate continues the document: -1, not an invalid token.
    scores[size_t(id_of("{"))] = -INFINITY;
    JsonConstraint c(tok);
    engine::Sampler sampler(greedy());
    EXPECT_EQ(c.choose(sampler, scores, {}), -1);
}

TEST(JsonConstraint, SampledChoicesAreSeededAndAlwaysValid) {
    const tokenizer::Tokenizer& tok = qwen3();
    auto run = [&](uint64_t seed) {
        engine::SamplingParams p;
        p.do_sample = true, p.temperature = 1.0f, p.top_p = 0.95f, p.seed = seed;
        engine::Sampler sampler(p);
        JsonConstraint c(tok);
        std::mt19937 rng(7);
        std::normal_distribution<float> logit(0.0f, 3.0f);
        std::vector<int32_t> out;
        std::string text;
        for (int step = 0; step < 40 && !c.complete(); ++step) {
            std::vector<float> scores(tok.vocab_size());
            for (float& s : scores) s = logit(rng);
            const int32_t t = c.choose(sampler, scores, out);
            EXPECT_GE(t, 0);
            if (t < 0) break;
            c.accept(t);
            out.push_back(t);
            text += tok.token_bytes(t);
        }
        EXPECT_TRUE(JsonPrefix().feed(text)) << text;
        return out;
    };
    const std::vector<int32_t> a = run(11);
    EXPECT_EQ(a, run(11));
    EXPECT_NE(a, run(12));
}

}  // namespace
}  // namespace flashport::server
