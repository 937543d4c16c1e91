// Limits for every JSON document flashport reads (config.json, generation_config.json, safetensors
// headers and shard indexes, tokenizer.json, tokenizer_config.json).
//
// nlohmann's parser is iterative, but copying, dumping and comparing a value recurse once per level,
// so a file of 100 000 nested brackets would overflow the stack long after it parsed. No real file
// nests deeper than a handful of levels; the depth is refused before parsing, with a message that
// names the file and the limit.
#pragma once

#include <string>
#include <string_view>

#include "flashport/error.h"

namespace flashport {

constexpr int MAX_JSON_DEPTH = 128;

// Throws "<source>: JSON nested deeper than 128 levels (at byte N)" when arrays and objects nest
// deeper than max_depth. Brackets inside strings are skipped; syntax is left to the parser.
inline void check_json_depth(std::string_view text, std::string_view source, int max_depth = MAX_JSON_DEPTH) {
    int depth = 0;
    bool in_string = false, escaped = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > max_depth)
                fail(source, ": JSON nested deeper than ", max_depth, " levels (at byte ", i,
                     "); no valid file needs that, so it is refused");
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
}

// A JSON value for an error message: its text, at most a short prefix (see excerpt). Safe on any
// parsed value, since parsing went through check_json_depth and dump() recurses once per level.
template <typename Json>
std::string json_excerpt(const Json& j) {
    return excerpt(j.dump(-1, ' ', false, Json::error_handler_t::replace));
}

}  // namespace flashport
