#include "config.h"

#include <charconv>

#include "flashport/error.h"
#include "flashport/json_limits.h"
#include "utf8.h"

namespace flashport::tokenizer {

using json_util::Json;

AddedToken parse_added_token(const Json& j, std::optional<TokenId> id_from_key, const std::string& where) {
    json_util::expect_object(j, where);
    AddedToken t;
    if (id_from_key) {
        t.id = *id_from_key;
    } else {
        const Json& id = json_util::require(j, "id", where);
        FP_CHECK(id.is_number_integer() && id.get<std::int64_t>() >= 0 && id.get<std::int64_t>() < (1LL << 31),
                 json_util::path(where, "id"), " must be a non-negative integer, not ",
                 id.is_number() ? json_excerpt(id) : json_util::type_name(id));
        t.id = static_cast<TokenId>(id.get<std::int64_t>());
    }
    t.content = json_util::require_string(j, "content", where);
    utf8::check_valid(t.content, json_util::path(where, "content"));
    FP_CHECK(!t.content.empty(), json_util::path(where, "content"), " is empty");
    t.special = json_util::get_bool(j, "special", where, false);
    t.normalized = json_util::get_bool(j, "normalized", where, !t.special);  // tokenizers' default
    for (const char* flag : {"lstrip", "rstrip", "single_word"}) {
        FP_CHECK(!json_util::get_bool(j, flag, where, false), where, ": added token \"", excerpt(t.content), "\" has ",
                 flag, " true, which flashport does not implement");
    }
    return t;
}

namespace {

// A special token is either "text" or {"content": "text", ...} (transformers' serialised AddedToken).
std::optional<std::string> token_text(const Json& cfg, std::string_view key, std::string_view where) {
    const Json* v = json_util::find(cfg, key);
    if (v == nullptr) return std::nullopt;
    if (v->is_string()) return v->get<std::string>();
    const std::string at = json_util::path(where, key);
    FP_CHECK(v->is_object(), at, " must be a string or an object with \"content\", not ", json_util::type_name(*v));
    return json_util::require_string(*v, "content", at);
}

std::string chat_template(const Json& cfg, std::string_view where) {
    const Json* v = json_util::find(cfg, "chat_template");
    if (v == nullptr) return {};
    if (v->is_string()) return v->get<std::string>();
    const std::string at = json_util::path(where, "chat_template");
    FP_CHECK(v->is_array(), at, " must be a string or a list of {name, template}, not ", json_util::type_name(*v));
    for (std::size_t i = 0; i < v->size(); ++i) {
        const Json& item = (*v)[i];
        const std::string iat = json_util::path(at, i);
        json_util::expect_object(item, iat);
        if (json_util::require_string(item, "name", iat) == "default")
            return json_util::require_string(item, "template", iat);
    }
    return {};  // named templates only (tool_use, rag...): there is no default one to format chats with
}

}  // namespace

RawConfig parse_config(const Json& j, std::string_view where) {
    json_util::expect_object(j, where);
    RawConfig c;
    c.bos = token_text(j, "bos_token", where);
    c.eos = token_text(j, "eos_token", where);
    c.pad = token_text(j, "pad_token", where);
    c.unk = token_text(j, "unk_token", where);
    c.chat_template = chat_template(j, where);
    c.add_bos_token = json_util::get_bool(j, "add_bos_token", where, false);
    if (const Json* dec = json_util::find(j, "added_tokens_decoder")) {
        const std::string at = json_util::path(where, "added_tokens_decoder");
        json_util::expect_object(*dec, at);
        for (const auto& [key, value] : dec->items()) {
            TokenId id = -1;
            const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
            FP_CHECK(ec == std::errc() && end == key.data() + key.size() && id >= 0, at, ": key \"", key,
                     "\" must be a token id");
            c.added_tokens.push_back(parse_added_token(value, id, at + "[\"" + key + "\"]"));
        }
    }
    return c;
}

}  // namespace flashport::tokenizer
