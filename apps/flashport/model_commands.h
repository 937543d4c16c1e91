// The model commands: `flashport generate`, `perplexity`, `chat` and `tokenize`. Each registers a
// subcommand whose callback does the work (generate.cpp, perplexity.cpp, chat.cpp, tokenize.cpp).
#pragma once

#include <CLI/CLI.hpp>

namespace flashport::app {

void add_generate(CLI::App& app);
void add_perplexity(CLI::App& app);
void add_chat(CLI::App& app);
void add_tokenize(CLI::App& app);

}  // namespace flashport::app
