// The scanner: the rule table's patterns, compiled once (PCRE2 with JIT), run over lexed files.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "portcheck/finding.h"

namespace flashport::portcheck {

class Scanner {
public:
    Scanner();  // compiles every rule; throws flashport::Error if one does not compile
    ~Scanner();
    Scanner(const Scanner&) = delete;
    Scanner& operator=(const Scanner&) = delete;

    // Findings in one file's text, in line order, suppressions applied. `path` only labels them.
    std::vector<Finding> scan(const std::string& path, const std::string& text, Language language) const;

private:
    struct Compiled;
    std::vector<std::unique_ptr<Compiled>> compiled_;
};

}  // namespace flashport::portcheck
