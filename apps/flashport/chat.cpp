// `flashport chat`: an interactive chat that keeps its history. Each stdin line is a user turn; the
// reply streams to stdout. `/exit` (or end of input) quits, `/reset` forgets the history. Works the
// same with stdin a pipe, for scripts and tests; the "> " prompt is shown only on a terminal.
//
// Each turn renders the whole history with the chat template, and the Session re-uses the KV cache
// of the prefix it shares with the previous turn, so a turn prefills only the new text. A history that
// outgrows the context loses its oldest exchanges (the system message stays); a message too long to
// fit even alone is refused. Either is said on stderr in one line, and the conversation goes on.
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

// The prompt for `history`, whose last message is the new user turn, in at most `limit` tokens:
// drops the oldest user/assistant exchanges after the first `keep` messages (the system message)
// until it fits. Empty when the new turn does not fit even alone; then `history` loses that turn.
std::vector<int32_t> fit_history(std::vector<tokenizer::ChatMessage>& history, size_t keep, int64_t limit,
                                 const tokenizer::Tokenizer& tok, const tokenizer::ChatOptions& options) {
    size_t dropped = 0;
    for (;;) {
        std::vector<int32_t> prompt = tokenizer::encode_chat(tok, history, options);
        if (int64_t(prompt.size()) <= limit) {
            if (dropped)
                std::fprintf(stderr,
                             "chat: the conversation outgrew the context (%lld tokens for the prompt): forgot "
                             "the oldest %zu exchange(s)\n",
                             (long long)limit, dropped);
            return prompt;
        }
        if (history.size() < keep + 3) {  // nothing left to forget but the new turn
            std::fprintf(stderr,
                         "chat: this message needs a %zu-token prompt, more than the %lld the context "
                         "leaves; it was not sent (shorten it, or /reset)\n",
                         prompt.size(), (long long)limit);
            history.pop_back();
            return {};
        }
        history.erase(history.begin() + std::ptrdiff_t(keep), history.begin() + std::ptrdiff_t(keep + 2));
        ++dropped;
    }
}

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
        const std::vector<int32_t> prompt = fit_history(history, a.system.empty() ? 0 : 1,
                                                        engine::max_prompt_tokens(engine, options), tok, chat_options);
        if (prompt.empty()) continue;
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
