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
    cmd->add_option("paths", opt->paths, "files, or folders scanned recursively")->required();
    CLI::Option* json = cmd->add_flag("--json", opt->json, "a JSON array of findings");
    cmd->add_flag("--sarif", opt->sarif, "SARIF 2.1.0")->excludes(json);
    cmd->callback([opt] {
        const portcheck::Format format =
            opt->sarif ? portcheck::Format::sarif : opt->json ? portcheck::Format::json : portcheck::Format::text;
        const portcheck::RunResult r = portcheck::run(opt->paths, format);
        std::fwrite(r.output.data(), 1, r.output.size(), stdout);
        if (!r.error.empty()) std::fprintf(stderr, "%s\n", r.error.c_str());
        std::fflush(stdout);
        // The exit status is the result (CI fails on 1); CLI11 has no way to return it from a callback.
        std::exit(r.status);
    });
}

}  // namespace flashport::app
