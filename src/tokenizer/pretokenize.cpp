#include "pretokenize.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "flashport/error.h"
#include "utf8.h"

namespace flashport::tokenizer {
namespace {

// GPT-2's split, used by ByteLevel when use_regex is true (Hugging Face's ByteLevel pre-tokenizer).
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string pcre2_message(int code) {
    PCRE2_UCHAR buf[256];
    const int n = pcre2_get_error_message(code, buf, sizeof buf);
    return n < 0 ? "PCRE2 error " + std::to_string(code) : std::string(reinterpret_cast<const char*>(buf));
}

struct MatchData {
    pcre2_match_data* md;
    explicit MatchData(const pcre2_code* code) : md(pcre2_match_data_create_from_pattern(code, nullptr)) {
        FP_CHECK(md != nullptr, "out of memory allocating PCRE2 match data");
    }
    ~MatchData() { pcre2_match_data_free(md); }
};

}  // namespace

struct Regex::Code {
    pcre2_code* code = nullptr;
    bool jit = false;
    ~Code() { pcre2_code_free(code); }
};

Regex::Regex(std::string_view pattern, bool literal, std::string_view where)
    : code_(std::make_unique<Code>()), where_(where) {
    utf8::check_valid(pattern, std::string(where) + " pattern");
    int err = 0;
    PCRE2_SIZE err_offset = 0;
    // UCP only affects classes like \s and \w, and PCRE2 refuses it together with LITERAL.
    const uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
    code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &err,
                                &err_offset, nullptr);
    FP_CHECK(code_->code != nullptr, where, ": the regex does not compile in PCRE2 (", pcre2_message(err),
             " at offset ", err_offset, "): ", pattern);
    // JIT makes the split several times faster; without it (unsupported platform) the interpreter runs.
    code_->jit = pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() = default;

void Regex::split_isolated(std::string_view text, std::vector<std::string_view>& out) const {
    MatchData data(code_->code);
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    std::size_t gap_start = 0, offset = 0;
    while (offset < text.size()) {
        // The text was validated once by the encoder, so PCRE2 need not re-check it at every offset.
        uint32_t flags = PCRE2_NO_UTF_CHECK;
        int rc = pcre2_match(code_->code, subject, text.size(), offset, flags, data.md, nullptr);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
            // The JIT's fixed stack overflowed (a pathological input); the interpreter uses the heap.
            flags |= PCRE2_NO_JIT;
            rc = pcre2_match(code_->code, subject, text.size(), offset, flags, data.md, nullptr);
        }
        if (rc == PCRE2_ERROR_NOMATCH) break;
        FP_CHECK(rc >= 0, where_, ": regex matching failed at offset ", offset, " of a ", text.size(),
                 "-byte piece: ", pcre2_message(rc));
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data.md);
        const std::size_t begin = ov[0], end = ov[1];
        if (end == begin) {  // an empty match would loop forever: step over one character
            if (begin >= text.size()) break;
            const std::size_t n = utf8::sequence_length(text, begin);
            offset = begin + (n == 0 ? 1 : n);
            continue;
        }
        if (begin > gap_start) out.push_back(text.substr(gap_start, begin - gap_start));
        out.push_back(text.substr(begin, end - begin));
        gap_start = offset = end;
    }
    if (gap_start < text.size()) out.push_back(text.substr(gap_start));
}

namespace {

// Collects the regex stages of a (possibly nested) pre_tokenizer, and whether ByteLevel came last.
struct Builder {
    std::vector<std::shared_ptr<const Regex>> stages;
    bool byte_level_seen = false;

    void add(const json_util::Json& j, const std::string& where) {
        json_util::expect_object(j, where);
        const std::string type = json_util::require_string(j, "type", where);
        FP_CHECK(!byte_level_seen, where, ": a \"", type,
                 "\" step after ByteLevel is not supported (ByteLevel must be the last pre-tokenizer)");
        if (type == "Sequence") {
            const std::string list = json_util::path(where, "pretokenizers");
            const auto& items = json_util::require(j, "pretokenizers", where);
            FP_CHECK(items.is_array(), list, " must be an array, not ", json_util::type_name(items));
            for (std::size_t i = 0; i < items.size(); ++i) add(items[i], json_util::path(list, i));
        } else if (type == "Split") {
            add_split(j, where);
        } else if (type == "ByteLevel") {
            FP_CHECK(!json_util::get_bool(j, "add_prefix_space", where, false), where,
                     ": ByteLevel with add_prefix_space true is not supported");
            if (json_util::get_bool(j, "use_regex", where, true))
                stages.push_back(std::make_shared<Regex>(kGpt2Pattern, false, where + " (GPT-2 regex)"));
            byte_level_seen = true;
        } else {
            fail(where, ": pre-tokenizer type \"", type,
                 "\" is not supported (supported: Sequence, Split with behavior Isolated, ByteLevel)");
        }
    }

    void add_split(const json_util::Json& j, const std::string& where) {
        const std::string behavior = json_util::require_string(j, "behavior", where);
        FP_CHECK(behavior == "Isolated", where, ": Split behavior \"", excerpt(behavior),
                 "\" is not supported (only Isolated)");
        FP_CHECK(!json_util::get_bool(j, "invert", where, false), where, ": Split with invert true is not supported");
        const std::string pwhere = json_util::path(where, "pattern");
        const auto& pattern = json_util::require(j, "pattern", where);
        json_util::expect_object(pattern, pwhere);
        if (const auto* re = json_util::find(pattern, "Regex")) {
            FP_CHECK(re->is_string(), pwhere, ".Regex must be a string, not ", json_util::type_name(*re));
            stages.push_back(std::make_shared<Regex>(re->get<std::string>(), false, pwhere));
        } else if (const auto* s = json_util::find(pattern, "String")) {
            FP_CHECK(s->is_string(), pwhere, ".String must be a string, not ", json_util::type_name(*s));
            stages.push_back(std::make_shared<Regex>(s->get<std::string>(), true, pwhere));
        } else {
            fail(pwhere, " must have a \"Regex\" or a \"String\" member");
        }
    }
};

}  // namespace

PreTokenizer PreTokenizer::from_json(const json_util::Json& j, std::string_view where) {
    FP_CHECK(!j.is_null(), where,
             " is null: flashport implements byte-level BPE, which needs a ByteLevel pre-tokenizer");
    Builder b;
    b.add(j, std::string(where));
    FP_CHECK(b.byte_level_seen, where,
             " has no ByteLevel step: flashport implements byte-level BPE only (GPT-2 / Qwen style)");
    PreTokenizer p;
    p.stages_ = std::move(b.stages);
    return p;
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& words) const {
    words.clear();
    if (text.empty()) return;
    words.push_back(text);
    std::vector<std::string_view> next;
    for (const auto& stage : stages_) {
        next.clear();
        for (const auto piece : words) stage->split_isolated(piece, next);
        words.swap(next);
    }
}

}  // namespace flashport::tokenizer
