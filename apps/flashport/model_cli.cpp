// Shared pieces of the model commands (see model_cli.h).
#include "model_cli.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "flag_ranges.h"
#include "flashport/error.h"
#include "flashport/ops.h"

namespace flashport::app {
namespace {

// Beyond these the KV pool could not be indexed (2^31 blocks of 16) or held by any machine; within
// them, the pool is checked against the memory that is really there when it is made.
constexpr int64_t MAX_CTX_TOKENS = int64_t(1) << 34;
constexpr double MAX_KV_MEMORY_MIB = 1e9;
// A step's activations grow ~160 KB a token for a 7B model: beyond this a step could not fit anywhere.
constexpr int64_t MAX_STEP_TOKENS = int64_t(1) << 20;

}  // namespace

void ModelArgs::add(CLI::App& cmd) {
    cmd.add_option("--model", dir, "Hugging Face model folder (config.json, *.safetensors, tokenizer.json)")
        ->required();
    cmd.add_option("--device", device, "where to run: cpu, gpu or gpu:N (a GPU build; bf16/fp16 compute there)");
    cmd.add_option("--dtype", dtype, "compute dtype (fp32, bf16, fp16); default: the model's own");
    cmd.add_option("--ctx", ctx, "KV-cache capacity in tokens, allocated up front (default: grows as needed)")
        ->check(integer_range(0, MAX_CTX_TOKENS));
    cmd.add_option("--kv-memory", kv_memory_mib, "KV-cache capacity as a memory budget in MiB, allocated up front")
        ->check(real_range(0, MAX_KV_MEMORY_MIB));
    cmd.add_option("--max-step-tokens", max_step_tokens,
                   "tokens per forward pass; longer prompts are prefilled in chunks (default 2048, serve 512)")
        ->check(integer_range(1, MAX_STEP_TOKENS));
    cmd.add_flag("--warm-up,!--no-warm-up", warm_up,
                 "GPU: run one full step and one decode step at load, so the first request pays no one-time costs");
    cmd.add_flag("--check-weights,!--no-check-weights", check_weights,
                 "scan the weights for NaN/Inf while loading (default: on; the load reads every byte anyway)");
    cmd.add_flag("--map-weights", map_weights,
                 "CPU: run on the weight files' memory mappings instead of copies (faster load, page cache shared "
                 "between processes; slower decode where the kernel reclaims or scans file pages)");
}

engine::EngineOptions engine_options(const ModelArgs& args, const engine::Model& model) {
    engine::EngineOptions o;
    int64_t tokens = args.ctx;
    if (args.kv_memory_mib > 0) {
        const size_t per_token = model.make_cache().bytes_per_token();
        const auto budget = int64_t(args.kv_memory_mib * 1048576.0 / double(per_token));
        FP_CHECK(budget >= o.block_size, "--kv-memory ", args.kv_memory_mib, " MiB holds ", budget, " tokens at ",
                 per_token, " bytes per token; at least one block of ", o.block_size, " is needed");
        tokens = tokens > 0 ? std::min(tokens, budget) : budget;
    }
    o.max_cache_tokens = tokens;
    if (args.max_step_tokens > 0) o.max_step_tokens = args.max_step_tokens;
    o.warm_up = args.warm_up;
    return o;
}

namespace {

// CPU: one small prefill (the BLAS path) and one decode step (GEMV, paged attention) before anything
// is timed: the first BLAS call loads OpenBLAS and starts its threads (~50 ms), which would otherwise
// be charged to the first token. A GPU engine warms itself up when it is built (EngineOptions::warm_up,
// on the command's own engine and at its own step size); a second engine here would only add a
// transient KV cache and activations to the run's memory peak.
void warm_up(const engine::Model& model) try {
    if (!model.device().is_cpu()) return;
    engine::Engine engine(model);
    const std::vector<int32_t> ids(size_t(std::min<int64_t>(GEMV_MAX_TOKENS + 1, engine.context())), 0);
    const engine::SeqId seq = engine.add_sequence(ids);
    engine.step();
    if (engine.context() > int64_t(ids.size())) {
        engine.append(seq, 0);
        engine.step();
    }
    engine.release(seq);
} catch (const Error&) {
    // Untimed set-up only: a model that fails here (NaN weights loaded with --no-check-weights) fails
    // the same way on the real request, whose message names the user's own positions.
}

}  // namespace

LoadedModel load_model(const ModelArgs& args, bool watch_driver_peak) {
    const Device device = parse_device(args.device);
    const auto start = std::chrono::steady_clock::now();
    engine::ModelOptions options;
    options.device = device;
    options.check_weights = args.check_weights;
    options.map_weights = args.map_weights;
    if (!args.dtype.empty()) options.dtype = parse_dtype(args.dtype);
    // A bar on a terminal only: piped output (tests, scripts) stays clean.
    const bool bar = isatty(STDERR_FILENO) != 0;
    int shown = -1;
    if (bar) {
        options.on_progress = [&shown](size_t done, size_t total) {
            const int pct = total ? int(done * 100 / total) : 100;
            if (pct == shown) return;
            shown = pct;
            const int width = 30, filled = pct * width / 100;
            std::fprintf(stderr, "\rloading [%s%s] %3d%% %s / %s", std::string(size_t(filled), '#').c_str(),
                         std::string(size_t(width - filled), ' ').c_str(), pct, human_bytes(double(done)).c_str(),
                         human_bytes(double(total)).c_str());
            std::fflush(stderr);
        };
    }
    auto driver = std::make_unique<DriverMemoryWatch>(device, watch_driver_peak);
    LoadedModel m{engine::Model::load(args.dir, options), nullptr, {}, 0, std::move(driver)};
    if (bar) std::fprintf(stderr, "\r\033[K");
    warm_up(m.model);
    if (std::filesystem::is_regular_file(std::filesystem::path(args.dir) / "tokenizer.json"))
        m.tokenizer = std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::from_dir(args.dir));
    m.generation = engine::load_generation_config(args.dir, m.model.config());
    m.load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return m;
}

const tokenizer::Tokenizer& require_tokenizer(const LoadedModel& m, const std::string& instead) {
    FP_CHECK(m.tokenizer, m.model.dir().string(), " has no tokenizer.json, so it works with token ids only",
             instead.empty() ? std::string() : ": use " + instead);
    return *m.tokenizer;
}

void SamplingArgs::add(CLI::App& cmd) {
    // Generation stops at the model's context anyway, so --max-tokens only needs a bound that keeps
    // the arithmetic on it far from overflow.
    cmd.add_option("--max-tokens", max_tokens,
                   "tokens to generate at most (default: generation_config's "
                   "max_new_tokens, else 256)")
        ->check(integer_range(1, INT32_LIMIT));
    cmd.add_option("--temperature", temperature, "0: greedy; > 0: sample (default: generation_config.json)")
        ->check(real_range(0, 100));
    cmd.add_option("--top-k", top_k, "keep the k most likely tokens (0: off)")->check(integer_range(0, INT32_LIMIT));
    cmd.add_option("--top-p", top_p, "nucleus sampling: keep the smallest set with probability >= p")
        ->check(real_range(0, 1));
    cmd.add_option("--min-p", min_p, "drop tokens with p < min_p * p_max")->check(real_range(0, 1));
    cmd.add_option("--repetition-penalty", repetition_penalty, "penalise tokens already in the context (1: off)")
        ->check(real_range(0, 100, /*lo_open=*/true));
    cmd.add_option("--seed", seed, "random seed (same seed, same tokens)")->check(seed_range());
    cmd.add_flag("--ignore-eos", ignore_eos, "run to --max-tokens whatever the model says (benchmarks)");
    cmd.add_option("--stop", stop, "stop when this text appears (repeatable); it is not printed");
}

engine::GenerateOptions SamplingArgs::resolve(const LoadedModel& m) const {
    const engine::GenerationConfig& g = m.generation;
    engine::GenerateOptions o;
    engine::SamplingParams& s = o.sampling;
    s.do_sample = g.do_sample.value_or(false);  // transformers' default is greedy
    s.temperature = float(g.temperature.value_or(1.0));
    s.top_k = g.top_k.value_or(50);  // transformers' GenerationConfig default
    s.top_p = float(g.top_p.value_or(1.0));
    s.min_p = float(g.min_p.value_or(0.0));
    s.repetition_penalty = float(g.repetition_penalty.value_or(1.0));
    if (temperature) {  // an explicit temperature decides: 0 greedy, > 0 sampling
        s.temperature = *temperature;
        s.do_sample = *temperature > 0.0f;
    }
    if (top_k) s.top_k = *top_k;
    if (top_p) s.top_p = *top_p;
    if (min_p) s.min_p = *min_p;
    if (repetition_penalty) s.repetition_penalty = *repetition_penalty;
    s.seed = seed;
    engine::validate(s);

    for (int64_t id : g.eos_token_ids) o.stop.eos_ids.push_back(int32_t(id));
    o.stop.stop_strings = stop;
    o.stop.ignore_eos = ignore_eos;
    o.stop.max_new_tokens = max_tokens ? *max_tokens : g.max_new_tokens.value_or(256);
    FP_CHECK(o.stop.max_new_tokens >= 1, "--max-tokens must be >= 1, got ", o.stop.max_new_tokens);
    return o;
}

std::vector<int32_t> parse_ids(const std::string& text, const std::string& what) {
    std::vector<int32_t> ids;
    size_t i = 0;
    while (i < text.size()) {
        const char c = text[i];
        if (std::isdigit(static_cast<unsigned char>(c)) || c == '-') {
            size_t end = i + 1;
            while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
            const std::string num = text.substr(i, end - i);
            FP_CHECK(num != "-" && num.size() <= 11, what, ": '", num, "' is not a token id");
            const long long v = std::stoll(num);
            FP_CHECK(v >= INT32_MIN && v <= INT32_MAX, what, ": token id ", num, " is out of range");
            ids.push_back(int32_t(v));
            i = end;
        } else {
            FP_CHECK(c == ',' || c == '[' || c == ']' || std::isspace(static_cast<unsigned char>(c)), what,
                     ": unexpected character '", c, "' at offset ", i, " (expected ids like 1,2,3)");
            ++i;
        }
    }
    FP_CHECK(!ids.empty(), what, ": no token ids");
    return ids;
}

std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    FP_CHECK(in, path.string(), ": cannot open");
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

std::string model_name(const std::string& dir) {
    std::filesystem::path p(dir);
    if (p.filename().empty()) p = p.parent_path();  // "models/tiny-kjv/"
    return p.filename().empty() ? dir : p.filename().string();
}

void MemoryPlotArgs::add(CLI::App& cmd) {
    cmd.add_option("--memory-plot", path,
                   "write the run's memory over time (tracked live bytes, the driver's or the OS's figure, "
                   "phases) to FILE.svg or FILE.png");
}

std::unique_ptr<MemoryTimeline> MemoryPlotArgs::start(const ModelArgs& model) const {
    if (path.empty()) return nullptr;
    check_plot_path(path);
    std::vector<Device> devices{Device::cpu()};
    if (const Device d = parse_device(model.device); !d.is_cpu()) devices.push_back(d);
    return std::make_unique<MemoryTimeline>(devices);
}

void guarded(const std::function<void()>& body) {
    try {
        body();
    } catch (const Error&) {
        throw;
    } catch (const std::exception& e) {
        throw Error(e.what());
    }
}

}  // namespace flashport::app
