// check_weights: a folder whose tensors do not match its config is refused, naming the first
// missing or mis-shaped tensor. The folders are the qwen2/qwen3 fixtures rewritten with one change.
// And the layout a loaded model holds its weights in (model_weights.h): [q; k; v] and [gate; up]
// stacked on every device, each weight held once.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "engine/model.h"
#include "engine/model_config.h"
#include "engine/safetensors.h"
#include "engine_test_util.h"

namespace flashport::engine {
namespace {

using test::expect_error;
using test::StTensor;

const std::filesystem::path MODELS = test::DATA_DIR / "models";

// Copies `fixture` into `dir`, passing each tensor through `edit` (which may drop it by clearing
// its name) before writing it back as one model.safetensors.
void rewrite(const test::TempDir& dir, const char* fixture, const std::function<void(StTensor&)>& edit) {
    std::filesystem::copy_file(MODELS / fixture / "config.json", dir / "config.json");
    const SafetensorsSet src = SafetensorsSet::open(MODELS / fixture);
    std::vector<StTensor> out;
    for (const std::string& name : src.names()) {
        const TensorInfo& info = src.info(name);
        const auto bytes = src.bytes(name);
        StTensor t{name, st_dtype_name(info.dtype), info.shape,
                   std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size())};
        edit(t);
        if (!t.name.empty()) out.push_back(std::move(t));
    }
    dir.write("model.safetensors", test::make_safetensors(out));
}

void expect_check_fails(const char* fixture, const std::function<void(StTensor&)>& edit,
                        std::initializer_list<std::string> phrases) {
    test::TempDir dir;
    rewrite(dir, fixture, edit);
    const QwenConfig c = load_qwen_config(dir.path());
    const SafetensorsSet w = SafetensorsSet::open(dir.path());
    expect_error([&] { check_weights(c, w); }, phrases);
}

TEST(ModelWeights, AnUnchangedRewritePasses) {
    test::TempDir dir;
    rewrite(dir, "qwen3-tiny-f32", [](StTensor&) {});
    EXPECT_NO_THROW(check_weights(load_qwen_config(dir.path()), SafetensorsSet::open(dir.path())));
}

TEST(ModelWeights, MissingTensorsAreNamed) {
    expect_check_fails("qwen2-tiny-f32",
                       [](StTensor& t) {
                           if (t.name == "model.layers.1.self_attn.k_proj.bias") t.name.clear();
                       },
                       {"tensor 'model.layers.1.self_attn.k_proj.bias' is missing", "model.safetensors", "shape [32]"});
    expect_check_fails("qwen3-tiny-f32",
                       [](StTensor& t) {
                           if (t.name == "model.layers.2.self_attn.q_norm.weight") t.name.clear();
                       },
                       {"tensor 'model.layers.2.self_attn.q_norm.weight' is missing"});
    expect_check_fails("qwen3-tiny-f32",
                       [](StTensor& t) {
                           if (t.name == "lm_head.weight") t.name.clear();
                       },
                       {"tensor 'lm_head.weight' is missing"});
    expect_check_fails("qwen2-tiny-f32",
                       [](StTensor& t) {
                           if (t.name == "model.norm.weight") t.name.clear();
                       },
                       {"tensor 'model.norm.weight' is missing"});
}

TEST(ModelWeights, WrongShapesAreNamedWithTheConfigFields) {
    // Same bytes, other shape: only the shape check can catch it.
    expect_check_fails("qwen2-tiny-f32",
                       [](StTensor& t) {
                           if (t.name == "model.layers.0.self_attn.k_proj.weight") t.shape = {64, 32};
                       },
                       {"tensor 'model.layers.0.self_attn.k_proj.weight' has shape [64, 32]", "implies [32, 64]",
                        "num_key_value_heads 2 x head_dim 16", "config.json"});
    expect_check_fails("qwen3-tiny-f32",
                       [](StTensor& t) {
                           if (t.name == "model.embed_tokens.weight") t.shape = {256, 128};
                       },
                       {"'model.embed_tokens.weight' has shape [256, 128]", "implies [512, 64]", "vocab_size"});
    expect_check_fails("qwen3-tiny-f32",
                       [](StTensor& t) {
                           if (t.name == "model.layers.1.mlp.down_proj.weight") t.shape = {128, 64};
                       },
                       {"down_proj.weight' has shape [128, 64]", "intermediate_size"});
}

TEST(ModelWeights, UnloadableDtypesAreNamed) {
    expect_check_fails("qwen2-tiny-f32",
                       [](StTensor& t) {
                           if (t.name == "model.norm.weight") t.dtype = "I32";
                       },
                       {"tensor 'model.norm.weight'", "has dtype I32", "F32, F16 and BF16"});
}

TEST(ModelWeights, ExtraTensorsAreAllowed) {
    // A tied checkpoint that still stores lm_head.weight, as some exports do.
    test::TempDir dir;
    rewrite(dir, "qwen2-tiny-f32", [](StTensor&) {});
    const SafetensorsSet src = SafetensorsSet::open(dir.path());
    std::vector<StTensor> all;
    for (const std::string& name : src.names()) {
        const auto b = src.bytes(name);
        all.push_back(
            {name, "F32", src.info(name).shape, std::string(reinterpret_cast<const char*>(b.data()), b.size())});
    }
    all.push_back(all.front());
    all.back().name = "lm_head.weight";
    all.back().shape = {512, 64};
    all.back().data = std::string(512 * 64 * 4, '\0');
    dir.write("model.safetensors", test::make_safetensors(all));
    EXPECT_NO_THROW(check_weights(load_qwen_config(dir.path()), SafetensorsSet::open(dir.path())));
}

TEST(ModelWeights, ExpectedTensorsFollowTheConfig) {
    QwenConfig c = load_qwen_config(MODELS / "qwen2-tiny-f32");
    EXPECT_EQ(expected_tensors(c).size(), 1u + 2u * 12u + 1u);  // tied: no lm_head
    c.tie_word_embeddings = false;
    EXPECT_EQ(expected_tensors(c).back().name, "lm_head.weight");
    const QwenConfig q3 = load_qwen_config(MODELS / "qwen3-tiny-f32");
    EXPECT_EQ(expected_tensors(q3).size(), 1u + 3u * 11u + 2u);
}

// The bytes of `names` in the files, one after the other: what a stack must hold when no dtype changes.
std::string concat(const SafetensorsSet& files, std::initializer_list<std::string> names) {
    std::string out;
    for (const std::string& name : names) {
        const auto b = files.bytes(name);
        out.append(reinterpret_cast<const char*>(b.data()), b.size());
    }
    return out;
}

std::string bytes_of(const TensorView& t) {
    if (!t.data) return {};
    return std::string(static_cast<const char*>(t.data), size_t(t.numel()) * dtype_size(t.dtype));
}

// On the CPU too, q/k/v (and Qwen2's biases) and gate/up are one stacked weight each, in the files'
// dtype and bytes; the copies are tracked, and the weights are counted once (weight_bytes is the
// files' total). With map_weights only the stacks are copies; by default every weight is.
TEST(WeightLayout, StacksQkvAndGateUpOnTheCpu) {
    for (const char* fixture : {"qwen2-tiny-bf16", "qwen3-tiny-bf16"}) {
        SCOPED_TRACE(fixture);
        const int64_t live_before = memory_stats().live_bytes;
        ModelOptions mapped;
        mapped.map_weights = true;
        const Model model = Model::load(MODELS / fixture, mapped);
        const QwenConfig& c = model.config();
        const SafetensorsSet files = SafetensorsSet::open(MODELS / fixture);
        size_t file_bytes = 0, stacked_bytes = 0;
        for (const ExpectedTensor& e : expected_tensors(c)) file_bytes += files.info(e.name).nbytes();
        EXPECT_EQ(model.weight_bytes(), file_bytes);

        for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
            const std::string p = "model.layers." + std::to_string(i) + ".";
            const LayerWeights& w = model.layer(i);
            EXPECT_EQ(w.qkv.dim(0), c.q_dim() + 2 * c.kv_dim());
            EXPECT_EQ(w.qkv.dim(1), c.hidden_size);
            EXPECT_EQ(w.qkv.dtype, DType::BF16);
            EXPECT_EQ(bytes_of(w.qkv), concat(files, {p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight",
                                                      p + "self_attn.v_proj.weight"}));
            EXPECT_EQ(w.gate_up.dim(0), 2 * c.intermediate_size);
            EXPECT_EQ(bytes_of(w.gate_up), concat(files, {p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"}));
            EXPECT_EQ(w.qkv_bias.data != nullptr, c.qkv_bias);
            EXPECT_EQ(w.q_norm.data != nullptr, c.qk_norm);
            if (c.qkv_bias) {
                EXPECT_EQ(bytes_of(w.qkv_bias), concat(files, {p + "self_attn.q_proj.bias", p + "self_attn.k_proj.bias",
                                                               p + "self_attn.v_proj.bias"}));
            }
            stacked_bytes += bytes_of(w.qkv).size() + bytes_of(w.qkv_bias).size() + bytes_of(w.gate_up).size();
        }
        EXPECT_EQ(memory_stats().live_bytes - live_before, int64_t(stacked_bytes)) << "only the stacks are copies";
        EXPECT_EQ(model.mapped_weight_bytes(), file_bytes - stacked_bytes);

        const int64_t before_copied = memory_stats().live_bytes;
        const Model copied = Model::load(MODELS / fixture);
        EXPECT_EQ(memory_stats().live_bytes - before_copied, int64_t(file_bytes)) << "every weight is a copy";
        EXPECT_EQ(copied.mapped_weight_bytes(), 0u);
        EXPECT_EQ(copied.weight_bytes(), file_bytes);
        EXPECT_EQ(bytes_of(copied.layer(0).down), bytes_of(model.layer(0).down));
        EXPECT_EQ(bytes_of(copied.layer(0).o), bytes_of(model.layer(0).o));
    }
}

// Parts stored in different dtypes stack as fp32, which holds each exactly.
TEST(WeightLayout, MixedDtypesStackAsF32) {
    test::TempDir dir;
    rewrite(dir, "qwen3-tiny-bf16", [](StTensor& t) {
        if (t.name != "model.layers.0.self_attn.k_proj.weight") return;
        std::string f32(t.data.size() * 2, '\0');
        for (size_t i = 0; i < t.data.size() / 2; ++i) {
            uint16_t h;
            std::memcpy(&h, t.data.data() + 2 * i, 2);
            const float x = bf16_to_float(h);
            std::memcpy(f32.data() + 4 * i, &x, 4);
        }
        t.dtype = "F32";
        t.data = f32;
    });
    const Model mixed = Model::load(dir.path()), plain = Model::load(MODELS / "qwen3-tiny-bf16");
    const TensorView a = mixed.layer(0).qkv, b = plain.layer(0).qkv;
    ASSERT_EQ(a.dtype, DType::F32);
    ASSERT_EQ(a.numel(), b.numel());
    for (int64_t i = 0; i < a.numel(); ++i)
        ASSERT_EQ(static_cast<const float*>(a.data)[i], bf16_to_float(static_cast<const uint16_t*>(b.data)[i])) << i;
    EXPECT_EQ(mixed.layer(1).qkv.dtype, DType::BF16);
}

}  // namespace
}  // namespace flashport::engine
