#include "bpe.h"

#include <queue>

#include "byte_level.h"
#include "flashport/error.h"
#include "flashport/json_limits.h"
#include "utf8.h"

namespace flashport::tokenizer {
namespace {

using json_util::Json;

// Splits a merges entry into its two halves: "a b" (exactly one space, as tokenizers requires) or ["a", "b"].
std::pair<std::string, std::string> merge_pair(const Json& m, const std::string& where) {
    if (m.is_string()) {
        const std::string s = m.get<std::string>();
        const auto sp = s.find(' ');
        FP_CHECK(sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos, where, " \"", s,
                 "\" must be two tokens separated by one space");
        return {s.substr(0, sp), s.substr(sp + 1)};
    }
    FP_CHECK(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(), where,
             " must be a string \"a b\" or an array of two strings, not ",
             m.is_array() ? "an array of another shape" : json_util::type_name(m));
    return {m[0].get<std::string>(), m[1].get<std::string>()};
}

void check_unsupported(const Json& j, const std::string& where) {
    if (const auto* d = json_util::find(j, "dropout")) {
        FP_CHECK(d->is_number() && d->get<double>() == 0.0, where,
                 ": BPE dropout is not supported (it makes encoding random)");
    }
    FP_CHECK(json_util::get_string(j, "continuing_subword_prefix", where).empty(), where,
             ": continuing_subword_prefix is not supported by byte-level BPE");
    FP_CHECK(json_util::get_string(j, "end_of_word_suffix", where).empty(), where,
             ": end_of_word_suffix is not supported by byte-level BPE");
    FP_CHECK(!json_util::get_bool(j, "byte_fallback", where, false), where,
             ": byte_fallback is not supported (it belongs to SentencePiece-style BPE, not byte-level)");
    FP_CHECK(!json_util::get_bool(j, "fuse_unk", where, false), where, ": fuse_unk is not supported");
}

}  // namespace

BpeModel::BpeModel(BpeModel&& o) noexcept
    : vocab_(std::move(o.vocab_)),
      merges_(std::move(o.merges_)),
      byte_ids_(o.byte_ids_),
      unk_(o.unk_),
      ignore_merges_(o.ignore_merges_) {}

BpeModel& BpeModel::operator=(BpeModel&& o) noexcept {
    vocab_ = std::move(o.vocab_);
    merges_ = std::move(o.merges_);
    byte_ids_ = o.byte_ids_;
    unk_ = o.unk_;
    ignore_merges_ = o.ignore_merges_;
    const std::lock_guard lock(cache_mutex_);
    cache_.clear();
    return *this;
}

BpeModel BpeModel::from_json(const Json& j, std::string_view where_view) {
    const std::string where(where_view);
    json_util::expect_object(j, where);
    // Old files omit "type"; Hugging Face then recognises BPE by its members, so do the same.
    const std::string type = json_util::get_string(j, "type", where, "BPE");
    FP_CHECK(type == "BPE", where, ": model type \"", excerpt(type), "\" is not supported (only byte-level BPE)");
    check_unsupported(j, where);

    BpeModel m;
    m.ignore_merges_ = json_util::get_bool(j, "ignore_merges", where, false);

    const std::string vwhere = json_util::path(where, "vocab");
    const Json& vocab = json_util::require(j, "vocab", where);
    json_util::expect_object(vocab, vwhere);
    m.vocab_.reserve(vocab.size());
    for (const auto& [token, id] : vocab.items()) {
        FP_CHECK(id.is_number_integer() && id.get<std::int64_t>() >= 0 && id.get<std::int64_t>() < (1LL << 31), vwhere,
                 "[\"", excerpt(token), "\"] must be a non-negative integer id, not ",
                 id.is_number() ? json_excerpt(id) : json_util::type_name(id));
        utf8::check_valid(token, vwhere + " key");
        m.vocab_.emplace(token, static_cast<TokenId>(id.get<std::int64_t>()));
    }

    FP_CHECK(!m.vocab_.empty(), vwhere, " is empty");
    m.byte_ids_.fill(-1);
    for (int b = 0; b < 256; ++b) {
        std::string ch;
        utf8::append(ch, byte_level::byte_to_char(static_cast<unsigned char>(b)));
        if (const auto it = m.vocab_.find(ch); it != m.vocab_.end()) m.byte_ids_[b] = it->second;
    }

    if (const auto* unk = json_util::find(j, "unk_token")) {
        FP_CHECK(unk->is_string(), where, ".unk_token must be a string, not ", json_util::type_name(*unk));
        const auto it = m.vocab_.find(unk->get<std::string>());
        FP_CHECK(it != m.vocab_.end(), where, ".unk_token \"", unk->get<std::string>(), "\" is not in the vocabulary");
        m.unk_ = it->second;
    }

    const std::string mwhere = json_util::path(where, "merges");
    const Json& merges = json_util::require(j, "merges", where);
    FP_CHECK(merges.is_array(), mwhere, " must be an array, not ", json_util::type_name(merges));
    m.merges_.reserve(merges.size());
    auto id_of = [&](const std::string& token, const std::string& at) {
        const auto it = m.vocab_.find(token);
        FP_CHECK(it != m.vocab_.end(), at, ": token \"", excerpt(token), "\" is not in the vocabulary");
        return it->second;
    };
    for (std::size_t r = 0; r < merges.size(); ++r) {
        const std::string at = json_util::path(mwhere, r);
        const auto [a, b] = merge_pair(merges[r], at);
        const TokenId left = id_of(a, at), right = id_of(b, at), merged = id_of(a + b, at);
        // A later duplicate overrides an earlier one, as in tokenizers' map built from the list.
        m.merges_[pair_key(left, right)] = Merge{static_cast<std::int32_t>(r), merged};
    }
    return m;
}

TokenId BpeModel::byte_id(unsigned char b) const {
    const TokenId id = byte_ids_[b];
    if (id >= 0) return id;
    if (unk_) return *unk_;
    fail("byte 0x", "0123456789abcdef"[b >> 4], "0123456789abcdef"[b & 15],
         " has no token in the vocabulary and the model has no unk_token");
}

void BpeModel::merge_word(std::string_view word, std::vector<TokenId>& out) const {
    struct Symbol {
        TokenId id;
        int prev, next;  // -1 at the ends; a merged-away symbol has id -1
    };
    // Candidate merge of the pair starting at `pos`; stale entries are detected when popped.
    struct Candidate {
        std::int32_t rank;
        int pos;
        TokenId id;
        bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    const int n = static_cast<int>(word.size());
    std::vector<Symbol> sym(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) sym[i] = {byte_id(static_cast<unsigned char>(word[i])), i - 1, i + 1 < n ? i + 1 : -1};

    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
    auto consider = [&](int left) {
        const int right = sym[left].next;
        if (right < 0) return;
        if (const Merge* m = find_merge(sym[left].id, sym[right].id)) queue.push({m->rank, left, m->id});
    };
    for (int i = 0; i + 1 < n; ++i) consider(i);

    while (!queue.empty()) {
        const Candidate c = queue.top();
        queue.pop();
        Symbol& left = sym[c.pos];
        if (left.id < 0 || left.next < 0) continue;
        const Merge* m = find_merge(left.id, sym[left.next].id);
        if (m == nullptr || m->id != c.id) continue;  // one side changed since this entry was queued
        Symbol& right = sym[left.next];
        left.id = c.id;
        left.next = right.next;
        right.id = -1;
        if (left.next >= 0) sym[left.next].prev = c.pos;
        if (left.prev >= 0) consider(left.prev);
        consider(c.pos);
    }
    for (int i = 0; i >= 0 && i < n; i = sym[i].next) out.push_back(sym[i].id);
}

void BpeModel::encode_word(std::string_view word, std::vector<TokenId>& out) const {
    if (word.empty()) return;
    if (word.size() == 1) {
        out.push_back(byte_id(static_cast<unsigned char>(word[0])));
        return;
    }
    if (ignore_merges_) {  // Llama-3 style: a word that is itself a token skips the merges
        if (const auto it = vocab_.find(byte_level::bytes_to_token(word)); it != vocab_.end()) {
            out.push_back(it->second);
            return;
        }
    }
    const bool cacheable = word.size() <= kMaxCachedWord;
    if (cacheable) {
        const std::lock_guard lock(cache_mutex_);
        if (const auto it = cache_.find(std::string(word)); it != cache_.end()) {
            out.insert(out.end(), it->second.begin(), it->second.end());
            return;
        }
    }
    const std::size_t start = out.size();
    merge_word(word, out);
    if (cacheable) {
        const std::lock_guard lock(cache_mutex_);
        if (cache_.size() >= kMaxCacheEntries) cache_.clear();
        cache_.emplace(std::string(word),
                       std::vector<TokenId>(out.begin() + static_cast<std::ptrdiff_t>(start), out.end()));
    }
}

}  // namespace flashport::tokenizer
