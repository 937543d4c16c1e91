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
    // Not thread-safe: it reuses its buffers and match data.
    std::vector<Finding> scan(const std::string& path, const std::string& text, Language language) const;

private:
    struct Compiled;
    std::vector<std::unique_ptr<Compiled>> compiled_;
    // Buffers reused from file to file, so one Scanner serves one thread at a time.
    struct Buffers;
    std::unique_ptr<Buffers> buffers_;
};

}  // namespace flashport::portcheck
