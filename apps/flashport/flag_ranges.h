// Range checks for the CLI's numeric flags, as CLI11 validators: every size, count, seed and
// sampling value is parsed strictly and checked against a range before any command runs.
//
// Why not CLI::Range / CLI::PositiveNumber: they parse into a double, so NaN passes (every comparison
// with NaN is false), "1e300" passes for an integer flag, and CLI11 then converts integers with
// strtoll, which saturates "99999999999999999999" to INT64_MAX and reads "-1" as 2^64 - 1 for an
// unsigned flag. These validators accept only plain decimal text (finite, in range) and hand CLI11
// the canonical form, so what a command receives is exactly what was checked.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <limits>

namespace flashport::app {

constexpr int64_t INT64_LIMIT = std::numeric_limits<int64_t>::max();
constexpr int64_t INT32_LIMIT = std::numeric_limits<int32_t>::max();

// A decimal integer in [lo, hi].
CLI::Validator integer_range(int64_t lo, int64_t hi);
// A decimal integer in [0, 2^64 - 1]: random seeds (a negative seed is refused, not wrapped).
CLI::Validator seed_range();
// A finite decimal number in [lo, hi], or (lo, hi] when lo_open.
CLI::Validator real_range(double lo, double hi, bool lo_open = false);

}  // namespace flashport::app
