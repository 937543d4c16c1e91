// The model commands: `flashport generate`, `perplexity`, `chat`, `tokenize` and `bench engine`. Each
// registers a subcommand whose callback does the work (generate.cpp, perplexity.cpp, chat.cpp,
// tokenize.cpp, bench_engine.cpp).
#pragma once

#include <CLI/CLI.hpp>

namespace flashport::app {

void add_generate(CLI::App& app);
void add_perplexity(CLI::App& app);
void add_chat(CLI::App& app);
void add_tokenize(CLI::App& app);
void add_serve(CLI::App& app);  // serve.cpp: the OpenAI-compatible server
void add_port_check(CLI::App& app);  // port_check.cpp: CUDA-only code that breaks on ROCm
void add_memtrace(CLI::App& app);    // memtrace_command.cpp: a FLASHPORT_MEMTRACE log summarised
CLI::App* add_doctor(CLI::App& app);  // doctor.cpp: the machine and build checked for running on its GPUs
// Under `bench`, beside `bench attention`.
void add_bench_engine(CLI::App& bench);

}  // namespace flashport::app
