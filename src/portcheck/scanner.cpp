// Running the rule table over a file (scanner.h).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "portcheck/scanner.h"

#include <pcre2.h>

#include <algorithm>
#include <cstring>

#include "flashport/error.h"
#include "portcheck/lexer.h"
#include "portcheck/rules.h"
#include "portcheck/suppress.h"

namespace flashport::portcheck {

const char* severity_name(Severity s) {
    switch (s) {
        case Severity::note:
            return "note";
        case Severity::warning:
            return "warning";
        case Severity::error:
            return "error";
    }
    return "error";
}

Language language_of(const std::string& path) {
    const size_t dot = path.rfind('.');
    if (dot == std::string::npos || path.find('/', dot) != std::string::npos) return Language::none;
    const std::string ext = path.substr(dot + 1);
    if (ext == "cu" || ext == "cuh") return Language::cuda;
    if (ext == "py") return Language::python;
    for (const char* e : {"c", "h", "cc", "cpp", "cxx", "hh", "hpp", "hxx", "inc", "hip"})
        if (ext == e) return Language::c_family;
    return Language::none;
}

struct Scanner::Compiled {
    const Rule* rule = nullptr;
    pcre2_code* code = nullptr;
    pcre2_match_data* match = nullptr;
    ~Compiled() {
        pcre2_match_data_free(match);
        pcre2_code_free(code);
    }
};

struct Scanner::Buffers {
    Lexed lexed;
    std::vector<size_t> line_starts;
};

Scanner::Scanner() {
    for (const Rule& r : rules()) {
        if (r.pattern == nullptr) continue;
        auto c = std::make_unique<Compiled>();
        c->rule = &r;
        int err = 0;
        PCRE2_SIZE err_offset = 0;
        // MULTILINE: ^ anchors the directive and import rules at each line's start.
        c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(r.pattern), PCRE2_ZERO_TERMINATED, PCRE2_MULTILINE, &err,
                                &err_offset, nullptr);
        if (c->code == nullptr) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof msg);
            fail("port-check rule ", r.id, ": ", reinterpret_cast<const char*>(msg), " at offset ", err_offset);
        }
        // Without JIT (a platform lacking it) the interpreter gives the same matches, only slower.
        pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE);
        c->match = pcre2_match_data_create_from_pattern(c->code, nullptr);
        compiled_.push_back(std::move(c));
    }
    buffers_ = std::make_unique<Buffers>();
}

Scanner::~Scanner() = default;

namespace {

unsigned mask_of(Language language) {
    switch (language) {
        case Language::c_family:
            return kC;
        case Language::cuda:
            return kCuda;
        case Language::python:
            return kPython;
        case Language::none:
            return 0;
    }
    return 0;
}

// Whether `code` holds one of the '|'-separated literals (rules.h: Rule::needles); true without any.
bool holds_needle(const std::string& code, const char* needles) {
    if (needles == nullptr) return true;
    for (std::string_view rest = needles; !rest.empty();) {
        const size_t bar = rest.find('|');
        const std::string_view needle = rest.substr(0, bar);
        if (memmem(code.data(), code.size(), needle.data(), needle.size()) != nullptr) return true;
        rest = bar == std::string_view::npos ? std::string_view{} : rest.substr(bar + 1);
    }
    return false;
}

void line_starts_of(const std::string& text, std::vector<size_t>& starts) {
    starts.assign(1, 0);
    const char* p = text.data();
    const char* end = p + text.size();
    while (const void* nl = std::memchr(p, '\n', static_cast<size_t>(end - p))) {
        p = static_cast<const char*>(nl) + 1;
        starts.push_back(static_cast<size_t>(p - text.data()));
    }
}

}  // namespace

std::vector<Finding> Scanner::scan(const std::string& path, const std::string& text, Language language) const {
    const unsigned mask = mask_of(language);
    std::vector<Finding> findings;
    if (mask == 0) return findings;
    Lexed& lexed = buffers_->lexed;
    if (language == Language::python)
        lex_python(text, lexed);
    else
        lex_c_family(text, lexed);
    std::vector<size_t>& line_starts = buffers_->line_starts;
    line_starts_of(text, line_starts);
    const std::vector<Suppression> suppressions = read_suppressions(path, text, lexed.comments, line_starts, findings);

    for (const auto& c : compiled_) {
        if ((c->rule->languages & mask) == 0) continue;
        const std::string& code =
            c->rule->reads_strings && language == Language::python ? lexed.code_with_strings : lexed.code;
        if (!holds_needle(code, c->rule->needles)) continue;
        const auto* subject = reinterpret_cast<PCRE2_SPTR>(code.data());
        pcre2_match_data* md = c->match;
        PCRE2_SIZE start = 0;
        while (start <= code.size() && pcre2_match(c->code, subject, code.size(), start, 0, md, nullptr) > 0) {
            const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
            const uint32_t pairs = pcre2_get_ovector_count(md);
            // The finding points at the first capture group that took part, else at the match.
            PCRE2_SIZE at = ov[0];
            for (uint32_t g = 1; g < pairs; ++g)
                if (ov[2 * g] != PCRE2_UNSET) {
                    at = ov[2 * g];
                    break;
                }
            const size_t li = static_cast<size_t>(std::upper_bound(line_starts.begin(), line_starts.end(), at) -
                                                  line_starts.begin()) -
                              1;
            Finding f{path,        static_cast<int>(li) + 1, static_cast<int>(at - line_starts[li]) + 1,
                      c->rule->id, c->rule->severity,        c->rule->message,
                      c->rule->fix};
            if (!suppressed(f, suppressions)) findings.push_back(std::move(f));
            start = ov[1] > ov[0] ? ov[1] : ov[0] + 1;
        }
    }
    std::stable_sort(findings.begin(), findings.end(), [](const Finding& a, const Finding& b) {
        return a.line != b.line ? a.line < b.line : a.column < b.column;
    });
    return findings;
}

}  // namespace flashport::portcheck
