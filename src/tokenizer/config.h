// tokenizer_config.json, as transformers writes it: the bos/eos/pad/unk token texts (a string or an
// {"content": ...} object), the chat template (a string, or a list of named templates of which
// "default" is used), add_bos_token, and added_tokens_decoder (id -> token), which can list added
// tokens that tokenizer.json lacks.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flashport/tokenizer.h"
#include "json_util.h"

namespace flashport::tokenizer {

struct RawConfig {
    std::optional<std::string> bos, eos, pad, unk;  // token texts; ids are resolved by the tokenizer
    std::string chat_template;
    bool add_bos_token = false;
    std::vector<AddedToken> added_tokens;  // from added_tokens_decoder
};

// `where` names the file in errors.
RawConfig parse_config(const json_util::Json& j, std::string_view where);

// One entry of tokenizer.json's "added_tokens" or of added_tokens_decoder (whose id is the key).
// lstrip, rstrip and single_word must be false: they change matching, and no Qwen file uses them.
AddedToken parse_added_token(const json_util::Json& j, std::optional<TokenId> id_from_key, const std::string& where);

}  // namespace flashport::tokenizer
