// `flashport memtrace FILE [--json] [--top N]`: a FLASHPORT_MEMTRACE log summarised (memtrace.h).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>

#include "flag_ranges.h"
#include "flashport/memtrace.h"
#include "model_cli.h"
#include "model_commands.h"

namespace flashport::app {

void add_memtrace(CLI::App& app) {
    struct Options {
        std::string path;
        bool json = false;
        int64_t top = 10;
    };
    auto o = std::make_shared<Options>();
    CLI::App* cmd = app.add_subcommand(
        "memtrace", "summarise a FLASHPORT_MEMTRACE log: peak by call site, what was live at the peak, leaks");
    cmd->add_option("file", o->path, "the log (run any command with FLASHPORT_MEMTRACE=FILE to write one)")->required();
    cmd->add_flag("--json", o->json, "one JSON object with every call site");
    cmd->add_option("--top", o->top, "call sites listed per table")
        ->check(integer_range(1, 1000000))
        ->capture_default_str();
    cmd->callback([o] {
        guarded([&] {
            const MemtraceSummary s = summarise_memtrace(o->path);
            if (o->json)
                std::cout << memtrace_json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
            else
                std::cout << memtrace_report(s, o->path, size_t(o->top));
        });
    });
}

}  // namespace flashport::app
