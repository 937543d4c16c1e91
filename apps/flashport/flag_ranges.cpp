#include "flag_ranges.h"

#include <charconv>
#include <cmath>
#include <sstream>
#include <string>

namespace flashport::app {
namespace {

// Parses all of `text` as a T; false when anything is left over, it overflows, or it is empty.
template <typename T>
bool parse_exact(const std::string& text, T& value) {
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    return ec == std::errc() && ptr == end;
}

template <typename T>
std::string interval(T lo, T hi, bool lo_open = false) {
    std::ostringstream os;
    os << (lo_open ? "(" : "[") << lo << ", " << hi << "]";
    return os.str();
}

}  // namespace

CLI::Validator integer_range(int64_t lo, int64_t hi) {
    const std::string range = interval(lo, hi);
    return CLI::Validator(
        [lo, hi, range](std::string& input) -> std::string {
            int64_t v = 0;
            if (!parse_exact(input, v) || v < lo || v > hi)
                return "must be an integer in " + range + ", got '" + input + "'";
            input = std::to_string(v);  // CLI11 would read "010" as octal
            return {};
        },
        "INT in " + range);
}

CLI::Validator seed_range() {
    const uint64_t hi = std::numeric_limits<uint64_t>::max();
    const std::string range = interval<uint64_t>(0, hi);
    return CLI::Validator(
        [range](std::string& input) -> std::string {
            uint64_t v = 0;
            if (!parse_exact(input, v)) return "must be an integer in " + range + ", got '" + input + "'";
            input = std::to_string(v);
            return {};
        },
        "UINT64");
}

CLI::Validator real_range(double lo, double hi, bool lo_open) {
    const std::string range = interval(lo, hi, lo_open);
    return CLI::Validator(
        [lo, hi, lo_open, range](std::string& input) -> std::string {
            double v = 0;
            if (!parse_exact(input, v) || !std::isfinite(v) || !(lo_open ? v > lo : v >= lo) || !(v <= hi))
                return "must be a finite number in " + range + ", got '" + input + "'";
            return {};
        },
        "NUMBER in " + range);
}

}  // namespace flashport::app
