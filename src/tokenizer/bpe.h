// The BPE model of tokenizer.json ("type": "BPE"), byte-level: a word's bytes start as one symbol
// each, and merges are applied lowest rank first (rank = position in the merges list), leftmost
// first among equal ranks -- the order Hugging Face's tokenizers uses, which is what makes the ids
// identical. Merging runs over a linked list of symbols with a priority queue of candidate pairs, so
// a word costs O(n log n); a cache remembers the ids of recently seen words, which in natural text
// repeat constantly.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "flashport/tokenizer.h"
#include "json_util.h"

namespace flashport::tokenizer {

class BpeModel {
public:
    // `j` is the "model" member; `where` names it in errors.
    static BpeModel from_json(const json_util::Json& j, std::string_view where);

    BpeModel() = default;
    BpeModel(BpeModel&& other) noexcept;
    BpeModel& operator=(BpeModel&& other) noexcept;

    // Appends the ids of one pre-tokenized word (raw bytes, not the byte-level alphabet).
    void encode_word(std::string_view word, std::vector<TokenId>& out) const;

    // The vocabulary as tokenizer.json spells it (byte-level alphabet): token string -> id.
    const std::unordered_map<std::string, TokenId>& vocab() const { return vocab_; }
    std::size_t merge_count() const { return merges_.size(); }

private:
    struct Merge {
        std::int32_t rank;
        TokenId id;
    };
    static std::uint64_t pair_key(TokenId a, TokenId b) {
        return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
    }
    const Merge* find_merge(TokenId a, TokenId b) const {
        const auto it = merges_.find(pair_key(a, b));
        return it == merges_.end() ? nullptr : &it->second;
    }
    TokenId byte_id(unsigned char b) const;
    void merge_word(std::string_view word, std::vector<TokenId>& out) const;

    std::unordered_map<std::string, TokenId> vocab_;
    std::unordered_map<std::uint64_t, Merge> merges_;
    std::array<TokenId, 256> byte_ids_{};  // id of each single byte, -1 if the vocabulary lacks it
    std::optional<TokenId> unk_;
    bool ignore_merges_ = false;

    // Word cache: words up to kMaxCachedWord bytes; cleared when it reaches kMaxCacheEntries, which
    // bounds memory for adversarial input while keeping the hit rate high on real text.
    static constexpr std::size_t kMaxCachedWord = 64;
    static constexpr std::size_t kMaxCacheEntries = 1 << 16;
    mutable std::mutex cache_mutex_;
    mutable std::unordered_map<std::string, std::vector<TokenId>> cache_;
};

}  // namespace flashport::tokenizer
