// `flashport doctor [--json] [--root DIR] [--model DIR [--ctx N]]`: the porting checklist as checks of
// this machine and build (src/doctor, docs/doctor.md). Exits 0 when no check fails, 1 when one does or
// the model folder is bad, 2 on bad usage, as port-check does.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "doctor/doctor.h"
#include "flag_ranges.h"
#include "model_commands.h"

namespace flashport::app {
namespace {

constexpr int EXIT_USAGE = 2;

[[noreturn]] void usage_error(const std::string& why) {
    std::fprintf(stderr, "error: doctor: %s (run with --help for the options)\n", why.c_str());
    std::exit(EXIT_USAGE);
}

}  // namespace

CLI::App* add_doctor(CLI::App& app) {
    CLI::App* cmd = app.add_subcommand("doctor",
                                       "check this machine and build: GPU, driver, ROCm, container, NCCL, "
                                       "CPU, and whether a model fits");
    struct Options {
        bool json = false;
        std::string root = "/";
        std::string model;
        std::string ctx;
    };
    auto opt = std::make_shared<Options>();
    // Values are checked in the callback rather than by CLI11, so that usage errors exit with status 2
    // (CLI11's own codes are 100 and up; main maps the parse errors it catches for doctor to 2 too).
    cmd->add_flag("--json", opt->json, "one JSON object: {checks: [{id, group, status, found, fix}], ok, warn, fail}");
    cmd->add_option("--root", opt->root, "read /proc, /sys, /dev and /etc under DIR (a fake machine, for tests)");
    cmd->add_option("--model", opt->model, "a Hugging Face Qwen folder: do its weights and KV cache fit?");
    cmd->add_option("--ctx", opt->ctx, "KV-cache tokens for --model (default: its max_position_embeddings)");
    cmd->callback([opt] {
        doctor::Inputs in;
        std::error_code ec;
        if (!std::filesystem::is_directory(opt->root, ec)) usage_error("--root " + opt->root + " is not a folder");
        in.root = opt->root;
        if (!opt->ctx.empty() && opt->model.empty()) usage_error("--ctx needs --model");
        if (!opt->model.empty()) {
            in.model = doctor::ModelQuery{opt->model, std::nullopt};
            if (!opt->ctx.empty()) {
                std::string ctx = opt->ctx;
                const std::string why = integer_range(1, INT64_LIMIT)(ctx);
                if (!why.empty()) usage_error("--ctx " + why);
                in.model->ctx = std::stoll(ctx);
            }
        }
        in.env = doctor::current_environment();
        in.runtime = doctor::probe_runtime();
        const doctor::Report report = doctor::run_checks(in);  // a bad model folder throws: main prints it
        const std::string out = opt->json ? doctor::report_json(report).dump(2) + "\n" : doctor::report_text(report);
        std::fwrite(out.data(), 1, out.size(), stdout);
        std::fflush(stdout);
        std::exit(report.exit_status());  // CLI11 has no way to return a status from a callback
    });
    return cmd;
}

}  // namespace flashport::app
