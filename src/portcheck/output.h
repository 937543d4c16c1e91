// Writing findings: compiler-style text, a JSON array, or SARIF 2.1.0 for code-scanning UIs.
#pragma once

#include <string>
#include <vector>

#include "portcheck/finding.h"

namespace flashport::portcheck {

// One line per finding (path:line:col: severity: message [rule]; fix: ...), then a summary line.
std::string to_text(const std::vector<Finding>& findings, size_t files_scanned);
std::string to_json(const std::vector<Finding>& findings);
std::string to_sarif(const std::vector<Finding>& findings, const std::string& tool_version);

}  // namespace flashport::portcheck
