// config.json and generation_config.json: released Qwen folders, transformers 5 names, and every
// refusal (quantised, rope_scaling, sliding window, inconsistent or mistyped fields).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <functional>

#include "engine/model_config.h"
#include "engine_test_util.h"

namespace flashport::engine {
namespace {

using test::expect_error;
using Json = nlohmann::json;

const std::filesystem::path CONFIGS = test::DATA_DIR / "models" / "configs";

// A small valid qwen2 config; tests change one field at a time.
Json base_qwen2() {
    return Json::parse(R"({"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512,
        "max_position_embeddings": 1024, "rope_theta": 10000.0, "eos_token_id": 511})");
}

Json base_qwen3() {
    Json j = base_qwen2();
    j["model_type"] = "qwen3";
    j["head_dim"] = 32;
    return j;
}

QwenConfig parse(const Json& j) {
    return parse_qwen_config(j.dump(), "test/config.json");
}

// Expects parse(j) to fail with every phrase, and the message to name the file.
void expect_refused(const Json& j, std::initializer_list<std::string> phrases) {
    const std::string msg = expect_error([&] { parse(j); }, phrases);
    EXPECT_NE(msg.find("test/config.json"), std::string::npos) << msg;
}

// What differs between the released Qwen2.5 sizes; the rest they share (checked in expect_qwen25).
struct Qwen25Shapes {
    const char* folder;
    int64_t hidden, intermediate, layers, heads, kv_heads, head_dim, vocab;
    bool tied;
};

QwenConfig expect_qwen25(const Qwen25Shapes& e) {
    SCOPED_TRACE(e.folder);
    const QwenConfig c = load_qwen_config(CONFIGS / e.folder);
    EXPECT_EQ(c.arch, QwenArch::QWEN2);
    EXPECT_EQ(c.hidden_size, e.hidden);
    EXPECT_EQ(c.intermediate_size, e.intermediate);
    EXPECT_EQ(c.num_hidden_layers, e.layers);
    EXPECT_EQ(c.num_attention_heads, e.heads);
    EXPECT_EQ(c.num_key_value_heads, e.kv_heads);
    EXPECT_EQ(c.head_dim, e.head_dim);  // hidden / heads: Qwen2 configs carry no head_dim
    EXPECT_EQ(c.vocab_size, e.vocab);
    EXPECT_EQ(c.tie_word_embeddings, e.tied);
    EXPECT_EQ(c.max_position_embeddings, 32768);
    EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
    EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
    EXPECT_TRUE(c.qkv_bias);
    EXPECT_FALSE(c.o_bias);
    EXPECT_FALSE(c.qk_norm);
    EXPECT_EQ(c.dtype, DType::BF16);
    EXPECT_EQ(c.dtype_name, "bfloat16");
    // use_sliding_window false: transformers drops the window, every layer attends fully.
    EXPECT_FALSE(c.sliding_window);
    EXPECT_EQ(c.layer_types, std::vector<LayerType>(size_t(e.layers), LayerType::FULL_ATTENTION));
    EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{151645});
    return c;
}

TEST(ModelConfig, Qwen25HalfBInstructAsPublished) {
    const QwenConfig c = expect_qwen25({"qwen2.5-0.5b-instruct", 896, 4864, 24, 14, 2, 64, 151936, true});

    const GenerationConfig g = load_generation_config(CONFIGS / "qwen2.5-0.5b-instruct", c);
    EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{151645, 151643}));  // generation_config wins
    EXPECT_EQ(g.bos_token_id, 151643);
    EXPECT_EQ(g.pad_token_id, 151643);
    EXPECT_EQ(g.do_sample, true);
    EXPECT_DOUBLE_EQ(*g.temperature, 0.7);
    EXPECT_DOUBLE_EQ(*g.top_p, 0.8);
    EXPECT_EQ(g.top_k, 20);
    EXPECT_DOUBLE_EQ(*g.repetition_penalty, 1.1);
    EXPECT_FALSE(g.min_p);
}

// The shapes of the engine benchmark's random folder (bench/gpu/engine_peers.py): an untied lm_head,
// GQA 28 / 4 at head_dim 128, and a sliding window that use_sliding_window false switches off.
TEST(ModelConfig, Qwen25SevenBInstructAsPublished) {
    const QwenConfig c = expect_qwen25({"qwen2.5-7b-instruct", 3584, 18944, 28, 28, 4, 128, 152064, false});

    const GenerationConfig g = load_generation_config(CONFIGS / "qwen2.5-7b-instruct", c);
    EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{151645, 151643}));
    EXPECT_DOUBLE_EQ(*g.repetition_penalty, 1.05);
}

TEST(ModelConfig, Qwen3ZeroSixBAsPublished) {
    const QwenConfig c = load_qwen_config(CONFIGS / "qwen3-0.6b" / "config.json");
    EXPECT_EQ(c.arch, QwenArch::QWEN3);
    EXPECT_EQ(c.head_dim, 128);  // explicit, and != 1024 / 16
    EXPECT_EQ(c.q_dim(), 2048);
    EXPECT_EQ(c.kv_dim(), 1024);
    EXPECT_TRUE(c.qk_norm);
    EXPECT_FALSE(c.qkv_bias);
    EXPECT_FALSE(c.o_bias);
    EXPECT_EQ(c.rope_type, "default");    // rope_scaling null
    EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);  // an integer in the file
    EXPECT_EQ(c.max_position_embeddings, 40960);

    const GenerationConfig g = load_generation_config(CONFIGS / "qwen3-0.6b", c);
    EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{151645, 151643}));
    EXPECT_DOUBLE_EQ(*g.temperature, 0.6);
    EXPECT_DOUBLE_EQ(*g.top_p, 0.95);
    EXPECT_FALSE(g.repetition_penalty);
}

TEST(ModelConfig, TransformersFiveNames) {
    Json j = base_qwen3();
    j.erase("rope_theta");
    j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 500000.0}};
    j["dtype"] = "float16";
    j["torch_dtype"] = "bfloat16";  // dtype wins when both are present
    j["layer_types"] = {"full_attention", "full_attention", "full_attention", "full_attention"};
    const QwenConfig c = parse(j);
    EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
    EXPECT_EQ(c.dtype, DType::F16);
    EXPECT_EQ(c.layer_types.size(), 4u);
}

TEST(ModelConfig, RopePrecedenceFollowsTransformers) {
    Json j = base_qwen2();
    j.erase("rope_theta");
    EXPECT_DOUBLE_EQ(parse(j).rope_theta, 10000.0);  // the default base
    j["rope_theta"] = 2e5;
    j["rope_parameters"] = {{"rope_type", "default"}};
    EXPECT_DOUBLE_EQ(parse(j).rope_theta, 2e5);  // top-level theta fills rope_parameters
    j["rope_parameters"]["rope_theta"] = 3e5;
    EXPECT_DOUBLE_EQ(parse(j).rope_theta, 3e5);  // theta inside rope_parameters wins
    j["rope_scaling"] = {{"type", "default"}, {"rope_theta", 4e5}};
    EXPECT_DOUBLE_EQ(parse(j).rope_theta, 4e5);  // a non-empty rope_scaling wins over rope_parameters
    j["rope_scaling"] = Json::object();
    EXPECT_DOUBLE_EQ(parse(j).rope_theta, 3e5);  // an empty one does not
}

TEST(ModelConfig, UnsupportedRopeScalingIsNamed) {
    for (const char* type : {"yarn", "linear", "dynamic", "llama3", "longrope"}) {
        SCOPED_TRACE(type);
        Json j = base_qwen2();
        j["rope_scaling"] = {{"type", type}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
        expect_refused(j, {"rope_scaling type '" + std::string(type) + "' is not supported yet"});
        j.erase("rope_scaling");
        j["rope_parameters"] = {{"rope_type", type}, {"rope_theta", 1e6}, {"factor", 4.0}};
        expect_refused(j, {"rope_parameters type '" + std::string(type) + "'"});
    }
    Json j = base_qwen2();
    j["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}}}};
    expect_refused(j, {"per-layer-type RoPE parameters"});
    j["rope_parameters"] = "default";
    expect_refused(j, {"field \"rope_parameters\"", "must be an object"});
}

TEST(ModelConfig, QuantisedCheckpointsAreRefusedByMethod) {
    for (const char* method : {"gptq", "awq", "fp8", "bitsandbytes", "compressed-tensors"}) {
        Json j = base_qwen2();
        j["quantization_config"] = {{"quant_method", method}, {"bits", 4}};
        expect_refused(j, {"quantised checkpoints are not supported yet (quant_method " + std::string(method) + ","});
    }
    Json j = base_qwen2();
    j["quantization_config"] = {{"bits", 4}};
    expect_refused(j, {"quant_method unknown"});
    j = base_qwen2();
    j["quantization_config"] = nullptr;  // null means none
    EXPECT_NO_THROW(parse(j));
}

TEST(ModelConfig, SlidingWindowIsRefusedOnlyWhereItWouldTakeEffect) {
    // As in Qwen2.5-7B: the fields are there but use_sliding_window is false.
    Json j = base_qwen2();
    j["sliding_window"] = 128;
    j["max_window_layers"] = 2;
    j["use_sliding_window"] = false;
    EXPECT_FALSE(parse(j).sliding_window);

    // Enabled on layers 2 and 3 with a window shorter than the context: refused.
    j["use_sliding_window"] = true;
    expect_refused(
        j, {"sliding-window attention is not supported yet", "sliding_window 128", "2 of 4 layers", "from layer 2"});

    // A window as long as the context cannot change any attention row.
    j["sliding_window"] = 1024;
    QwenConfig c = parse(j);
    EXPECT_EQ(c.sliding_window, 1024);
    EXPECT_EQ(c.layer_types[3], LayerType::SLIDING_ATTENTION);

    // No layer at or past max_window_layers: nothing is windowed.
    j["sliding_window"] = 128;
    j["max_window_layers"] = 4;
    EXPECT_NO_THROW(parse(j));

    // Absent sliding_window means transformers' default 4096; null means none.
    j = base_qwen2();
    j["use_sliding_window"] = true;
    j["max_window_layers"] = 0;
    j["max_position_embeddings"] = 8192;
    expect_refused(j, {"sliding_window 4096"});
    j["sliding_window"] = nullptr;
    EXPECT_NO_THROW(parse(j));

    // layer_types given explicitly decides which layers would be windowed.
    j = base_qwen2();
    j["use_sliding_window"] = true;
    j["sliding_window"] = 64;
    j["max_window_layers"] = 0;
    j["layer_types"] = {"full_attention", "full_attention", "full_attention", "full_attention"};
    EXPECT_NO_THROW(parse(j));
    j["layer_types"][1] = "sliding_attention";
    expect_refused(j, {"1 of 4 layers from layer 1"});
    j["layer_types"] = {"full_attention"};
    expect_refused(j, {"field \"layer_types\"", "list of 4"});
    j["layer_types"] = {"full_attention", "chunked_attention", "full_attention", "full_attention"};
    expect_refused(j, {"field \"layer_types\"", "chunked_attention"});
}

TEST(ModelConfig, DefaultsWhenOptionalFieldsAreAbsent) {
    Json j = base_qwen3();
    for (const char* k : {"head_dim", "num_key_value_heads", "max_position_embeddings", "rope_theta"}) j.erase(k);
    const QwenConfig c = parse(j);
    EXPECT_EQ(c.head_dim, 128);  // Qwen3Config's default, not hidden / heads
    EXPECT_EQ(c.num_key_value_heads, 4);
    EXPECT_EQ(c.max_position_embeddings, 32768);
    EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
    EXPECT_FALSE(c.tie_word_embeddings);
    EXPECT_FALSE(c.dtype);
    EXPECT_EQ(c.hidden_act, "silu");
}

TEST(ModelConfig, Qwen3AttentionBiasAddsAllFourBiases) {
    Json j = base_qwen3();
    j["attention_bias"] = true;
    const QwenConfig c = parse(j);
    EXPECT_TRUE(c.qkv_bias);
    EXPECT_TRUE(c.o_bias);
}

TEST(ModelConfig, InconsistentOrMistypedFieldsAreNamed) {
    struct Case {
        const char* what;
        std::function<void(Json&)> edit;
        std::vector<std::string> phrases;
    };
    const std::vector<Case> cases = {
        {"model type", [](Json& j) { j["model_type"] = "llama"; }, {"model_type 'llama' is not supported"}},
        {"moe", [](Json& j) { j["model_type"] = "qwen2_moe"; }, {"model_type 'qwen2_moe'"}},
        {"no model type", [](Json& j) { j.erase("model_type"); }, {"field \"model_type\" is missing"}},
        {"no hidden", [](Json& j) { j.erase("hidden_size"); }, {"field \"hidden_size\" is missing"}},
        {"string size", [](Json& j) { j["hidden_size"] = "64"; }, {"field \"hidden_size\"", "must be an integer"}},
        {"float size", [](Json& j) { j["vocab_size"] = 512.0; }, {"field \"vocab_size\"", "must be an integer"}},
        {"zero layers", [](Json& j) { j["num_hidden_layers"] = 0; }, {"field \"num_hidden_layers\"", "positive"}},
        {"negative", [](Json& j) { j["intermediate_size"] = -1; }, {"field \"intermediate_size\"", "positive"}},
        {"huge", [](Json& j) { j["hidden_size"] = int64_t(1) << 40; }, {"field \"hidden_size\"", "no larger than"}},
        {"gqa", [](Json& j) { j["num_key_value_heads"] = 3; }, {"field \"num_key_value_heads\"", "must divide"}},
        {"kv > heads", [](Json& j) { j["num_key_value_heads"] = 8; }, {"field \"num_key_value_heads\""}},
        {"hidden % heads", [](Json& j) { j["hidden_size"] = 66; }, {"field \"hidden_size\"", "not divisible"}},
        {"odd head_dim", [](Json& j) { j["head_dim"] = 15; }, {"field \"head_dim\"", "even"}},
        {"act", [](Json& j) { j["hidden_act"] = "gelu"; }, {"field \"hidden_act\"", "only silu"}},
        {"eps", [](Json& j) { j["rms_norm_eps"] = 0; }, {"field \"rms_norm_eps\"", "positive"}},
        {"eps type", [](Json& j) { j["rms_norm_eps"] = "1e-6"; }, {"field \"rms_norm_eps\"", "must be a number"}},
        {"theta", [](Json& j) { j["rope_theta"] = -1; }, {"field \"rope_theta\"", "positive"}},
        {"tie", [](Json& j) { j["tie_word_embeddings"] = 1; }, {"field \"tie_word_embeddings\"", "true or false"}},
        {"eos range", [](Json& j) { j["eos_token_id"] = 512; }, {"field \"eos_token_id\"", "outside the vocabulary"}},
        {"eos type", [](Json& j) { j["eos_token_id"] = "</s>"; }, {"field \"eos_token_id\"", "token id"}},
        {"eos negative",
         [](Json& j) {
             j["eos_token_id"] = {1, -2};
         },
         {"field \"eos_token_id\""}},
        {"not object", [](Json& j) { j = Json::array(); }, {"expected a JSON object"}},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.what);
        Json j = base_qwen2();
        c.edit(j);
        const std::string msg = expect_error([&] { parse(j); }, {});
        for (const auto& p : c.phrases) EXPECT_NE(msg.find(p), std::string::npos) << "missing '" << p << "': " << msg;
        EXPECT_NE(msg.find("test/config.json"), std::string::npos) << msg;
    }
    expect_error([] { parse_qwen_config(R"({"model_type": "qwen2", "model_type": "qwen3"})", "c.json"); },
                 {"c.json", "duplicate key \"model_type\""});
    expect_error([] { parse_qwen_config("{", "c.json"); }, {"c.json", "invalid JSON"});
    expect_error([] { load_qwen_config("/nonexistent/folder"); }, {"config.json", "no such file"});
}

TEST(GenerationConfig, ParsesAndChecksRanges) {
    GenerationConfig g = parse_generation_config(R"({"eos_token_id": 7, "top_k": 0, "min_p": 0.05})", "g.json");
    EXPECT_EQ(g.eos_token_ids, std::vector<int64_t>{7});
    EXPECT_EQ(g.top_k, 0);
    EXPECT_DOUBLE_EQ(*g.min_p, 0.05);
    EXPECT_FALSE(g.temperature);
    expect_error([] { parse_generation_config(R"({"temperature": -1})", "g.json"); }, {"g.json", "temperature"});
    expect_error([] { parse_generation_config(R"({"top_p": 1.5})", "g.json"); }, {"top_p", "outside (0"});
    expect_error([] { parse_generation_config(R"({"top_p": 0})", "g.json"); }, {"top_p"});
    expect_error([] { parse_generation_config(R"({"top_k": -3})", "g.json"); }, {"top_k", "negative"});
    expect_error([] { parse_generation_config(R"({"repetition_penalty": 0})", "g.json"); }, {"repetition_penalty"});
    expect_error([] { parse_generation_config(R"({"do_sample": "yes"})", "g.json"); }, {"do_sample", "true or false"});
    expect_error([] { parse_generation_config(R"({"eos_token_id": [1, 2.5]})", "g.json"); }, {"eos_token_id"});
}

TEST(GenerationConfig, AbsentFileFallsBackToConfigIds) {
    test::TempDir dir;
    Json j = base_qwen2();
    j["bos_token_id"] = 500;
    dir.write("config.json", j.dump());
    const QwenConfig c = load_qwen_config(dir.path());
    const GenerationConfig g = load_generation_config(dir.path(), c);
    EXPECT_EQ(g.eos_token_ids, std::vector<int64_t>{511});
    EXPECT_EQ(g.bos_token_id, 500);
    EXPECT_TRUE(g.source.empty());

    dir.write("generation_config.json", R"({"eos_token_id": [511, 600]})");
    expect_error([&] { load_generation_config(dir.path(), c); },
                 {"generation_config.json", "eos_token_id", "600", "outside the vocabulary"});
}

}  // namespace
}  // namespace flashport::engine
