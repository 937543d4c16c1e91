// Shared fixtures for the tokenizer tests: paths under tests/data/tokenizer and a lazily loaded
// Qwen3 tokenizer (loading its 11 MB tokenizer.json takes a moment, so each test binary does it once).
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "flashport/tokenizer.h"

namespace tokenizer_test {

inline std::filesystem::path data_dir() {
    return FP_TOKENIZER_DATA_DIR;
}

inline std::string read_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

inline const flashport::tokenizer::Tokenizer& qwen3() {
    static const auto tok = flashport::tokenizer::Tokenizer::from_dir(data_dir() / "qwen3");
    return tok;
}

inline const flashport::tokenizer::Tokenizer& tiny() {
    static const auto tok = flashport::tokenizer::Tokenizer::from_dir(data_dir() / "tiny");
    return tok;
}

}  // namespace tokenizer_test
