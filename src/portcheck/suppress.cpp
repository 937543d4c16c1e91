// Reading suppressions from comments (suppress.h).
#include "portcheck/suppress.h"

#include <algorithm>

#include "portcheck/rules.h"

namespace flashport::portcheck {

namespace {

constexpr std::string_view kMarker = "port-check:";

std::string_view trim(std::string_view s) {
    const size_t b = s.find_first_not_of(" \t\r*/");
    if (b == std::string_view::npos) return {};
    const size_t e = s.find_last_not_of(" \t\r*/");
    return s.substr(b, e - b + 1);
}

void add(std::vector<Finding>& findings, const std::string& path, int line, int column, const char* id,
         const std::string& detail) {
    const Rule* r = find_rule(id);
    findings.push_back({path, line, column, id, r->severity, std::string(r->message) + detail, r->fix});
}

}  // namespace

std::vector<Suppression> read_suppressions(const std::string& path, std::string_view source,
                                           const std::vector<Comment>& comments, const std::vector<size_t>& line_starts,
                                           std::vector<Finding>& findings) {
    std::vector<Suppression> out;
    for (const Comment& c : comments) {
        const std::string_view text = source.substr(c.begin, c.end - c.begin);
        // The marker opens the comment: `///` and `/**` leave extra slashes or stars before it.
        const size_t at = text.find_first_not_of(" \t/*!");
        if (at == std::string_view::npos || text.substr(at, kMarker.size()) != kMarker) continue;
        std::string_view rest = text.substr(at + kMarker.size());
        rest.remove_prefix(std::min(rest.find_first_not_of(" \t"), rest.size()));
        bool whole_file = false;
        if (rest.starts_with("ignore-file")) {
            whole_file = true;
            rest.remove_prefix(11);
        } else if (rest.starts_with("ignore")) {
            rest.remove_prefix(6);
        } else {
            continue;  // prose that mentions the tool, not a suppression
        }
        const size_t offset = c.begin + at;
        const size_t line_index = static_cast<size_t>(std::upper_bound(line_starts.begin(), line_starts.end(), offset) -
                                                      line_starts.begin()) -
                                  1;
        const int line = static_cast<int>(line_index) + 1;
        const int column = static_cast<int>(offset - line_starts[line_index]) + 1;

        const size_t dashes = rest.find("--");
        const std::string_view ids = rest.substr(0, dashes);
        const std::string_view reason =
            dashes == std::string_view::npos ? std::string_view{} : trim(rest.substr(dashes + 2));

        Suppression s{whole_file ? 0 : line, {}};
        bool valid = true;
        size_t i = 0;
        while (i < ids.size()) {
            const size_t b = ids.find_first_not_of(" \t,", i);
            if (b == std::string_view::npos) break;
            size_t e = ids.find_first_of(" \t,", b);
            e = e == std::string_view::npos ? ids.size() : e;
            const std::string id(trim(ids.substr(b, e - b)));
            if (!id.empty() && find_rule(id) == nullptr) {
                add(findings, path, line, column, kUnknownSuppression, ": `" + id + "`");
                valid = false;
            }
            if (!id.empty()) s.rules.push_back(id);
            i = e;
        }
        if (s.rules.empty()) {
            add(findings, path, line, column, kUnknownSuppression, ": none given");
            valid = false;
        }
        if (reason.empty()) {
            add(findings, path, line, column, kUnjustifiedSuppression, "");
            valid = false;
        }
        if (valid) out.push_back(std::move(s));
    }
    return out;
}

bool suppressed(const Finding& f, const std::vector<Suppression>& suppressions) {
    for (const Suppression& s : suppressions) {
        if (s.line != 0 && f.line != s.line && f.line != s.line + 1) continue;
        if (std::find(s.rules.begin(), s.rules.end(), f.rule) != s.rules.end()) return true;
    }
    return false;
}

}  // namespace flashport::portcheck
