// `flashport perplexity`: scores a text teacher-forced (see engine/perplexity.h) and prints the
// perplexity; with --json also the per-position top-1 id and log-probabilities, which the
// agreement tests compare with transformers.
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "engine/perplexity.h"
#include "flag_ranges.h"
#include "flashport/error.h"
#include "model_cli.h"
#include "model_commands.h"

namespace flashport::app {
namespace {

struct PerplexityArgs {
    ModelArgs model;
    std::string file, ids_file;
    int64_t window = 0;
    bool json = false;
};

void run(const PerplexityArgs& a) {
    FP_CHECK(a.file.empty() != a.ids_file.empty(), "give exactly one of --file and --ids-file");
    const LoadedModel m = load_model(a.model);
    std::vector<int32_t> ids;
    if (!a.ids_file.empty()) {
        ids = parse_ids(read_file(a.ids_file), a.ids_file);
    } else {
        ids = require_tokenizer(m, "--ids-file with token ids").encode(read_file(a.file));
    }
    engine::Engine engine(m.model, engine_options(a.model, m.model));
    engine::PerplexityOptions options;
    options.window = a.window;
    const engine::PerplexityResult r = engine::perplexity(engine, ids, options);
    if (a.json) {
        const nlohmann::json j = {{"model", m.model.dir().string()},
                                  {"dtype", dtype_name(m.model.dtype())},
                                  {"tokens", ids.size()},
                                  {"scored", r.scored},
                                  {"perplexity", r.perplexity},
                                  {"mean_nll", r.mean_nll},
                                  {"tok_s", r.tok_s},
                                  {"targets", r.targets},
                                  {"target_logprobs", r.target_logprobs},
                                  {"top1_ids", r.top1_ids},
                                  {"top1_logprobs", r.top1_logprobs}};
        std::cout << j.dump() << std::endl;
        return;
    }
    std::printf("perplexity %.4f over %lld scored tokens (mean NLL %.4f nats; %zu tokens, %.1f tok/s)\n", r.perplexity,
                (long long)r.scored, r.mean_nll, ids.size(), r.tok_s);
}

}  // namespace

void add_perplexity(CLI::App& app) {
    auto a = std::make_shared<PerplexityArgs>();
    CLI::App* cmd = app.add_subcommand("perplexity", "score a text teacher-forced: perplexity and per-token log-probs");
    a->model.add(*cmd);
    cmd->add_option("--file", a->file, "the text file to score");
    cmd->add_option("--ids-file", a->ids_file, "token ids to score instead (1,2,3 or a JSON array)");
    cmd->add_option("--window", a->window, "tokens per independently scored window (default: the model's context)")
        ->check(integer_range(0, INT64_LIMIT));
    cmd->add_flag("--json", a->json, "one JSON object with per-position top-1 ids and log-probabilities");
    cmd->callback([a] { guarded([&] { run(*a); }); });
}

}  // namespace flashport::app
