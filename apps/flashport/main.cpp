// The flashport command line: parses arguments and hands off to the libraries.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "bench_attention.h"
#include "flashport/error.h"
#include "model_commands.h"

int main(int argc, char** argv) {
    CLI::App app{"flashport: memory-efficient attention for CUDA and ROCm/HIP, and the tools around it"};
    app.require_subcommand(1);
    // One line, as for every other error: a script greps "error:", a user sees what to fix.
    // CLI11 quotes what it did not expect, which may be a 100 KB --prompt-ids list: cut to a screenful.
    app.failure_message([](const CLI::App*, const CLI::Error& e) {
        constexpr size_t MAX_SHOWN = 300;
        std::string what = e.what();
        for (char& c : what)
            if (c == '\n' || c == '\r') c = ' ';
        if (what.size() > MAX_SHOWN)
            what = what.substr(0, MAX_SHOWN) + "... (" + std::to_string(what.size() - MAX_SHOWN) + " more bytes)";
        return "error: " + what + " (run with --help for the options)\n";
    });

    CLI::App* bench = app.add_subcommand("bench", "benchmarks");
    bench->require_subcommand(1);
    flashport::app::add_bench_attention(*bench);
    flashport::app::add_bench_engine(*bench);

    flashport::app::add_generate(app);
    flashport::app::add_chat(app);
    flashport::app::add_perplexity(app);
    flashport::app::add_tokenize(app);
    flashport::app::add_serve(app);
    flashport::app::add_port_check(app);
    flashport::app::add_memtrace(app);
    const CLI::App* doctor = flashport::app::add_doctor(app);

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int status = app.exit(e);
        // doctor documents 2 for bad usage, as port-check does; CLI11's own codes are 100 and up.
        return status != 0 && doctor->parsed() ? 2 : status;
    } catch (const flashport::Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
