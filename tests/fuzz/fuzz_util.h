// Shared by the libFuzzer targets in this folder (tests/fuzz/README.md). Each target feeds one kind
// of untrusted input to its parser, which must return or throw flashport::Error: a crash, a
// sanitizer report, a timeout, another exception type or a broken invariant (require) is a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "flashport/error.h"

namespace fuzz {

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
    return {reinterpret_cast<const char*>(data), size};
}

// A property the code promises was broken: abort, so that libFuzzer keeps the input.
inline void require(bool ok, const char* what) {
    if (ok) return;
    std::fprintf(stderr, "fuzz: invariant broken: %s\n", what);
    std::abort();
}

// Runs one input: flashport::Error is the expected way to refuse it; anything else escapes to
// libFuzzer (an uncaught exception terminates, which it reports as a crash).
template <typename F>
void refuse_with_error_only(F&& run) {
    try {
        run();
    } catch (const flashport::Error&) {
    }
}

}  // namespace fuzz
