#include "json_strict.h"

#include <fstream>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

#include "flashport/error.h"
#include "flashport/json_limits.h"

namespace flashport::engine {

std::string read_text_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    FP_CHECK(in, path.string(), ": cannot open");
    std::ostringstream os;
    os << in.rdbuf();
    FP_CHECK(!in.bad(), path.string(), ": read error");
    return os.str();
}

const char* json_type_name(const nlohmann::json& j) {
    if (j.is_number_integer() || j.is_number_unsigned()) return "integer";
    if (j.is_number_float()) return "number with a fraction or exponent";
    return j.type_name();
}

nlohmann::json parse_json_strict(std::string_view text, std::string_view source) {
    // nlohmann stops at a NUL byte as if the text ended there, so "{}" followed by NUL padding would
    // parse; JSON never holds a raw NUL, and the reference reader (serde_json) refuses it.
    if (const size_t nul = text.find('\0'); nul != std::string_view::npos)
        fail(source, ": invalid JSON: a NUL byte at offset ", nul);
    check_json_depth(text, source);
    // One set of seen keys per open object, and the key each enclosing object is at, for messages.
    std::vector<std::unordered_set<std::string>> seen;
    std::vector<std::string> path;
    auto on_event = [&](int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        using E = nlohmann::json::parse_event_t;
        if (event == E::object_start) {
            seen.emplace_back();
            path.emplace_back();
        } else if (event == E::object_end) {
            seen.pop_back();
            path.pop_back();
        } else if (event == E::key) {
            const std::string key = parsed.get<std::string>();
            if (!seen.back().insert(key).second) {
                std::string where = "the top-level object";
                if (path.size() > 1) where = "object \"" + excerpt(path[path.size() - 2]) + "\"";
                fail(source, ": duplicate key \"", excerpt(key), "\" in ", where,
                     "; JSON readers disagree on which copy wins, so the file is ambiguous");
            }
            path.back() = key;
        }
        return true;
    };
    try {
        return nlohmann::json::parse(text.begin(), text.end(), on_event);
    } catch (const nlohmann::json::exception& e) {
        fail(source, ": invalid JSON: ", excerpt(e.what(), 200));  // it quotes the offending token
    }
}

}  // namespace flashport::engine
