// Running the groups in order, and the report as text and as JSON.
#include <algorithm>
#include <cstdio>

#include "doctor/checks.h"
#include "flashport/error.h"

namespace flashport::doctor {

const char* status_name(Status status) {
    switch (status) {
        case Status::OK:
            return "ok";
        case Status::WARN:
            return "warn";
        case Status::FAIL:
            return "fail";
        case Status::SKIP:
            return "skip";
    }
    return "?";
}

void Checks::add(const std::string& id, Status status, const std::string& found, const std::string& fix) {
    // A passing check has nothing to fix: a hint there would read as a problem.
    out_.push_back({id, id.substr(0, id.find('.')), status, found, status == Status::OK ? "" : fix});
}

int Report::count(Status status) const {
    return int(std::count_if(checks.begin(), checks.end(), [&](const Check& c) { return c.status == status; }));
}

const std::vector<std::pair<std::string, std::string>>& group_titles() {
    static const std::vector<std::pair<std::string, std::string>> titles{
        {"gpu", "GPU and driver"}, {"build", "Build"}, {"rocm", "ROCm"},  {"container", "Container"},
        {"nccl", "NCCL / RCCL"},   {"cpu", "CPU"},     {"model", "Model"}};
    return titles;
}

Report run_checks(const Inputs& inputs) {
    const Host host = read_host(inputs.root);
    Report r;
    Checks out(r.checks);
    gpu_checks(inputs, host, out);
    visible_device_checks(inputs, host, out);
    build_checks(inputs, host, out);
    rocm_checks(inputs, host, out);
    container_checks(inputs, host, out);
    nccl_checks(inputs, host, out);
    cpu_checks(inputs, host, out);
    if (inputs.model) model_checks(inputs, host, out);
    return r;
}

std::string report_text(const Report& report) {
    std::string text;
    for (const auto& [group, title] : group_titles()) {
        bool first = true;
        for (const Check& c : report.checks) {
            if (c.group != group) continue;
            if (first) text += (text.empty() ? "" : "\n") + title + "\n";
            first = false;
            const std::string tag = std::string("[") + status_name(c.status) + "]";
            text += tag + std::string(7 - tag.size(), ' ') + c.id + ": " + c.found + "\n";
            if (!c.fix.empty()) text += "       fix: " + c.fix + "\n";
        }
    }
    char summary[128];
    std::snprintf(summary, sizeof summary, "\n%d ok, %d warn, %d fail, %d skip\n", report.count(Status::OK),
                  report.count(Status::WARN), report.count(Status::FAIL), report.count(Status::SKIP));
    return text + summary;
}

nlohmann::ordered_json report_json(const Report& report) {
    // Ordered as documented (id first), not alphabetically: people read it too.
    nlohmann::ordered_json checks = nlohmann::ordered_json::array();
    for (const Check& c : report.checks)
        checks.push_back(
            {{"id", c.id}, {"group", c.group}, {"status", status_name(c.status)}, {"found", c.found}, {"fix", c.fix}});
    return {{"checks", checks},
            {"ok", report.count(Status::OK)},
            {"warn", report.count(Status::WARN)},
            {"fail", report.count(Status::FAIL)},
            {"skip", report.count(Status::SKIP)}};
}

std::string size_text(int64_t bytes) {
    char buf[48];
    const double b = double(bytes);
    if (bytes >= (int64_t(1) << 30))
        std::snprintf(buf, sizeof buf, "%.2f GiB", b / double(int64_t(1) << 30));
    else if (bytes >= (int64_t(1) << 20))
        std::snprintf(buf, sizeof buf, "%.1f MiB", b / double(1 << 20));
    else if (bytes >= 1024)
        std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
    else
        std::snprintf(buf, sizeof buf, "%lld bytes", static_cast<long long>(bytes));
    return buf;
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
    std::string s;
    for (const std::string& p : parts) s += (s.empty() ? "" : sep) + p;
    return s;
}

std::optional<std::string> env_value(const Inputs& in, const std::string& name) {
    const auto it = in.env.find(name);
    if (it == in.env.end()) return std::nullopt;
    return it->second;
}

}  // namespace flashport::doctor
