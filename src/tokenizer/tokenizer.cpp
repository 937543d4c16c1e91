// Loading tokenizer.json (+ tokenizer_config.json) and the encode/decode pipeline:
//   added tokens split out -> NFC -> regex pre-tokenizer -> byte-level BPE per word.
#include "flashport/tokenizer.h"

#include <fstream>
#include <sstream>
#include <unordered_map>

#include "added_tokens.h"
#include "bpe.h"
#include "byte_level.h"
#include "config.h"
#include "flashport/error.h"
#include "normalize.h"
#include "pretokenize.h"
#include "utf8.h"

namespace flashport::tokenizer {

using json_util::Json;

namespace {

enum class Kind : std::uint8_t { NONE, VOCAB, ADDED, SPECIAL };

// The decoder must be byte-level: any other would turn the same ids into different text.
void check_decoder(const Json& j, const std::string& where) {
    FP_CHECK(!j.is_null(), where, " is null: byte-level BPE needs the ByteLevel decoder");
    json_util::expect_object(j, where);
    const std::string type = json_util::require_string(j, "type", where);
    if (type == "Sequence") {
        const auto& items = json_util::require(j, "decoders", where);
        FP_CHECK(items.is_array() && !items.empty(), where, ".decoders must be a non-empty array");
        for (std::size_t i = 0; i < items.size(); ++i) check_decoder(items[i], json_util::path(where + ".decoders", i));
        return;
    }
    FP_CHECK(type == "ByteLevel", where, ": decoder type \"", excerpt(type), "\" is not supported (only ByteLevel)");
}

// A post-processor that adds tokens (TemplateProcessing: BOS, EOS) would make transformers' default
// encode differ from ours; Qwen's (ByteLevel) only adjusts offsets, which we do not produce.
void check_post_processor(const Json& j, const std::string& where) {
    if (j.is_null()) return;
    json_util::expect_object(j, where);
    const std::string type = json_util::require_string(j, "type", where);
    if (type == "Sequence") {
        const auto& items = json_util::require(j, "processors", where);
        FP_CHECK(items.is_array(), where, ".processors must be an array");
        for (std::size_t i = 0; i < items.size(); ++i)
            check_post_processor(items[i], json_util::path(where + ".processors", i));
        return;
    }
    FP_CHECK(type == "ByteLevel", where, ": post-processor type \"", type,
             "\" is not supported (only ByteLevel or null: flashport adds no BOS/EOS tokens)");
}

std::string read_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    FP_CHECK(in.good(), "cannot open ", p.string());
    std::ostringstream ss;
    ss << in.rdbuf();
    FP_CHECK(!in.bad(), "cannot read ", p.string());
    return ss.str();
}

}  // namespace

struct Tokenizer::Impl {
    Normalizer normalizer;
    PreTokenizer pre_tokenizer;
    BpeModel model;
    AddedVocabulary added;
    std::unordered_map<std::string, TokenId> added_by_content;
    std::vector<std::string> id_bytes;  // decode table: raw bytes of each id
    std::vector<Kind> id_kind;
    TokenizerConfig config;

    void encode_text(std::string_view text, bool allow_special, std::vector<TokenId>& ids) const;
    void encode_words(std::string_view text, std::vector<TokenId>& ids) const;
    void build_id_tables(const std::string& where);
    std::optional<TokenId> resolve(const std::optional<std::string>& text, const std::string& where) const;
};

void Tokenizer::Impl::build_id_tables(const std::string& where) {
    std::size_t count = model.vocab().size() + added.tokens().size();
    TokenId max_id = -1;
    for (const auto& [tok, id] : model.vocab()) max_id = std::max(max_id, id);
    for (const auto& t : added.tokens()) max_id = std::max(max_id, t.id);
    // Real vocabularies are dense; this bound stops a tiny malicious file from allocating gigabytes.
    FP_CHECK(static_cast<std::size_t>(max_id) < 2 * count + 1024, where, ": token ids are too sparse (largest id ",
             max_id, " for ", count, " tokens)");
    const std::size_t n = static_cast<std::size_t>(max_id + 1);
    id_bytes.assign(n, {});
    id_kind.assign(n, Kind::NONE);
    for (const auto& [tok, id] : model.vocab()) {
        FP_CHECK(id_kind[id] == Kind::NONE, where, ": model.vocab gives id ", id, " to two tokens (\"", tok,
                 "\" and another)");
        id_bytes[id] = byte_level::token_to_bytes(tok);
        id_kind[id] = Kind::VOCAB;
    }
    for (const auto& t : added.tokens()) {  // an added token overrides a vocab entry with its id, as in tokenizers
        id_bytes[t.id] = byte_level::token_to_bytes(t.content);
        id_kind[t.id] = t.special ? Kind::SPECIAL : Kind::ADDED;
        added_by_content[t.content] = t.id;
    }
}

std::optional<TokenId> Tokenizer::Impl::resolve(const std::optional<std::string>& text,
                                                const std::string& where) const {
    if (!text) return std::nullopt;
    if (const auto it = added_by_content.find(*text); it != added_by_content.end()) return it->second;
    if (const auto it = model.vocab().find(*text); it != model.vocab().end()) return it->second;
    fail(where, " \"", excerpt(*text), "\" is not a token of this tokenizer");
}

Tokenizer Tokenizer::from_json(std::string_view tokenizer_json, std::string_view config_json,
                               std::string_view chat_template_jinja, std::string_view origin) {
    const std::string where = std::string(origin) + ":";
    const Json j = json_util::parse(tokenizer_json, origin);
    json_util::expect_object(j, std::string(origin));
    auto impl = std::make_unique<Impl>();

    const Json* model = json_util::find(j, "model");
    FP_CHECK(model != nullptr, origin, " has no \"model\": it is not a tokenizer.json file");
    impl->normalizer = Normalizer::from_json(j.value("normalizer", Json()), json_util::path(where, "normalizer"));
    impl->pre_tokenizer =
        PreTokenizer::from_json(j.value("pre_tokenizer", Json()), json_util::path(where, "pre_tokenizer"));
    check_decoder(j.value("decoder", Json()), json_util::path(where, "decoder"));
    check_post_processor(j.value("post_processor", Json()), json_util::path(where, "post_processor"));
    impl->model = BpeModel::from_json(*model, json_util::path(where, "model"));

    auto add = [&](const AddedToken& t) {
        impl->added.add(
            t, t.normalized && !impl->normalizer.is_identity() ? impl->normalizer.apply(t.content) : std::string());
    };
    if (const Json* added = json_util::find(j, "added_tokens")) {
        const std::string at = json_util::path(where, "added_tokens");
        FP_CHECK(added->is_array(), at, " must be an array, not ", json_util::type_name(*added));
        for (std::size_t i = 0; i < added->size(); ++i)
            add(parse_added_token((*added)[i], std::nullopt, json_util::path(at, i)));
    }

    RawConfig raw;
    if (!config_json.empty()) {
        raw = parse_config(json_util::parse(config_json, "tokenizer_config.json"), "tokenizer_config.json:");
        for (const auto& t : raw.added_tokens) add(t);
    }
    impl->build_id_tables(where);

    TokenizerConfig& c = impl->config;
    auto special = [&](const std::optional<std::string>& text,
                       const char* key) -> std::optional<TokenizerConfig::Special> {
        const auto id = impl->resolve(text, std::string("tokenizer_config.json: ") + key);
        if (!id) return std::nullopt;
        return TokenizerConfig::Special{*text, *id};
    };
    c.bos = special(raw.bos, "bos_token");
    c.eos = special(raw.eos, "eos_token");
    c.pad = special(raw.pad, "pad_token");
    c.unk = special(raw.unk, "unk_token");
    c.add_bos_token = raw.add_bos_token;
    // transformers gives chat_template.jinja precedence over the config's copy.
    c.chat_template = chat_template_jinja.empty() ? raw.chat_template : std::string(chat_template_jinja);
    return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_dir(const std::filesystem::path& dir) {
    const auto tj = dir / "tokenizer.json";
    FP_CHECK(std::filesystem::is_regular_file(tj), "no tokenizer.json in ", dir.string(),
             " (flashport reads Hugging Face's tokenizer.json; vocab.json + merges.txt alone are not supported)");
    const auto cj = dir / "tokenizer_config.json";
    const auto jinja = dir / "chat_template.jinja";
    const std::string config = std::filesystem::is_regular_file(cj) ? read_file(cj) : std::string();
    const std::string tmpl = std::filesystem::is_regular_file(jinja) ? read_file(jinja) : std::string();
    return from_json(read_file(tj), config, tmpl, tj.string());
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

void Tokenizer::Impl::encode_words(std::string_view text, std::vector<TokenId>& ids) const {
    std::vector<std::string_view> words;
    pre_tokenizer.split(text, words);
    for (const auto w : words) model.encode_word(w, ids);
}

void Tokenizer::Impl::encode_text(std::string_view text, bool allow_special, std::vector<TokenId>& ids) const {
    std::string normalized;
    if (!normalizer.is_identity()) {
        normalized = normalizer.apply(text);
        text = normalized;
    }
    if (!added.has_normalized()) {
        encode_words(text, ids);
        return;
    }
    std::vector<Segment> segments;
    added.split(text, true, allow_special, segments);
    for (const auto& s : segments) {
        if (s.id >= 0) {
            ids.push_back(s.id);
        } else {
            encode_words(s.text, ids);
        }
    }
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool allow_special) const {
    utf8::check_valid(text, "the text to encode");
    std::vector<TokenId> ids;
    ids.reserve(text.size() / 3 + 1);
    std::vector<Segment> segments;
    impl_->added.split(text, false, allow_special, segments);
    for (const auto& s : segments) {
        if (s.id >= 0) {
            ids.push_back(s.id);
        } else {
            impl_->encode_text(s.text, allow_special, ids);
        }
    }
    return ids;
}

std::string_view Tokenizer::token_bytes(TokenId id) const {
    FP_CHECK(id >= 0 && static_cast<std::size_t>(id) < impl_->id_kind.size() && impl_->id_kind[id] != Kind::NONE,
             "unknown token id ", id, " (the vocabulary has ", impl_->id_kind.size(), " ids)");
    return impl_->id_bytes[id];
}

std::string Tokenizer::decode(std::span<const TokenId> ids, bool skip_special) const {
    std::string bytes;
    for (const TokenId id : ids) {
        const std::string_view b = token_bytes(id);
        if (skip_special && impl_->id_kind[id] == Kind::SPECIAL) continue;
        bytes.append(b);
    }
    return utf8::to_valid_lossy(bytes);
}

std::optional<TokenId> Tokenizer::token_to_id(std::string_view token) const {
    const std::string key(token);
    if (const auto it = impl_->added_by_content.find(key); it != impl_->added_by_content.end()) return it->second;
    if (const auto it = impl_->model.vocab().find(key); it != impl_->model.vocab().end()) return it->second;
    return std::nullopt;
}

bool Tokenizer::is_special(TokenId id) const {
    return id >= 0 && static_cast<std::size_t>(id) < impl_->id_kind.size() && impl_->id_kind[id] == Kind::SPECIAL;
}

std::size_t Tokenizer::vocab_size() const {
    return impl_->id_kind.size();
}
const std::vector<AddedToken>& Tokenizer::added_tokens() const {
    return impl_->added.tokens();
}
const TokenizerConfig& Tokenizer::config() const {
    return impl_->config;
}

}  // namespace flashport::tokenizer
