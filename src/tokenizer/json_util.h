// Typed access to tokenizer.json / tokenizer_config.json members. Every error names the file and the
// JSON path ("tokenizer.json: model.merges[12]: ..."), so a broken file is diagnosed from the message
// alone; nlohmann's own exceptions never escape.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace flashport::tokenizer::json_util {

using Json = nlohmann::json;

// "string", "number", "object"... for messages.
const char* type_name(const Json& j);

// Parses text, turning a syntax error into flashport::Error naming `file` and the byte offset.
Json parse(std::string_view text, std::string_view file);

// Throws unless j is an object; `where` is the path used in messages.
void expect_object(const Json& j, std::string_view where);

// The member, or nullptr when it is absent or JSON null.
const Json* find(const Json& obj, std::string_view key);

// Required members of a given type.
const Json& require(const Json& obj, std::string_view key, std::string_view where);
std::string require_string(const Json& obj, std::string_view key, std::string_view where);

// Optional members: `fallback` when absent or null, an error when present with the wrong type.
std::string get_string(const Json& obj, std::string_view key, std::string_view where, std::string fallback = {});
bool get_bool(const Json& obj, std::string_view key, std::string_view where, bool fallback);

// "where.key" for nested messages.
std::string path(std::string_view where, std::string_view key);
std::string path(std::string_view where, std::size_t index);

}  // namespace flashport::tokenizer::json_util
