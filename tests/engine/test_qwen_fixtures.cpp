// The tiny Qwen folders made by tools/make_qwen_fixtures.py load with the engine's loader and
// config, hold exactly the tensors the config implies, and their reference files are readable.
// (The forward pass is compared with the reference logits elsewhere.)
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <set>

#include "engine/model_config.h"
#include "engine/safetensors.h"
#include "engine_test_util.h"

namespace flashport::engine {
namespace {

const std::filesystem::path MODELS = test::DATA_DIR / "models";

struct Fixture {
    const char* folder;
    QwenArch arch;
    DType dtype;
    bool tied;
    size_t files;
};

const Fixture FIXTURES[] = {
    {"qwen2-tiny-f32", QwenArch::QWEN2, DType::F32, true, 1},
    {"qwen2-tiny-bf16", QwenArch::QWEN2, DType::BF16, true, 1},
    {"qwen3-tiny-f32", QwenArch::QWEN3, DType::F32, false, 1},
    {"qwen3-tiny-bf16", QwenArch::QWEN3, DType::BF16, false, 1},
    {"qwen3-tiny-bf16-sharded", QwenArch::QWEN3, DType::BF16, false, 3},
};

class QwenFixture : public ::testing::TestWithParam<Fixture> {};

TEST_P(QwenFixture, LoadsWithEveryExpectedTensorAndNothingElse) {
    const Fixture& fx = GetParam();
    const auto dir = MODELS / fx.folder;
    const QwenConfig c = load_qwen_config(dir);
    EXPECT_EQ(c.arch, fx.arch);
    EXPECT_EQ(c.tie_word_embeddings, fx.tied);
    EXPECT_EQ(c.dtype, fx.dtype);  // written as "dtype" by transformers 5
    EXPECT_EQ(c.vocab_size, 512);
    EXPECT_EQ(c.hidden_size, 64);
    EXPECT_EQ(c.head_dim, fx.arch == QwenArch::QWEN2 ? 16 : 32);
    EXPECT_EQ(c.num_key_value_heads, 2);

    const GenerationConfig g = load_generation_config(dir, c);
    EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{511, 510}));
    EXPECT_DOUBLE_EQ(*g.temperature, 0.7);

    const SafetensorsSet weights = SafetensorsSet::open(dir);
    EXPECT_EQ(weights.files().size(), fx.files);
    check_weights(c, weights);

    std::set<std::string> expected;
    for (const ExpectedTensor& e : expected_tensors(c)) {
        expected.insert(e.name);
        const TensorView v = weights.view(e.name);
        EXPECT_EQ(v.dtype, fx.dtype) << e.name;
        EXPECT_EQ(v.ndim, int(e.shape.size())) << e.name;
    }
    const std::vector<std::string> names = weights.names();
    EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), expected);
    EXPECT_EQ(weights.contains("lm_head.weight"), !fx.tied);
}

INSTANTIATE_TEST_SUITE_P(Folders, QwenFixture, ::testing::ValuesIn(FIXTURES), [](const auto& param_info) {
    std::string name = param_info.param.folder;
    for (char& ch : name)
        if (ch == '-') ch = '_';
    return name;
});

TEST(QwenFixtures, ShardedFolderHoldsTheSameBytes) {
    const SafetensorsSet one = SafetensorsSet::open(MODELS / "qwen3-tiny-bf16");
    const SafetensorsSet sharded = SafetensorsSet::open(MODELS / "qwen3-tiny-bf16-sharded");
    ASSERT_EQ(one.names(), sharded.names());
    for (const std::string& name : one.names()) {
        const auto a = one.bytes(name), b = sharded.bytes(name);
        ASSERT_EQ(a.size(), b.size()) << name;
        EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0) << name;
    }
}

TEST(QwenFixtures, Bf16FoldersAreTheF32WeightsRounded) {
    for (const char* arch : {"qwen2", "qwen3"}) {
        const SafetensorsSet f32 = SafetensorsSet::open(MODELS / (std::string(arch) + "-tiny-f32"));
        const SafetensorsSet bf16 = SafetensorsSet::open(MODELS / (std::string(arch) + "-tiny-bf16"));
        ASSERT_EQ(f32.names(), bf16.names());
        for (const std::string& name : f32.names()) {
            const TensorView a = f32.view(name), b = bf16.view(name);
            ASSERT_EQ(a.numel(), b.numel()) << name;
            const auto* pa = static_cast<const float*>(a.data);
            const auto* pb = static_cast<const uint16_t*>(b.data);
            for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(float_to_bf16(pa[i]), pb[i]) << name << "[" << i << "]";
        }
    }
}

TEST(QwenFixtures, ReferenceFilesAreComplete) {
    for (const char* folder : {"qwen2-tiny-f32", "qwen2-tiny-bf16", "qwen3-tiny-f32", "qwen3-tiny-bf16"}) {
        SCOPED_TRACE(folder);
        const auto ref_dir = MODELS / folder / "reference";
        std::ifstream in(ref_dir / "reference.json");
        ASSERT_TRUE(in) << ref_dir;
        const nlohmann::json ref = nlohmann::json::parse(in);
        EXPECT_EQ(ref["prompt_ids"].size(), 24u);
        const bool bf16 = std::string(folder).ends_with("bf16");
        ASSERT_EQ(ref["references"].size(), bf16 ? 2u : 1u);
        for (const auto& r : ref["references"]) {
            const auto shape = r["logits_shape"].get<std::vector<int64_t>>();
            ASSERT_EQ(shape, (std::vector<int64_t>{24, 512}));
            EXPECT_EQ(std::filesystem::file_size(ref_dir / r["logits_file"].get<std::string>()),
                      uintmax_t(24 * 512 * 4));
            const auto ids = r["greedy_ids"].get<std::vector<int64_t>>();
            ASSERT_EQ(ids.size(), 64u);
            for (int64_t id : ids) EXPECT_TRUE(id >= 0 && id < 512);
            // Peaked logits: the continuation must not collapse into a repeated token.
            EXPECT_GE(std::set<int64_t>(ids.begin(), ids.end()).size(), 32u);
        }
    }
}

}  // namespace
}  // namespace flashport::engine
