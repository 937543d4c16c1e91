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

inline Model load_model(const std::string& folder, std::optional<DType> dtype = std::nullopt,
                        Device device = Device::cpu()) {
    ModelOptions o;
    o.dtype = dtype;
    o.device = device;
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

// ---- The comparison with transformers' references (rationale: tests/model/test_model_reference.cpp,
// whose tolerances these are; the GPU engine test runs the same checks on the GPU). ----

struct ReferenceCase {
    const char* folder;
    DType compute;
    const char* reference;  // which transformers run to compare with: "f32" or "bf16run"
};

// Relative to the logit scale: 1e-4 for fp32 compute; for bf16, transformers' own bf16 error (its bf16
// run's distance from its fp32 run on the same weights).
inline double reference_tolerance(const ReferenceCase& c, const References& refs) {
    if (c.compute == DType::F32) return 1e-4;
    const Reference &bf16 = refs.get("bf16run"), &f32 = refs.get("f32");
    return max_abs_diff(bf16.logits, f32.logits) / max_abs(f32.logits);
}

// Logits at every prompt position against the reference run, within the tolerance; fp32 also agrees
// on every argmax.
inline void check_reference_logits(const ReferenceCase& c, Device device) {
    const References refs = load_references(c.folder);
    const Reference& ref = refs.get(c.reference);
    const Model model = load_model(c.folder, c.compute, device);
    ASSERT_EQ(model.dtype(), c.compute);
    Engine engine(model);
    const std::vector<float> ours = all_logits(engine, refs.prompt);
    ASSERT_EQ(ours.size(), ref.logits.size());

    const double scale = max_abs(ref.logits), err = max_abs_diff(ours, ref.logits) / scale;
    int argmax_diff = 0;
    for (int64_t t = 0; t < int64_t(refs.prompt.size()); ++t)
        argmax_diff += argmax(std::span<const float>(ours).subspan(size_t(t * ref.vocab), size_t(ref.vocab))) !=
                       argmax(ref.row(t));
    const double tol = reference_tolerance(c, refs);
    // Where the error enters: position 0 has no attention mixing.
    const double err0 = max_abs_diff(std::span<const float>(ours).first(size_t(ref.vocab)),
                                     std::span<const float>(ref.logits).first(size_t(ref.vocab))) /
                        scale;
    std::printf(
        "[ measured ] %s %s on %s vs %s: max|diff|/scale = %.3g (position 0: %.3g; scale %.2f, tolerance %.2g), "
        "argmax differs at %d of %zu positions\n",
        c.folder, dtype_name(c.compute), device.name().c_str(), c.reference, err, err0, scale, tol, argmax_diff,
        refs.prompt.size());
    if (c.compute != DType::F32)
        std::printf("[ measured ] %s %s on %s vs the fp32 run: max|diff|/scale = %.3g (transformers bf16: %.3g)\n",
                    c.folder, dtype_name(c.compute), device.name().c_str(),
                    max_abs_diff(ours, refs.get("f32").logits) / max_abs(refs.get("f32").logits), tol);
    EXPECT_LE(err, tol);
    if (c.compute == DType::F32) {
        EXPECT_EQ(argmax_diff, 0);
    }
}

// The greedy continuation: identical for fp32; for bf16 identical until a step where the reference's
// token is a near-tie in our logits (within 2x the absolute tolerance of our top logit), and for at
// least 16 tokens.
inline void check_reference_greedy(const ReferenceCase& c, Device device) {
    const References refs = load_references(c.folder);
    const Reference& ref = refs.get(c.reference);
    const Model model = load_model(c.folder, c.compute, device);
    Engine engine(model);
    std::vector<std::vector<float>> rows;
    const std::vector<int32_t> ours = greedy(engine, refs.prompt, int(ref.greedy.size()), &rows);

    size_t same = 0;
    while (same < ours.size() && ours[same] == ref.greedy[same]) ++same;
    if (c.compute == DType::F32) {
        EXPECT_EQ(ours, ref.greedy);
        std::printf("[ measured ] %s %s on %s greedy: %zu of %zu identical\n", c.folder, dtype_name(c.compute),
                    device.name().c_str(), same, ours.size());
        return;
    }
    const double abs_tol = reference_tolerance(c, refs) * max_abs(ref.logits);
    double gap = 0;
    if (same < ours.size()) gap = double(rows[same][size_t(ours[same])]) - double(rows[same][size_t(ref.greedy[same])]);
    std::printf(
        "[ measured ] %s %s on %s greedy vs %s: %zu of %zu identical; at the first difference our logit gap "
        "between the two tokens is %.3f (allowed %.3f)\n",
        c.folder, dtype_name(c.compute), device.name().c_str(), c.reference, same, ours.size(), gap, 2 * abs_tol);
    EXPECT_LE(gap, 2 * abs_tol) << "the continuation diverges at step " << same << " without a near-tie";
    EXPECT_GE(same, 16u) << "diverged suspiciously early";
}

inline std::string reference_case_name(const ReferenceCase& c) {
    return test_name(std::string(c.folder) + "_" + dtype_name(c.compute));
}

}  // namespace flashport::engine::test
