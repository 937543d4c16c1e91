// `flashport chat`: an interactive chat that keeps its history. Each stdin line is a user turn; the
// reply streams to stdout. `/exit` (or end of input) quits, `/reset` forgets the history. Works the
// same with stdin a pipe, for scripts and tests; the "> " prompt is shown only on a terminal.
//
// Each turn renders the whole history with the chat template, and the Session re-uses the KV cache
// of the prefix it shares with the previous turn, so a turn prefills only the new text.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>

#include "engine/engine.h"
#include "engine/generate.h"
#include "flashport/error.h"
#include "model_cli.h"
#include "model_commands.h"

namespace flashport::app {
namespace {

struct ChatArgs {
    ModelArgs model;
    SamplingArgs sampling;
    std::string system;
    bool no_thinking = false, stats = false;
};

void run(const ChatArgs& a) {
    const LoadedModel m = load_model(a.model);
    const tokenizer::Tokenizer& tok = require_tokenizer(m, "");
    engine::GenerateOptions options = a.sampling.resolve(m);
    if (auto im_end = tok.token_to_id("<|im_end|>")) options.stop.eos_ids.push_back(*im_end);
    tokenizer::ChatOptions chat_options;
    if (a.no_thinking) chat_options.enable_thinking = false;

    engine::Engine engine(m.model, engine_options(a.model, m.model));
    engine::Session session(engine, &tok);
    std::vector<tokenizer::ChatMessage> history;
    if (!a.system.empty()) history.push_back({"system", a.system, std::nullopt});
    const bool interactive = isatty(STDIN_FILENO) != 0;
    std::string line;
    for (;;) {
        if (interactive) {
            std::fprintf(stderr, "> ");
            std::fflush(stderr);
        }
        if (!std::getline(std::cin, line) || line == "/exit") break;
        if (line == "/reset") {
            history.resize(a.system.empty() ? 0 : 1);
            session.reset();
            continue;
        }
        if (line.empty()) continue;
        history.push_back({"user", line, std::nullopt});
        const std::vector<int32_t> prompt = tokenizer::encode_chat(tok, history, chat_options);
        const engine::GenerateResult r = session.generate(prompt, options, [](int32_t, std::string_view text) {
            std::fwrite(text.data(), 1, text.size(), stdout);
            std::fflush(stdout);
        });
        std::printf("\n");
        std::fflush(stdout);
        history.push_back({"assistant", r.text, std::nullopt});
        if (a.stats)
            std::fprintf(stderr,
                         "[prompt %lld tokens, %lld cached | %lld generated | TTFT %.1f ms | decode %.1f tok/s]\n",
                         (long long)r.stats.prompt_tokens, (long long)r.stats.cached_tokens,
                         (long long)r.stats.generated_tokens, r.stats.ttft_s * 1e3, r.stats.decode_tok_s);
    }
}

}  // namespace

void add_chat(CLI::App& app) {
    auto a = std::make_shared<ChatArgs>();
    CLI::App* cmd = app.add_subcommand("chat", "interactive chat with history (stdin lines; /exit, /reset)");
    a->model.add(*cmd);
    cmd->add_option("--system", a->system, "a system message");
    cmd->add_flag("--no-thinking", a->no_thinking, "Qwen3: turn thinking off");
    cmd->add_flag("--stats", a->stats, "print each turn's figures to stderr");
    a->sampling.add(*cmd);
    cmd->callback([a] { guarded([&] { run(*a); }); });
}

}  // namespace flashport::app
