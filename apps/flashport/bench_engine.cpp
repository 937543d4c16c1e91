// `flashport bench engine`: the engine's batched throughput on a model folder (engine.h driven as a
// server drives it). For each --batch size N, N sequences of seeded random prompt ids are prefilled
// together, then decoded greedily, each sequence fed its own argmax (EOS ignored), for --new-tokens
// tokens. Reported per batch size:
//   - TTFT: the time from adding the N prompts to every sequence's first token (the median of --reps
//     runs), and the prompt tokens/s it gives;
//   - decode: tokens/s summed over the sequences, over the decode rounds only (new_tokens - 1 rounds,
//     each one token per sequence: append, then step() with its argmax taken on the model's device,
//     as generate does for greedy decoding), the median and p90 round time, and the median time
//     inside step() (the rest is the host's bookkeeping);
//   - memory: the tracked peak and the KV pool, and on a GPU the driver's peak since before loading.
// With --json one object on stdout; otherwise a table.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/engine.h"
#include "flag_ranges.h"
#include "flashport/checked.h"
#include "flashport/error.h"
#include "flashport/memory.h"
#include "model_cli.h"
#include "model_commands.h"

namespace flashport::app {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchEngineArgs {
    ModelArgs model;
    std::vector<int64_t> batches{1};
    int64_t prompt_len = 512, new_tokens = 128;
    int64_t reps = 1;
    uint64_t seed = 0;
    bool json = false;
    MemoryPlotArgs memory_plot;
};

double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The q-quantile of `v` (nearest rank), for the median and p90 of the round times.
double quantile(std::vector<double> v, double q) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, size_t(q * double(v.size() - 1) + 0.5))];
}

// Checked before the model loads, so a bad request costs nothing.
void validate(const BenchEngineArgs& a) {
    FP_CHECK(!a.batches.empty(), "bench engine: --batch needs at least one batch size");
    for (int64_t b : a.batches) FP_CHECK(b >= 1, "bench engine: --batch sizes must be >= 1, got ", b);
    FP_CHECK(a.prompt_len >= 1, "bench engine: --prompt-len must be >= 1, got ", a.prompt_len);
    FP_CHECK(a.new_tokens >= 1, "bench engine: --new-tokens must be >= 1, got ", a.new_tokens);
    FP_CHECK(a.reps >= 1, "bench engine: --reps must be >= 1, got ", a.reps);
}

// Prompt i is the same for every batch size (one generator, seeded once, drawn in order), so the
// batch sizes run the same work and sequence 0 matches `generate --prompt-ids` on the same ids.
std::vector<std::vector<int32_t>> random_prompts(int64_t n, int64_t len, int64_t vocab, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int32_t> id(0, int32_t(vocab - 1));
    std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(n), std::vector<int32_t>(static_cast<size_t>(len)));
    for (auto& p : prompts)
        for (int32_t& t : p) t = id(rng);
    return prompts;
}

// The KV pool for one batch size. Without --ctx / --kv-memory it is sized to exactly what the batch
// needs and allocated up front, so no round pays for growing it; with them, a pool too small for the
// batch is refused before any work. Either way the pool, and the batch's prompt ids on the host, must
// fit in the memory that is there: checked here for every batch size before the first one runs.
engine::EngineOptions pool_for(const BenchEngineArgs& a, const engine::Model& model, int64_t batch) {
    engine::EngineOptions o = engine_options(a.model, model);
    const int64_t per_seq = (a.prompt_len + a.new_tokens + o.block_size - 1) / o.block_size * o.block_size;
    const int64_t need = checked_mul(batch, per_seq, "bench engine: the KV cache tokens of batch ", batch);
    if (a.model.ctx == 0 && a.model.kv_memory_mib == 0) {
        o.max_cache_tokens = need;
    } else {
        FP_CHECK(o.max_cache_tokens >= need, "bench engine: batch ", batch, " needs ", need, " tokens of KV cache (",
                 batch, " x ", per_seq, " in blocks of ", o.block_size, "), the cache holds ", o.max_cache_tokens,
                 " (--ctx / --kv-memory); raise the limit or leave it out");
    }
    const std::string what = "bench engine at batch " + std::to_string(batch);
    const int64_t per_token = int64_t(model.make_cache().bytes_per_token());
    require_memory(model.device(), checked_mul(o.max_cache_tokens, per_token, what, ": the KV cache bytes"),
                   what + " (a KV cache of " + std::to_string(o.max_cache_tokens) + " tokens)");
    require_memory(Device::cpu(), checked_product({batch, a.prompt_len, int64_t(sizeof(int32_t))}, what),
                   what + " (the prompt ids)");
    return o;
}

// The sequences of one batch as they run: their ids in the engine and the last token each produced.
struct Running {
    std::vector<engine::SeqId> ids;
    std::map<engine::SeqId, int32_t> last;  // the argmax of each sequence's latest logits
    std::vector<int32_t> seq0_generated;    // sequence 0's tokens, for checking against generate
    double step_ms = 0;                     // time inside engine.step() (the rest: appends, bookkeeping)
};

// Steps until no sequence has pending tokens, taking each returned sequence's argmax.
void run_pending(engine::Engine& engine, Running& r) {
    while (engine.has_pending()) {
        const Clock::time_point t0 = Clock::now();
        const std::vector<engine::SeqLogits> outs = engine.step(engine::StepOutput::GREEDY);
        r.step_ms += ms_since(t0);
        for (const engine::SeqLogits& out : outs) {
            const int32_t token = out.token;
            r.last[out.seq] = token;
            if (!r.ids.empty() && out.seq == r.ids[0]) r.seq0_generated.push_back(token);
        }
    }
}

Running prefill(engine::Engine& engine, const std::vector<std::vector<int32_t>>& prompts) {
    Running r;
    for (const auto& p : prompts) r.ids.push_back(engine.add_sequence(p));
    run_pending(engine, r);
    return r;
}

// One decode round: every sequence gets its last token and the engine runs until all have logits
// (one step() unless the batch exceeds the engine's tokens per step).
void decode_round(engine::Engine& engine, Running& r) {
    for (engine::SeqId id : r.ids) engine.append(id, r.last.at(id));
    run_pending(engine, r);
}

void release(engine::Engine& engine, const Running& r) {
    for (engine::SeqId id : r.ids) engine.release(id);
}

// `timeline` (--memory-plot, else null) gets this batch's phases.
nlohmann::json bench_batch(const BenchEngineArgs& a, const LoadedModel& m, int64_t batch, MemoryTimeline* timeline) {
    const std::string b = " b" + std::to_string(batch);
    if (timeline) timeline->phase("warm-up" + b);
    const engine::Model& model = m.model;
    const Device device = model.device();
    m.driver->reset_peak();
    reset_peak(device);
    engine::Engine engine(model, pool_for(a, model, batch));
    const auto prompts = random_prompts(batch, a.prompt_len, model.config().vocab_size, a.seed);

    // Warm-up, untimed: kernels and GEMM algorithms for this batch's shapes load on first use.
    {
        Running w = prefill(engine, prompts);
        for (int i = 0; i < 2 && a.new_tokens > 2; ++i) decode_round(engine, w);
        release(engine, w);
    }

    std::vector<double> ttft_ms;  // adding the prompts -> every sequence's first token
    Running r;
    if (timeline) timeline->phase("prefill" + b);
    for (int64_t rep = 0; rep < a.reps; ++rep) {
        if (rep > 0) release(engine, r);
        const Clock::time_point t0 = Clock::now();
        r = prefill(engine, prompts);
        ttft_ms.push_back(ms_since(t0));
    }
    std::vector<double> round_ms, step_ms;
    if (timeline) timeline->phase("decode" + b);
    const Clock::time_point decode_start = Clock::now();
    for (int64_t t = 1; t < a.new_tokens; ++t) {
        const Clock::time_point t0 = Clock::now();
        r.step_ms = 0;
        decode_round(engine, r);
        round_ms.push_back(ms_since(t0));
        step_ms.push_back(r.step_ms);
    }
    const double decode_s = ms_since(decode_start) / 1e3;
    const double ttft = quantile(ttft_ms, 0.5);
    const int64_t decoded = batch * (a.new_tokens - 1);
    nlohmann::json j = {{"batch", batch},
                        {"ttft_ms", ttft},
                        {"ttft_ms_runs", ttft_ms},
                        {"prefill_tok_s", ttft > 0 ? double(batch * a.prompt_len) / (ttft / 1e3) : 0.0},
                        {"decode_rounds", round_ms.size()},
                        {"decode_s", decode_s},
                        {"decode_tok_s", decode_s > 0 ? double(decoded) / decode_s : 0.0},
                        {"round_ms_median", quantile(round_ms, 0.5)},
                        {"round_ms_p90", quantile(round_ms, 0.9)},
                        // the engine's step() alone (forward pass, logits to the host); the rest of a
                        // round is host work: appends and the argmax over the vocabulary per sequence
                        {"step_ms_median", quantile(step_ms, 0.5)},
                        {"kv_cache_bytes", engine.cache().bytes()},
                        {"kv_capacity_tokens", engine.cache().capacity_tokens()},
                        {"peak_memory_bytes", memory_stats(device).peak_bytes},
                        {"driver_peak_delta_bytes", m.driver->peak_delta()},
                        {"seq0_prompt_ids", prompts[0]},
                        {"seq0_generated_ids", r.seq0_generated}};
    release(engine, r);
    return j;
}

void print_table(const nlohmann::json& report, const LoadedModel& m) {
    std::printf("%s %s on %s: prompt %lld tokens, %lld new tokens, weights %s\n", m.model.config().model_type.c_str(),
                dtype_name(m.model.dtype()), m.model.device().name().c_str(),
                (long long)report.at("prompt_len").get<int64_t>(), (long long)report.at("new_tokens").get<int64_t>(),
                human_bytes(double(m.model.weight_bytes())).c_str());
    std::printf("%6s %12s %14s %14s %16s %12s %12s %14s %16s\n", "batch", "TTFT ms", "prefill tok/s", "decode tok/s",
                "round ms median", "round p90", "in step()", "KV pool", "tracked peak");
    for (const nlohmann::json& r : report.at("runs"))
        std::printf("%6lld %12.1f %14.1f %14.1f %16.2f %12.2f %12.2f %14s %16s\n",
                    (long long)r.at("batch").get<int64_t>(), r.at("ttft_ms").get<double>(),
                    r.at("prefill_tok_s").get<double>(), r.at("decode_tok_s").get<double>(),
                    r.at("round_ms_median").get<double>(), r.at("round_ms_p90").get<double>(),
                    r.at("step_ms_median").get<double>(), human_bytes(r.at("kv_cache_bytes").get<double>()).c_str(),
                    human_bytes(r.at("peak_memory_bytes").get<double>()).c_str());
    if (!m.model.device().is_cpu())
        for (const nlohmann::json& r : report.at("runs"))
            std::printf("batch %lld: driver peak +%s since before loading\n", (long long)r.at("batch").get<int64_t>(),
                        human_bytes(r.at("driver_peak_delta_bytes").get<double>()).c_str());
}

void run(const BenchEngineArgs& a) {
    validate(a);
    const std::unique_ptr<MemoryTimeline> timeline = a.memory_plot.start(a.model);
    if (timeline) timeline->phase("load");
    const LoadedModel m = load_model(a.model, /*watch_driver_peak=*/true);
    const int64_t context = m.model.config().max_position_embeddings;
    FP_CHECK(a.prompt_len + a.new_tokens <= context, "bench engine: --prompt-len ", a.prompt_len, " + --new-tokens ",
             a.new_tokens, " is longer than the model's context (max_position_embeddings = ", context, ")");
    nlohmann::json report = {{"model", m.model.dir().string()},
                             {"model_type", m.model.config().model_type},
                             {"dtype", dtype_name(m.model.dtype())},
                             {"device", m.model.device().name()},
                             {"weight_bytes", m.model.weight_bytes()},
                             {"prompt_len", a.prompt_len},
                             {"new_tokens", a.new_tokens},
                             {"reps", a.reps},
                             {"seed", a.seed},
                             {"load_s", m.load_s},
                             {"runs", nlohmann::json::array()}};
    for (int64_t batch : a.batches) (void)pool_for(a, m.model, batch);  // refuse what cannot fit before any run
    for (int64_t batch : a.batches) report["runs"].push_back(bench_batch(a, m, batch, timeline.get()));
    if (timeline)
        timeline->write(a.memory_plot.path, "flashport bench engine: " + model_name(a.model.dir) + ", " +
                                                dtype_name(m.model.dtype()) + " on " + m.model.device().name() +
                                                ", prompt " + std::to_string(a.prompt_len) + " tokens");
    if (a.json) {
        std::cout << report.dump() << std::endl;
        return;
    }
    print_table(report, m);
}

}  // namespace

void add_bench_engine(CLI::App& bench) {
    auto a = std::make_shared<BenchEngineArgs>();
    CLI::App* cmd =
        bench.add_subcommand("engine", "the engine's batched prefill and decode throughput on a model folder");
    a->model.add(*cmd);
    cmd->add_option("--batch", a->batches,
                    "concurrent sequences, comma-separated for several runs (e.g. 1,8,32); the KV pool is "
                    "sized to each batch unless --ctx / --kv-memory is given")
        ->delimiter(',')
        ->check(integer_range(1, INT32_LIMIT))
        ->capture_default_str();
    cmd->add_option("--prompt-len", a->prompt_len, "random prompt tokens per sequence")
        ->check(integer_range(1, INT32_LIMIT))
        ->capture_default_str();
    cmd->add_option("--new-tokens", a->new_tokens, "tokens generated per sequence (the first comes from the prefill)")
        ->check(integer_range(1, INT32_LIMIT))
        ->capture_default_str();
    cmd->add_option("--reps", a->reps, "prefill repetitions (the median is reported; decode runs once)")
        ->check(integer_range(1, 1000000))
        ->capture_default_str();
    cmd->add_option("--seed", a->seed, "seed of the random prompt ids")->check(seed_range())->capture_default_str();
    cmd->add_flag("--json", a->json, "print one JSON object with every batch size's figures");
    a->memory_plot.add(*cmd);
    cmd->callback([a] { guarded([&] { run(*a); }); });
}

}  // namespace flashport::app
