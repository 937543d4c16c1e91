// The rule table: every check port-check makes is one entry here (rules.cpp).
#pragma once

#include <span>
#include <string_view>

#include "portcheck/finding.h"

namespace flashport::portcheck {

// Which files a rule reads.
enum LanguageMask : unsigned { kC = 1, kCuda = 2, kPython = 4, kCFamily = kC | kCuda };

struct Rule {
    const char* id;
    Severity severity;
    unsigned languages;   // LanguageMask bits
    const char* pattern;  // PCRE2; the finding's column is capture group 1's start when the pattern has one
    const char* message;
    const char* fix;
    // Literals, '|'-separated, one of which every match contains: a file holding none of them skips the
    // pattern (a memmem over the file is far cheaper than a regex pass, and most files hold none).
    const char* needles;
    bool reads_strings = false;  // Python: match inside string literals too (lexer.h)
};

std::span<const Rule> rules();
const Rule* find_rule(std::string_view id);

// Rules that the scanner itself raises (about suppressions), not matched by a pattern.
inline constexpr const char* kUnjustifiedSuppression = "suppression-without-reason";
inline constexpr const char* kUnknownSuppression = "suppression-unknown-rule";

}  // namespace flashport::portcheck
