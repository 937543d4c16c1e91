// Helpers for the model tests: the fixture folders, their reference files (written by
// tools/make_qwen_fixtures.py with transformers; see tests/data/models/README.md), and running a
// prompt through the engine.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/model.h"

namespace flashport::engine::test {

inline const std::filesystem::path MODELS = std::filesystem::path(FP_MODEL_DATA_DIR) / "models";

// One transformers run recorded in reference.json.
struct Reference {
    std::string name;           // "f32" or "bf16run"
    std::vector<float> logits;  // [prompt_len, vocab], row-major
    int64_t vocab = 0;
    std::vector<int32_t> greedy;  // 64 greedy tokens after the prompt
    double min_margin_prompt = 0, min_margin_greedy = 0;
    std::span<const float> row(int64_t t) const {
        return std::span<const float>(logits).subspan(size_t(t * vocab), size_t(vocab));
    }
};

struct References {
    std::vector<int32_t> prompt;
    std::vector<Reference> runs;
    const Reference& get(const std::string& name) const {
        for (const Reference& r : runs)
            if (r.name == name) return r;
        throw std::runtime_error("no reference run " + name);
    }
};

// `folder` is a fixture folder name; the sharded one shares qwen3-tiny-bf16's references.
inline References load_references(const std::string& folder) {
    const std::string ref_folder = folder == "qwen3-tiny-bf16-sharded" ? "qwen3-tiny-bf16" : folder;
    const std::filesystem::path dir = MODELS / ref_folder / "reference";
    std::ifstream in(dir / "reference.json");
    const nlohmann::json j = nlohmann::json::parse(in);
    References refs;
    refs.prompt = j.at("prompt_ids").get<std::vector<int32_t>>();
    for (const auto& r : j.at("references")) {
        Reference ref;
        ref.name = r.at("name").get<std::string>();
        const auto shape = r.at("logits_shape").get<std::vector<int64_t>>();
        ref.vocab = shape.at(1);
        ref.logits.resize(size_t(shape[0] * shape[1]));
        std::ifstream bin(dir / r.at("logits_file").get<std::string>(), std::ios::binary);
        bin.read(reinterpret_cast<char*>(ref.logits.data()), std::streamsize(ref.logits.size() * sizeof(float)));
        if (!bin) throw std::runtime_error("short logits file in " + dir.string());
        ref.greedy = r.at("greedy_ids").get<std::vector<int32_t>>();
        ref.min_margin_prompt = r.at("min_top2_margin_prompt").get<double>();
        ref.min_margin_greedy = r.at("min_top2_margin_greedy").get<double>();
        refs.runs.push_back(std::move(ref));
    }
    return refs;
}

// A fixture folder's name as a gtest parameter name ("qwen2-tiny-f32" -> "qwen2_tiny_f32").
inline std::string test_name(std::string name) {
    std::replace(name.begin(), name.end(), '-', '_');
    return name;
}

inline Model load_model(const std::string& folder, std::optional<DType> dtype = std::nullopt) {
    ModelOptions o;
    o.dtype = dtype;
    return Model::load(MODELS / folder, o);
}

// Logits at every position of `ids`, from one prefill (all_logits) on a fresh engine.
inline std::vector<float> all_logits(Engine& engine, const std::vector<int32_t>& ids) {
    const SeqId seq = engine.add_sequence(ids, true);
    std::vector<float> out;
    while (engine.has_pending())
        for (const SeqLogits& r : engine.step()) out.insert(out.end(), r.logits.begin(), r.logits.end());
    engine.release(seq);
    return out;
}

inline int32_t argmax(std::span<const float> row) {
    return int32_t(std::max_element(row.begin(), row.end()) - row.begin());  // first maximum, as torch
}

// Top-1 minus top-2 logit.
inline double top2_gap(std::span<const float> row) {
    std::vector<float> v(row.begin(), row.end());
    std::partial_sort(v.begin(), v.begin() + 2, v.end(), std::greater<float>());
    return double(v[0]) - double(v[1]);
}

inline double max_abs(std::span<const float> v) {
    double m = 0;
    for (float x : v) m = std::max(m, double(std::fabs(x)));
    return m;
}

inline double max_abs_diff(std::span<const float> a, std::span<const float> b) {
    EXPECT_EQ(a.size(), b.size());
    double m = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(double(a[i]) - double(b[i])));
    return m;
}

// Greedy decoding on the engine (prefill, then one token per step). `rows` receives each step's logits.
inline std::vector<int32_t> greedy(Engine& engine, const std::vector<int32_t>& prompt, int n,
                                   std::vector<std::vector<float>>* rows = nullptr) {
    const SeqId seq = engine.add_sequence(prompt);
    std::vector<int32_t> out;
    while (int(out.size()) < n) {
        const std::vector<SeqLogits> r = engine.step();
        EXPECT_EQ(r.size(), 1u);
        const int32_t t = argmax(r[0].last());
        if (rows) rows->emplace_back(r[0].last().begin(), r[0].last().end());
        out.push_back(t);
        engine.append(seq, t);
    }
    engine.release(seq);
    return out;
}

}  // namespace flashport::engine::test
