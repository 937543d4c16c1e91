// `flashport port-check PATH... [--json | --sarif]`: what in C, C++, CUDA, HIP or Python source breaks or
// slows down on ROCm (src/portcheck, docs/port-check.md). Exits 0 clean, 1 on an error-level finding,
// 2 on a bad path.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>

#include "model_commands.h"
#include "portcheck/run.h"

namespace flashport::app {

void add_port_check(CLI::App& app) {
    CLI::App* cmd = app.add_subcommand("port-check", "scan C/C++/CUDA/HIP/Python sources for what breaks on ROCm");
    struct Options {
        std::vector<std::string> paths;
        bool json = false;
        bool sarif = false;
    };
    auto opt = std::make_shared<Options>();
    // Checked in the callback rather than by CLI11 (required(), excludes()), so that every usage error
    // exits with port-check's documented status 2, not CLI11's own codes.
    cmd->add_option("paths", opt->paths, "files, or folders scanned recursively");
    cmd->add_flag("--json", opt->json, "a JSON array of findings");
    cmd->add_flag("--sarif", opt->sarif, "SARIF 2.1.0");
    cmd->callback([opt] {
        if (opt->paths.empty() || (opt->json && opt->sarif)) {
            std::fprintf(
                stderr, "error: port-check: %s (run with --help for the options)\n",
                opt->paths.empty() ? "give at least one file or folder" : "--json and --sarif exclude each other");
            std::exit(portcheck::kExitUsage);
        }
        const portcheck::Format format = opt->sarif  ? portcheck::Format::sarif
                                         : opt->json ? portcheck::Format::json
                                                     : portcheck::Format::text;
        const portcheck::RunResult r = portcheck::run(opt->paths, format);
        std::fwrite(r.output.data(), 1, r.output.size(), stdout);
        if (!r.error.empty()) std::fprintf(stderr, "%s\n", r.error.c_str());
        std::fflush(stdout);
        // The exit status is the result (CI fails on 1); CLI11 has no way to return it from a callback.
        std::exit(r.status);
    });
}

}  // namespace flashport::app
