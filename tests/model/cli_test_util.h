// Running the flashport binary as a user would, for the CLI tests: its exit status and output, a
// temporary folder, a tiny model folder with a tokenizer and a chat template, and the check that a
// bad request is a clear error.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "model_test_util.h"

namespace flashport::engine::test {

namespace fs = std::filesystem;

struct CliRun {
    int rc = -1;
    std::string out, err;
};

inline std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// A fresh folder under the temp dir, removed at the end of the test.
class TempDir {
public:
    TempDir() {
        path_ = fs::temp_directory_path() /
                ("flashport_cli_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
        fs::create_directories(path_);
    }
    ~TempDir() { fs::remove_all(path_); }
    const fs::path& path() const { return path_; }

private:
    static int& counter() {
        static int c = 0;
        return c;
    }
    fs::path path_;
};

inline std::string model_arg(const std::string& folder) {
    return "--model " + (MODELS / folder).string();
}

// Runs `flashport ARGS` with `input` on stdin (a pipe-like file), capturing stdout and stderr; `env`
// ("NAME=value ...") is set for that run only.
inline CliRun flashport(const std::string& args, const std::string& input = "", const std::string& env = "") {
    TempDir tmp;
    std::ofstream(tmp.path() / "in", std::ios::binary) << input;
    const std::string cmd = (env.empty() ? "" : "env " + env + " ") + std::string(FP_FLASHPORT_BIN) + " " + args + " < " + (tmp.path() / "in").string() + " > " +
                            (tmp.path() / "out").string() + " 2> " + (tmp.path() / "err").string();
    const int status = std::system(cmd.c_str());
    CliRun r;
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(tmp.path() / "out");
    r.err = slurp(tmp.path() / "err");
    return r;
}

// The tiny fixture model with the tiny test tokenizer (ids < 512) and Qwen's chat template.
inline void make_text_model(const fs::path& dir) {
    for (const char* f : {"config.json", "generation_config.json", "model.safetensors"})
        fs::copy_file(MODELS / "qwen2-tiny-f32" / f, dir / f);
    const fs::path tok_dir = fs::path(FP_MODEL_DATA_DIR) / "tokenizer";
    fs::copy_file(tok_dir / "tiny" / "tokenizer.json", dir / "tokenizer.json");
    const nlohmann::json qwen3_config = nlohmann::json::parse(slurp(tok_dir / "qwen3" / "tokenizer_config.json"));
    std::ofstream(dir / "tokenizer_config.json")
        << nlohmann::json{{"chat_template", qwen3_config.at("chat_template")}, {"eos_token", "<|im_end|>"}}.dump();
}

inline void expect_failure(const CliRun& r, const std::string& needle) {
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr: " << r.err;
    EXPECT_EQ(r.err.find("terminate"), std::string::npos) << r.err;
}

// Stricter, for bad input: a non-zero exit and stderr that is exactly one line, "error: ...",
// holding `needle` (no second line, no sanitizer report, no abort message).
inline void expect_error_line(const CliRun& r, const std::string& needle) {
    EXPECT_NE(r.rc, 0) << r.err;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << "stderr: " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "stderr: " << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr: " << r.err;
}

}  // namespace flashport::engine::test
