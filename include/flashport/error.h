// Errors: every failed check throws flashport::Error with a message that says what was wrong and
// what is allowed. Checks use FP_CHECK, never assert, so they survive release builds.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

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

// Builds a message from its parts with operator<<, so call sites read like sentences.
template <typename... Parts>
[[noreturn]] void fail(const Parts&... parts) {
    std::ostringstream os;
    detail::append(os, parts...);
    throw Error(os.str());
}

}  // namespace flashport

#define FP_CHECK(cond, ...)                       \
    do {                                          \
        if (!(cond)) ::flashport::fail(__VA_ARGS__); \
    } while (0)
