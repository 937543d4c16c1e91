#include "json_util.h"

#include "flashport/error.h"
#include "flashport/json_limits.h"

namespace flashport::tokenizer::json_util {

const char* type_name(const Json& j) {
    return j.type_name();
}

Json parse(std::string_view text, std::string_view file) {
    check_json_depth(text, file);
    try {
        return Json::parse(text.begin(), text.end());
    } catch (const Json::parse_error& e) {
        fail(file, ": invalid JSON at byte ", e.byte, " (", excerpt(e.what(), 200), ")");  // it quotes the token
    } catch (const Json::exception& e) {
        // Not a syntax error: a number past double's range (out_of_range 406: "number overflow").
        fail(file, ": invalid JSON (", excerpt(e.what(), 200), ")");
    }
}

void expect_object(const Json& j, std::string_view where) {
    FP_CHECK(j.is_object(), where, " must be a JSON object, not ", type_name(j));
}

const Json* find(const Json& obj, std::string_view key) {
    const auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return nullptr;
    return &*it;
}

const Json& require(const Json& obj, std::string_view key, std::string_view where) {
    const Json* v = find(obj, key);
    FP_CHECK(v != nullptr, where, " has no \"", key, "\"");
    return *v;
}

std::string require_string(const Json& obj, std::string_view key, std::string_view where) {
    const Json& v = require(obj, key, where);
    FP_CHECK(v.is_string(), path(where, key), " must be a string, not ", type_name(v));
    return v.get<std::string>();
}

std::string get_string(const Json& obj, std::string_view key, std::string_view where, std::string fallback) {
    const Json* v = find(obj, key);
    if (v == nullptr) return fallback;
    FP_CHECK(v->is_string(), path(where, key), " must be a string, not ", type_name(*v));
    return v->get<std::string>();
}

bool get_bool(const Json& obj, std::string_view key, std::string_view where, bool fallback) {
    const Json* v = find(obj, key);
    if (v == nullptr) return fallback;
    FP_CHECK(v->is_boolean(), path(where, key), " must be true or false, not ", type_name(*v));
    return v->get<bool>();
}

std::string path(std::string_view where, std::string_view key) {
    std::string p(where);
    // "tokenizer.json:" + "model" reads better as "tokenizer.json: model" than "tokenizer.json:.model"
    if (!p.empty() && p.back() == ':') {
        p += ' ';
    } else {
        p += '.';
    }
    p += key;
    return p;
}

std::string path(std::string_view where, std::size_t index) {
    return std::string(where) + "[" + std::to_string(index) + "]";
}

}  // namespace flashport::tokenizer::json_util
