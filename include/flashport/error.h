// Errors: every failed check throws flashport::Error with a message that says what was wrong and
// what is allowed. Checks use FP_CHECK, never assert, so they survive release builds.
#pragma once

#include <cstddef>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace flashport {

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
inline void append(std::ostringstream&) {}
template <typename T, typename... Rest>
void append(std::ostringstream& os, const T& first, const Rest&... rest) {
    os << first;
    append(os, rest...);
}
}  // namespace detail

// A message built from its parts with operator<<, so call sites read like sentences.
template <typename... Parts>
std::string concat(const Parts&... parts) {
    std::ostringstream os;
    detail::append(os, parts...);
    return os.str();
}

// Throws Error(concat(parts...)).
template <typename... Parts>
[[noreturn]] void fail(const Parts&... parts) {
    throw Error(concat(parts...));
}

// A value quoted in a message: at most `max` bytes of `text`, cut on a UTF-8 boundary and marked
// "... (N bytes)" when shortened. Values come from files and flags and may be megabytes long; a
// message stays one readable line.
inline std::string excerpt(std::string_view text, std::size_t max = 60) {
    if (text.size() <= max) return std::string(text);
    std::size_t cut = max;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    return std::string(text.substr(0, cut)) + "... (" + std::to_string(text.size()) + " bytes)";
}

}  // namespace flashport

#define FP_CHECK(cond, ...)                       \
    do {                                          \
        if (!(cond)) ::flashport::fail(__VA_ARGS__); \
    } while (0)
