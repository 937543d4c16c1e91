#include "json_fields.h"

#include <cmath>

#include "flashport/error.h"
#include "flashport/json_limits.h"
#include "json_strict.h"

namespace flashport::engine {

JsonFields::JsonFields(const nlohmann::json& object, std::string where) : object_(object), where_(std::move(where)) {
    FP_CHECK(object_.is_object(), where_, ": expected a JSON object, got ", json_type_name(object_));
}

const nlohmann::json* JsonFields::find(std::string_view key) const {
    const auto it = object_.find(std::string(key));
    if (it == object_.end() || it->is_null()) return nullptr;
    return &*it;
}

void JsonFields::fail_field(std::string_view key, std::string_view message) const {
    fail(where_, ": field \"", key, "\" ", message);
}

std::optional<int64_t> JsonFields::get_int(std::string_view key) const {
    const nlohmann::json* j = find(key);
    if (!j) return std::nullopt;
    if (j->is_number_integer() && !j->is_number_unsigned()) return j->get<int64_t>();
    if (j->is_number_unsigned() && j->get<uint64_t>() <= uint64_t(INT64_MAX)) return int64_t(j->get<uint64_t>());
    fail_field(key, "must be an integer, got " + std::string(json_type_name(*j)) + " " + json_excerpt(*j));
}

int64_t JsonFields::positive_or(std::string_view key, int64_t fallback, int64_t max) const {
    const auto v = get_int(key);
    if (!v) return fallback;
    if (*v < 1 || *v > max)
        fail_field(key,
                   "must be a positive integer no larger than " + std::to_string(max) + ", got " + std::to_string(*v));
    return *v;
}

int64_t JsonFields::require_positive(std::string_view key, int64_t max) const {
    if (!has(key)) fail_field(key, "is missing (a positive integer is required)");
    return positive_or(key, 0, max);
}

std::optional<double> JsonFields::get_number(std::string_view key) const {
    const nlohmann::json* j = find(key);
    if (!j) return std::nullopt;
    if (!j->is_number())
        fail_field(key, "must be a number, got " + std::string(json_type_name(*j)) + " " + json_excerpt(*j));
    const double v = j->get<double>();
    if (!std::isfinite(v)) fail_field(key, "must be finite");
    return v;
}

std::optional<bool> JsonFields::get_bool(std::string_view key) const {
    const nlohmann::json* j = find(key);
    if (!j) return std::nullopt;
    if (!j->is_boolean())
        fail_field(key, "must be true or false, got " + std::string(json_type_name(*j)) + " " + json_excerpt(*j));
    return j->get<bool>();
}

std::optional<std::string> JsonFields::get_string(std::string_view key) const {
    const nlohmann::json* j = find(key);
    if (!j) return std::nullopt;
    if (!j->is_string())
        fail_field(key, "must be a string, got " + std::string(json_type_name(*j)) + " " + json_excerpt(*j));
    return j->get<std::string>();
}

std::vector<int64_t> JsonFields::get_ids(std::string_view key) const {
    const nlohmann::json* j = find(key);
    if (!j) return {};
    const auto one = [&](const nlohmann::json& v) -> int64_t {
        if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0) ||
            (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)))
            fail_field(key, "must be a non-negative token id or a list of them, got " + json_excerpt(*j));
        return v.get<int64_t>();
    };
    if (!j->is_array()) return {one(*j)};
    std::vector<int64_t> ids;
    for (const auto& v : *j) ids.push_back(one(v));
    return ids;
}

}  // namespace flashport::engine
