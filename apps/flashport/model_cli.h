// What the model commands (generate, perplexity, chat, tokenize) share: loading a model folder with
// a progress bar, the optional tokenizer, sampling flags with generation_config.json defaults,
// token-id lists, and the figures line.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "driver_memory.h"
#include "engine/generate.h"
#include "engine/model.h"
#include "engine/model_config.h"
#include "flashport/memory_timeline.h"
#include "flashport/tokenizer.h"
#include "units.h"

namespace flashport::app {

// --model, --device, --dtype, --ctx, --kv-memory, --check-weights.
struct ModelArgs {
    std::string dir;
    std::string device = "cpu";
    std::string dtype;  // empty: the model's own (config.json's dtype)
    int64_t ctx = 0;           // KV-cache capacity in tokens; 0: grows as needed
    double kv_memory_mib = 0;  // KV-cache capacity as a memory budget; 0: none
    int64_t max_step_tokens = 0;  // tokens per forward pass; 0: EngineOptions' default
    bool warm_up = true;          // --no-warm-up: skip EngineOptions::warm_up
    bool check_weights = true;  // --no-check-weights: skip the load-time NaN/Inf scan
    bool map_weights = false;   // --map-weights: CPU weights stay views of the file mappings
    void add(CLI::App& cmd);
};

struct LoadedModel {
    engine::Model model;
    std::unique_ptr<tokenizer::Tokenizer> tokenizer;  // null when the folder has no tokenizer.json
    engine::GenerationConfig generation;
    double load_s = 0;
    // The driver's used memory from just before loading on (the context already created), so a report
    // can give the driver's view of what the run added at its peak. Inert on the CPU.
    std::unique_ptr<DriverMemoryWatch> driver;
};

// Loads the folder. A progress bar goes to stderr when it is a terminal, nothing otherwise.
// watch_driver_peak: on a GPU, poll the driver's used memory from before loading on, for a peak
// figure (generate, bench engine); otherwise only point readings are available.
LoadedModel load_model(const ModelArgs& args, bool watch_driver_peak = false);

// The engine's options from --ctx / --kv-memory (the smaller limit wins): a sized KV cache is
// allocated up front, so a budget the device cannot hold fails before any request.
engine::EngineOptions engine_options(const ModelArgs& args, const engine::Model& model);

// The tokenizer, or an Error saying the folder works with ids only and which flag to use instead.
const tokenizer::Tokenizer& require_tokenizer(const LoadedModel& m, const std::string& instead);

// The folder's own name, "tiny-kjv" for "models/tiny-kjv/": the model's id in serve's API and in titles.
std::string model_name(const std::string& dir);

// --memory-plot FILE.svg|.png (generate, bench engine, serve): the run's memory timeline.
struct MemoryPlotArgs {
    std::string path;
    void add(CLI::App& cmd);
    // Null without the flag; else checks the path's extension (before any long run) and starts recording
    // the CPU and, on a GPU, the model's device.
    std::unique_ptr<MemoryTimeline> start(const ModelArgs& model) const;
};

// Sampling and stop flags. Unset flags take generation_config.json's values (as transformers does).
struct SamplingArgs {
    std::optional<int64_t> max_tokens;
    std::optional<float> temperature, top_p, min_p, repetition_penalty;
    std::optional<int64_t> top_k;
    uint64_t seed = 0;
    bool ignore_eos = false;
    std::vector<std::string> stop;
    void add(CLI::App& cmd);
    engine::GenerateOptions resolve(const LoadedModel& m) const;
};

// "1,2,3", "1 2 3" or "[1, 2, 3]": integers separated by anything that is not part of a number.
std::vector<int32_t> parse_ids(const std::string& text, const std::string& what);
std::string read_file(const std::filesystem::path& path);

// Runs a command body, turning any std::exception into a flashport::Error (main prints those and
// exits non-zero), so a malformed file never ends in std::terminate.
void guarded(const std::function<void()>& body);

}  // namespace flashport::app
