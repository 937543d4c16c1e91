// `flashport tokenize`: the token ids of stdin (no special tokens added). The folder needs only
// tokenizer.json (tokenizer_config.json is read when present); no weights are loaded.
#include <iostream>
#include <memory>

#include "flashport/tokenizer.h"
#include "model_cli.h"
#include "model_commands.h"

namespace flashport::app {

void add_tokenize(CLI::App& app) {
    struct Args {
        std::string dir;
        bool json = false;
    };
    auto a = std::make_shared<Args>();
    CLI::App* cmd = app.add_subcommand("tokenize", "print the token ids of the text on stdin");
    cmd->add_option("--model", a->dir, "folder holding tokenizer.json")->required();
    cmd->add_flag("--json", a->json, "print a JSON array of ids instead of space-separated ids");
    cmd->callback([a] {
        guarded([&] {
            const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_dir(a->dir);
            tokenizer::TokenizeOptions options;
            options.json = a->json;
            tokenizer::tokenize_stream(tok, std::cin, std::cout, options);
        });
    });
}

}  // namespace flashport::app
