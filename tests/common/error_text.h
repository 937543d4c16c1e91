// For tests of bad input: the message of the flashport::Error a call throws, to match with
// HasSubstr, or a marker that can never match when it throws nothing.
#pragma once

#include <functional>
#include <string>

#include "flashport/error.h"

namespace flashport::test {

inline std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error was thrown)";
}

}  // namespace flashport::test
