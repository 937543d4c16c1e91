// Deeply nested JSON and huge values in every engine input (config.json, generation_config.json,
// safetensors headers, shard indexes): a flashport::Error naming the file and the depth limit, never
// a stack overflow; a value quoted in a message is cut to a short prefix. Issue 11, defect 1.
#include <gtest/gtest.h>

#include "engine/model_config.h"
#include "engine/safetensors.h"
#include "engine/safetensors_header.h"
#include "engine_test_util.h"
#include "flashport/json_limits.h"

namespace flashport::engine {
namespace {

using test::expect_error;
using test::raw_file;
using test::TempDir;

// `depth` nested arrays (or objects) as the value of "key" in a top-level object.
std::string nested(int depth, bool objects = false) {
    std::string s;
    for (int i = 0; i < depth; ++i) s += objects ? "{\"a\":" : "[";
    s += "1";
    for (int i = 0; i < depth; ++i) s += objects ? "}" : "]";
    return s;
}

constexpr int DEEP = 100000;
const std::string TOO_DEEP = "JSON nested deeper than 128 levels";

TEST(JsonLimits, DeepConfigIsAnError) {
    for (const bool objects : {false, true}) {
        const std::string text = R"({"model_type": "qwen2", "rope_scaling": )" + nested(DEEP, objects) + "}";
        expect_error([&] { parse_qwen_config(text, "dir/config.json"); }, {"dir/config.json: ", TOO_DEEP});
        expect_error([&] { parse_generation_config(text, "dir/generation_config.json"); },
                     {"dir/generation_config.json: ", TOO_DEEP});
    }
}

TEST(JsonLimits, DeepSafetensorsHeaderIsAnError) {
    const std::string file = raw_file(R"({"t": )" + nested(DEEP, true) + "}");
    const auto* bytes = reinterpret_cast<const std::byte*>(file.data());
    expect_error(
        [&] {
            parse_safetensors_header({bytes, file.size()}, "m.safetensors");
        },
        {"m.safetensors: header: ", TOO_DEEP});
}

TEST(JsonLimits, DeepShardIndexIsAnError) {
    TempDir dir;
    dir.write("model.safetensors.index.json", R"({"weight_map": )" + nested(DEEP) + "}");
    expect_error([&] { SafetensorsSet::open(dir.path()); }, {"model.safetensors.index.json", TOO_DEEP});
}

// The limit leaves real files alone: 128 levels parse (and then fail on meaning, not depth), and
// brackets inside strings are text.
TEST(JsonLimits, TheLimitIsExactAndIgnoresStrings) {
    const std::string at_limit = R"({"model_type": "qwen2", "x": )" + nested(127) + "}";
    const std::string msg = expect_error([&] { parse_qwen_config(at_limit, "c.json"); }, {"hidden_size"});
    EXPECT_EQ(msg.find(TOO_DEEP), std::string::npos) << msg;
    EXPECT_NO_THROW(check_json_depth(R"({"s": ")" + std::string(1000, '[') + R"(\"[{"})", "s.json"));
    expect_error([&] { check_json_depth(nested(129), "x.json"); }, {"x.json: ", TOO_DEEP, "(at byte 128)"});
}

TEST(JsonLimits, LongValuesAreQuotedAsAShortPrefix) {
    const std::string big(100000, 'x');
    const std::string text = R"({"model_type": "qwen2", "hidden_size": ")" + big + R"("})";
    const std::string msg =
        expect_error([&] { parse_qwen_config(text, "c.json"); },
                     {"field \"hidden_size\" must be an integer, got string \"xxxx", "(100002 bytes)"});
    EXPECT_LT(msg.size(), 200u) << msg;
    std::string offsets = "[0, 4";
    for (int i = 0; i < 50000; ++i) offsets += ", 1";
    const std::string file =
        raw_file(R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": )" + offsets + "]}}", "0000");
    const auto* bytes = reinterpret_cast<const std::byte*>(file.data());
    const std::string st = expect_error(
        [&] {
            parse_safetensors_header({bytes, file.size()}, "m.safetensors");
        },
        {"m.safetensors: tensor 't': data_offsets must be [begin, end], got [0,4,1"});
    EXPECT_LT(st.size(), 300u) << st;
    // The parser's own message quotes the token it choked on: cut as well.
    const std::string syntax = expect_error(
        [&] { parse_generation_config(R"({"top_k": )" + std::string(50000, '9') + "}", "g.json"); }, {"g.json: "});
    EXPECT_LT(syntax.size(), 400u) << syntax;
    EXPECT_EQ(excerpt("short"), "short");
    EXPECT_EQ(excerpt(std::string(61, 'a')), std::string(60, 'a') + "... (61 bytes)");
    EXPECT_EQ(excerpt("\xc3\xa9\xc3\xa9", 3), "\xc3\xa9... (4 bytes)") << "never cut inside a UTF-8 character";
}

}  // namespace
}  // namespace flashport::engine
