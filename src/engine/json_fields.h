// Typed, optional access to the members of a config-style JSON object (config.json,
// generation_config.json), with errors that name the file and the field. A member that is absent
// or JSON null reads as "not given", as in transformers.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flashport::engine {

class JsonFields {
public:
    // `where` prefixes messages: "path/config.json" or "path/config.json: rope_parameters".
    JsonFields(const nlohmann::json& object, std::string where);

    const nlohmann::json* find(std::string_view key) const;  // nullptr when absent or null
    bool has(std::string_view key) const { return find(key) != nullptr; }
    // Present at all, null included (where null and absent mean different things).
    bool has_key(std::string_view key) const { return object_.contains(std::string(key)); }

    std::optional<int64_t> get_int(std::string_view key) const;
    // A required integer in [1, max].
    int64_t require_positive(std::string_view key, int64_t max = int64_t(1) << 31) const;
    // An optional integer in [1, max], or `fallback`.
    int64_t positive_or(std::string_view key, int64_t fallback, int64_t max = int64_t(1) << 31) const;
    std::optional<double> get_number(std::string_view key) const;  // integers accepted
    std::optional<bool> get_bool(std::string_view key) const;
    std::optional<std::string> get_string(std::string_view key) const;
    // A token id or list of ids (eos_token_id may be either); empty when absent.
    std::vector<int64_t> get_ids(std::string_view key) const;

    // Throws "<where>: field \"key\" <message>".
    [[noreturn]] void fail_field(std::string_view key, std::string_view message) const;
    const std::string& where() const { return where_; }

private:
    const nlohmann::json& object_;
    std::string where_;
};

}  // namespace flashport::engine
