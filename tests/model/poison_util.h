// A model folder with one weight overwritten (NaN, Inf), made from a committed fixture: for the tests
// that a broken checkpoint is an error, never plausible text. The safetensors file is patched in place
// (same header, same offsets), so the rest of the folder stays the fixture.
#pragma once

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>

#include "model_test_util.h"

namespace flashport::engine::test {

// Copies the F32 fixture `folder` into `dir` with every element of `tensor` set to `value`.
inline void make_poisoned_model(const std::filesystem::path& dir, const std::string& tensor, float value,
                                const std::string& folder = "qwen2-tiny-f32") {
    namespace fs = std::filesystem;
    for (const char* f : {"config.json", "generation_config.json"}) fs::copy_file(MODELS / folder / f, dir / f);
    std::ifstream in(MODELS / folder / "model.safetensors", std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    std::string file = bytes.str();
    uint64_t header_len = 0;
    std::memcpy(&header_len, file.data(), 8);  // little-endian, as on every machine the tests run on
    const nlohmann::json header = nlohmann::json::parse(file.substr(8, header_len));
    const nlohmann::json& entry = header.at(tensor);
    if (entry.at("dtype") != "F32") throw std::runtime_error("make_poisoned_model: " + tensor + " is not F32");
    const size_t begin = 8 + header_len + entry.at("data_offsets")[0].get<size_t>();
    const size_t end = 8 + header_len + entry.at("data_offsets")[1].get<size_t>();
    for (size_t at = begin; at < end; at += sizeof value) std::memcpy(file.data() + at, &value, sizeof value);
    std::ofstream(dir / "model.safetensors", std::ios::binary).write(file.data(), std::streamsize(file.size()));
}

}  // namespace flashport::engine::test
