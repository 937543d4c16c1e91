// What port-check reports: a finding at a place in a file, and the languages a rule applies to.
#pragma once

#include <string>

namespace flashport::portcheck {

enum class Severity { note, warning, error };
const char* severity_name(Severity s);  // "note", "warning", "error" (also SARIF's level names)

// The language a file is scanned as, from its extension. Cuda covers .cu/.cuh, the only files where an
// `asm` statement is PTX (in .cpp it is host assembly, which ROCm builds as well).
enum class Language { none, c_family, cuda, python };
Language language_of(const std::string& path);

struct Finding {
    std::string path;
    int line = 0;    // 1-based
    int column = 0;  // 1-based, in bytes
    std::string rule;
    Severity severity = Severity::warning;
    std::string message;
    std::string fix;
};

}  // namespace flashport::portcheck
