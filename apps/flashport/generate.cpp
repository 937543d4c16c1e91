// `flashport generate`: one prompt in, streamed text out, then the figures (prompt tokens, TTFT,
// prefill and decode tok/s, peak memory), or with --json one object holding text, ids and figures.
//
// Human output: the text on stdout as it is produced (token ids, space-separated, for a folder
// without a tokenizer), the figures on stderr, so `generate ... > out.txt` keeps just the text.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "engine/generate.h"
#include "flashport/error.h"
#include "model_cli.h"
#include "model_commands.h"

namespace flashport::app {
namespace {

struct GenerateArgs {
    ModelArgs model;
    SamplingArgs sampling;
    std::string prompt, prompt_ids, system;
    bool chat = false, no_thinking = false, json = false;
    MemoryPlotArgs memory_plot;
};

std::vector<int32_t> prompt_tokens(const GenerateArgs& a, const LoadedModel& m) {
    if (!a.prompt_ids.empty()) {
        FP_CHECK(!a.chat, "--chat formats text: use --prompt with it, not --prompt-ids");
        return parse_ids(a.prompt_ids, "--prompt-ids");
    }
    const tokenizer::Tokenizer& tok = require_tokenizer(m, "--prompt-ids 1,2,3");
    if (!a.chat) {
        FP_CHECK(a.system.empty(), "--system needs --chat");
        return tok.encode(a.prompt);
    }
    std::vector<tokenizer::ChatMessage> messages;
    if (!a.system.empty()) messages.push_back({"system", a.system, std::nullopt});
    messages.push_back({"user", a.prompt, std::nullopt});
    tokenizer::ChatOptions options;
    if (a.no_thinking) options.enable_thinking = false;
    return tokenizer::encode_chat(tok, messages, options);
}

// Where the memory went: on the CPU the tracked peak (KV cache, activations and the weights' copies:
// all of them, or with --map-weights the stacked [q; k; v] and [gate; up] only, the rest mapped from
// the files); on a GPU the tracked peak broken down, and the driver's view: its peak since before
// loading (what the memory bound is about) and what is still in use at the end.
std::string memory_summary(const engine::GenerateStats& s, const LoadedModel& m) {
    const engine::Model& model = m.model;
    if (model.device().is_cpu()) {
        const bool mapped = model.mapped_weight_bytes() > 0;
        return "peak memory " + human_bytes(double(s.peak_bytes)) + " tracked (KV cache " +
               human_bytes(double(s.kv_cache_bytes)) + ", activations, " +
               (mapped ? "the stacked q/k/v and gate/up weights); weights " +
                             human_bytes(double(model.weight_bytes())) + " in all, " +
                             human_bytes(double(model.mapped_weight_bytes())) + " of them mapped from the files"
                       : "the weights, " + human_bytes(double(model.weight_bytes())) + ")");
    }
    const double rest = double(s.peak_bytes) - double(model.weight_bytes()) - double(s.kv_cache_bytes);
    return "peak memory on " + model.device().name() + " " + human_bytes(double(s.peak_bytes)) + " tracked (weights " +
           human_bytes(double(model.weight_bytes())) + ", KV cache " + human_bytes(double(s.kv_cache_bytes)) +
           ", activations + workspace " + human_bytes(std::max(0.0, rest)) + "); driver: peak +" +
           human_bytes(double(m.driver->peak_delta())) + " since before loading, +" +
           human_bytes(double(m.driver->now_delta())) + " at the end";
}

nlohmann::json figures_json(const engine::GenerateStats& s, const LoadedModel& m) {
    return {{"prompt_tokens", s.prompt_tokens},
            {"generated_tokens", s.generated_tokens},
            {"ttft_ms", s.ttft_s * 1e3},
            {"prefill_tok_s", s.prefill_tok_s},
            {"decode_tok_s", s.decode_tok_s},
            {"peak_memory_bytes", s.peak_bytes},
            {"kv_cache_bytes", s.kv_cache_bytes},
            {"weight_bytes", m.model.weight_bytes()},
            {"device", m.model.device().name()},
            {"driver_used_delta_bytes", m.driver->now_delta()},   // GPU: in use at the end, minus before loading
            {"driver_peak_delta_bytes", m.driver->peak_delta()},  // GPU: the peak since before loading, minus that
            {"load_s", m.load_s}};
}

// One request whose length is known before the engine is built. Unless --ctx or --kv-memory size the
// KV cache, the pool starts with room for the prompt and up to REPLY_RESERVE tokens of the reply
// (max_tokens may be far more than a reply that ends at EOS); it still grows past that. A pool that
// starts empty doubles inside the timed prefill, copying itself layer by layer (twice for a 4096-token
// prompt on Qwen2.5-7B, ending at twice the bytes the run needs). And the GPU warm-up runs a prompt of
// this one's length (up to one step), so the request meets no new GEMM shape and no buffer growth: its
// one-time costs are paid at load.
constexpr int64_t REPLY_RESERVE = 1024;

engine::EngineOptions request_engine_options(const ModelArgs& args, const engine::Model& model, int64_t prompt_len,
                                             const engine::GenerateOptions& options) {
    engine::EngineOptions o = engine_options(args, model);
    const int64_t context = model.config().max_position_embeddings, max_new = options.stop.max_new_tokens;
    if (o.max_cache_tokens == 0 && prompt_len < context)
        o.initial_cache_tokens =
            std::min(context, prompt_len + (max_new == 0 ? REPLY_RESERVE : std::min(max_new, REPLY_RESERVE)));
    o.warm_up_tokens = prompt_len;
    return o;
}

void run(const GenerateArgs& a) {
    FP_CHECK(a.prompt.empty() != a.prompt_ids.empty(), "give exactly one of --prompt and --prompt-ids");
    const std::unique_ptr<MemoryTimeline> timeline = a.memory_plot.start(a.model);
    if (timeline) timeline->phase("load");
    const LoadedModel m = load_model(a.model, /*watch_driver_peak=*/true);
    engine::GenerateOptions options = a.sampling.resolve(m);
    const std::vector<int32_t> prompt = prompt_tokens(a, m);
    if (a.chat && m.tokenizer) {  // the turn ends with <|im_end|> even if generation_config omits it
        if (auto im_end = m.tokenizer->token_to_id("<|im_end|>")) options.stop.eos_ids.push_back(*im_end);
    }

    if (timeline) timeline->phase("engine");  // the KV cache and the warm-up pass
    engine::Engine engine(m.model, request_engine_options(a.model, m.model, int64_t(prompt.size()), options));
    const bool ids_only = !m.tokenizer;
    const char* sep = "";
    if (timeline) timeline->phase("prefill");
    bool decoding = false;
    const engine::GenerateResult r =
        engine::generate(engine, m.tokenizer.get(), prompt, options, [&](int32_t token, std::string_view text) {
            if (timeline && token >= 0 && !decoding) timeline->phase("decode");  // the first token ends prefill
            decoding = decoding || token >= 0;
            if (a.json) return;
            if (ids_only) {
                if (token < 0) return;
                std::printf("%s%d", sep, token);
                sep = " ";
            } else {
                std::fwrite(text.data(), 1, text.size(), stdout);
            }
            std::fflush(stdout);
        });

    const engine::GenerateStats& s = r.stats;
    if (timeline)
        timeline->write(a.memory_plot.path, "flashport generate: " + model_name(a.model.dir) + ", " +
                                                dtype_name(m.model.dtype()) + " on " + m.model.device().name() +
                                                ", prompt " + std::to_string(s.prompt_tokens) + " tokens");
    if (a.json) {
        nlohmann::json j = {{"model", m.model.dir().string()},
                            {"dtype", dtype_name(m.model.dtype())},
                            {"text", r.text},
                            {"prompt_ids", r.prompt_ids},
                            {"generated_ids", r.generated_ids},
                            {"stop_reason", engine::stop_reason_name(r.reason)},
                            {"figures", figures_json(s, m)}};
        std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
        return;
    }
    std::printf("\n");
    std::fflush(stdout);
    std::fprintf(stderr,
                 "\n[%s, %s] prompt %lld tokens | generated %lld (%s) | TTFT %.1f ms | prefill %.1f tok/s | "
                 "decode %.1f tok/s | %s\n",
                 m.model.config().model_type.c_str(), dtype_name(m.model.dtype()), (long long)s.prompt_tokens,
                 (long long)s.generated_tokens, engine::stop_reason_name(r.reason), s.ttft_s * 1e3, s.prefill_tok_s,
                 s.decode_tok_s, memory_summary(s, m).c_str());
}

}  // namespace

void add_generate(CLI::App& app) {
    auto a = std::make_shared<GenerateArgs>();
    CLI::App* cmd = app.add_subcommand("generate", "generate text from a prompt with a Qwen2/Qwen3 model folder");
    a->model.add(*cmd);
    cmd->add_option("--prompt", a->prompt, "the prompt text");
    cmd->add_option("--prompt-ids", a->prompt_ids, "the prompt as token ids, e.g. 1,2,3 (folders without a tokenizer)");
    cmd->add_flag("--chat", a->chat, "format the prompt as a chat turn with the model's template (ChatML)");
    cmd->add_option("--system", a->system, "a system message (with --chat)");
    cmd->add_flag("--no-thinking", a->no_thinking, "Qwen3: turn thinking off (an empty <think> block)");
    a->sampling.add(*cmd);
    cmd->add_flag("--json", a->json, "print one JSON object: text, prompt and generated ids, figures");
    a->memory_plot.add(*cmd);
    cmd->callback([a] { guarded([&] { run(*a); }); });
}

}  // namespace flashport::app
