// Gathering the files and running the scanner over them (run.h).
#include "portcheck/run.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "portcheck/output.h"
#include "portcheck/scanner.h"

namespace flashport::portcheck {

namespace {

namespace fs = std::filesystem;

// Appends the scannable files under `path`; false (with `error` set) when it cannot be read.
bool collect(const std::string& path, std::vector<std::string>& files, std::string& error) {
    std::error_code ec;
    const fs::file_status st = fs::status(path, ec);
    if (ec || !fs::exists(st)) {
        error = "error: port-check: cannot read " + path + ": no such file or folder";
        return false;
    }
    if (!fs::is_directory(st)) {
        files.push_back(path);  // a named file of an unknown kind is skipped in run()
        return true;
    }
    std::vector<std::string> found;
    fs::recursive_directory_iterator it(path, fs::directory_options::skip_permission_denied, ec);
    for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (it->is_directory(ec) && name.starts_with(".")) {
            it.disable_recursion_pending();
            continue;
        }
        if (it->is_regular_file(ec) && language_of(it->path().string()) != Language::none)
            found.push_back(it->path().string());
    }
    if (ec) {
        error = "error: port-check: cannot read " + path + ": " + ec.message();
        return false;
    }
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
    return true;
}

// The whole file into `text` (its buffer reused from file to file: one read call, no stream copies).
bool read_file(const std::string& path, std::string& text) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) return false;
    std::fseek(f, 0, SEEK_END);
    const long size = std::ftell(f);
    std::fseek(f, 0, SEEK_SET);
    text.resize(size > 0 ? static_cast<size_t>(size) : 0);
    const bool ok = size >= 0 && std::fread(text.data(), 1, text.size(), f) == text.size();
    std::fclose(f);
    return ok;
}

}  // namespace

RunResult run(const std::vector<std::string>& paths, Format format) {
    RunResult result;
    std::vector<std::string> files;
    for (const std::string& p : paths)
        if (!collect(p, files, result.error)) {
            result.status = kExitUsage;
            return result;
        }
    const Scanner scanner;
    std::string text;
    for (const std::string& file : files) {
        const Language language = language_of(file);
        if (language == Language::none) continue;  // a named file of another kind: nothing to check
        if (!read_file(file, text)) {
            result.error = "error: port-check: cannot read " + file;
            result.status = kExitUsage;
            return result;
        }
        ++result.files;
        result.bytes += text.size();
        std::vector<Finding> found = scanner.scan(file, text, language);
        result.findings.insert(result.findings.end(), std::make_move_iterator(found.begin()),
                               std::make_move_iterator(found.end()));
    }
    for (const Finding& f : result.findings)
        if (f.severity == Severity::error) result.status = kExitFindings;
    switch (format) {
        case Format::text:
            result.output = to_text(result.findings, result.files);
            break;
        case Format::json:
            result.output = to_json(result.findings);
            break;
        case Format::sarif:
            result.output = to_sarif(result.findings, FLASHPORT_PORTCHECK_VERSION);
            break;
    }
    return result;
}

}  // namespace flashport::portcheck
