#include "added_tokens.h"

#include <algorithm>

#include "flashport/error.h"

namespace flashport::tokenizer {

void AddedVocabulary::Matcher::add(Entry e) {
    first_byte[static_cast<unsigned char>(e.content[0])] = true;
    const auto at = std::find_if(entries.begin(), entries.end(),
                                 [&](const Entry& x) { return x.content.size() < e.content.size(); });
    entries.insert(at, std::move(e));
}

void AddedVocabulary::add(const AddedToken& token, std::string normalized_content) {
    FP_CHECK(!token.content.empty(), "added token ", token.id, " has empty content");
    for (const auto& t : tokens_) {
        FP_CHECK(t.id != token.id || t.content == token.content, "added token id ", token.id, " is given twice, as \"",
                 excerpt(t.content), "\" and as \"", excerpt(token.content), "\"");
        if (t.id == token.id) return;  // the same token listed twice (tokenizer.json and tokenizer_config.json)
    }
    tokens_.push_back(token);
    if (token.normalized && !normalized_content.empty()) {
        normalized_.add({std::move(normalized_content), token.id, token.special});
    } else {
        raw_.add({token.content, token.id, token.special});
    }
}

void AddedVocabulary::split(std::string_view text, bool normalized_pass, bool allow_special,
                            std::vector<Segment>& out) const {
    const Matcher& m = normalized_pass ? normalized_ : raw_;
    if (m.entries.empty()) {
        if (!text.empty()) out.push_back({text, -1});
        return;
    }
    std::size_t start = 0;  // start of the pending text segment
    for (std::size_t i = 0; i < text.size();) {
        if (!m.first_byte[static_cast<unsigned char>(text[i])]) {
            ++i;
            continue;
        }
        const Entry* hit = nullptr;
        for (const Entry& e : m.entries) {
            if ((allow_special || !e.special) && text.compare(i, e.content.size(), e.content) == 0) {
                hit = &e;
                break;
            }
        }
        if (hit == nullptr) {
            ++i;
            continue;
        }
        if (i > start) out.push_back({text.substr(start, i - start), -1});
        out.push_back({{}, hit->id});
        i += hit->content.size();
        start = i;
    }
    if (start < text.size()) out.push_back({text.substr(start), -1});
}

}  // namespace flashport::tokenizer
