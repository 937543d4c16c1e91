// Inline suppressions, read from comments whose text starts with the marker (so prose that mentions
// the tool is not one). The forms, marker first, are `ignore RULE[,RULE...] -- reason` (the comment's
// line and the next) and `ignore-file RULE[,RULE...] -- reason` (the whole file); docs/port-check.md
// has examples. A suppression without a reason, or naming an unknown rule, does not apply and is
// itself a finding.
#pragma once

#include <string>
#include <vector>

#include "portcheck/finding.h"
#include "portcheck/lexer.h"

namespace flashport::portcheck {

struct Suppression {
    int line = 0;  // the comment's line; 0 for ignore-file
    std::vector<std::string> rules;
};

// The valid suppressions in `comments`; the invalid ones are appended to `findings`.
// `line_starts` holds the offset of each line's first byte.
std::vector<Suppression> read_suppressions(const std::string& path, std::string_view source,
                                           const std::vector<Comment>& comments, const std::vector<size_t>& line_starts,
                                           std::vector<Finding>& findings);

bool suppressed(const Finding& f, const std::vector<Suppression>& suppressions);

}  // namespace flashport::portcheck
