// The three output formats (output.h).
#include "portcheck/output.h"

#include <nlohmann/json.hpp>

#include "portcheck/rules.h"

namespace flashport::portcheck {

std::string to_text(const std::vector<Finding>& findings, size_t files_scanned) {
    std::string out;
    size_t counts[3] = {0, 0, 0};
    for (const Finding& f : findings) {
        out += f.path + ":" + std::to_string(f.line) + ":" + std::to_string(f.column) + ": " +
               severity_name(f.severity) + ": " + f.message + " [" + f.rule + "]; fix: " + f.fix + "\n";
        ++counts[static_cast<int>(f.severity)];
    }
    out += "port-check: " + std::to_string(files_scanned) + " files, " + std::to_string(counts[2]) + " errors, " +
           std::to_string(counts[1]) + " warnings, " + std::to_string(counts[0]) + " notes\n";
    return out;
}

std::string to_json(const std::vector<Finding>& findings) {
    nlohmann::json out = nlohmann::json::array();
    for (const Finding& f : findings)
        out.push_back({{"file", f.path},
                       {"line", f.line},
                       {"column", f.column},
                       {"rule", f.rule},
                       {"severity", severity_name(f.severity)},
                       {"message", f.message},
                       {"fix", f.fix}});
    return out.dump(2) + "\n";
}

std::string to_sarif(const std::vector<Finding>& findings, const std::string& tool_version) {
    nlohmann::json rules_out = nlohmann::json::array();
    for (const Rule& r : rules())
        rules_out.push_back({{"id", r.id},
                             {"shortDescription", {{"text", r.message}}},
                             {"help", {{"text", r.fix}}},
                             {"defaultConfiguration", {{"level", severity_name(r.severity)}}}});
    nlohmann::json results = nlohmann::json::array();
    for (const Finding& f : findings)
        results.push_back({{"ruleId", f.rule},
                           {"level", severity_name(f.severity)},
                           {"message", {{"text", f.message + "; fix: " + f.fix}}},
                           {"locations",
                            {{{"physicalLocation",
                               {{"artifactLocation", {{"uri", f.path}}},
                                {"region", {{"startLine", f.line}, {"startColumn", f.column}}}}}}}}});
    const nlohmann::json sarif = {
        {"version", "2.1.0"},
        {"$schema", "https://json.schemastore.org/sarif-2.1.0.json"},
        {"runs",
         {{{"tool", {{"driver", {{"name", "flashport port-check"}, {"version", tool_version}, {"rules", rules_out}}}}},
           {"results", results}}}}};
    return sarif.dump(2) + "\n";
}

}  // namespace flashport::portcheck
