// `flashport port-check` end to end, without the command line: gather files, scan, format, decide the
// exit status. The CLI (apps/flashport/port_check.cpp) and the tests both call it.
#pragma once

#include <string>
#include <vector>

#include "portcheck/finding.h"

namespace flashport::portcheck {

enum class Format { text, json, sarif };

// Exit statuses (docs/port-check.md).
inline constexpr int kExitClean = 0;     // no error-level finding (warnings and notes allowed)
inline constexpr int kExitFindings = 1;  // at least one error-level finding
inline constexpr int kExitUsage = 2;     // a path that does not exist or cannot be read

struct RunResult {
    int status = kExitClean;
    std::string output;  // for stdout
    std::string error;   // one line for stderr when status is kExitUsage
    std::vector<Finding> findings;
    size_t files = 0;
    size_t bytes = 0;
};

// Files are scanned as named; folders are walked recursively for the known extensions (hidden folders
// such as .git are skipped), in sorted order so output is stable.
RunResult run(const std::vector<std::string>& paths, Format format);

}  // namespace flashport::portcheck
