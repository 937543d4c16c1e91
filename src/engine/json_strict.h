// JSON parsing for untrusted model files (safetensors headers, shard indexes).
//
// nlohmann's parser keeps one value of a duplicated key silently, and other parsers keep the other
// one, so two readers of the same file can disagree on which tensor a name means (the safetensors
// README: "Duplicate keys are disallowed. Not all parsers may respect this."). This parser rejects
// duplicates at every level and turns syntax errors into flashport::Error naming the file.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <string_view>

namespace flashport::engine {

nlohmann::json parse_json_strict(std::string_view text, std::string_view source);

// The whole file as text; an Error naming it when it cannot be read.
std::string read_text_file(const std::filesystem::path& path);

// "string", "number", "object"... for messages.
const char* json_type_name(const nlohmann::json& j);

}  // namespace flashport::engine
