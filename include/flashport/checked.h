// Checked integer arithmetic for sizes: shape products, byte counts, and sizes that come from users
// (CLI flags, file headers). A wrapped product would allocate a few bytes and then index far past
// them, so every size that can be large is computed here and an overflow becomes flashport::Error.
//
//   const int64_t numel = checked_mul(rows, cols, "a ", rows, " x ", cols, " matrix");
//   // on overflow: "a 4294967296 x 4294967296 matrix: 4294967296 x 4294967296 overflows int64"
//
// The trailing parts name what is being computed, as in fail(); they are formatted only on overflow.
#pragma once

#include <concepts>
#include <cstdint>
#include <initializer_list>

#include "flashport/error.h"

namespace flashport {

namespace detail {
template <std::integral T>
constexpr const char* int_type_name() {
    if constexpr (std::is_signed_v<T>) return sizeof(T) == 8 ? "int64" : sizeof(T) == 4 ? "int32" : "a signed integer";
    return sizeof(T) == 8 ? "64 bits" : sizeof(T) == 4 ? "32 bits" : "an unsigned integer";
}
}  // namespace detail

// a * b, or an Error "<what>: a x b overflows <type>".
template <std::integral T, typename... What>
T checked_mul(T a, T b, const What&... what) {
    T r;
    if (__builtin_mul_overflow(a, b, &r)) fail(what..., ": ", a, " x ", b, " overflows ", detail::int_type_name<T>());
    return r;
}

// a + b, or an Error "<what>: a + b overflows <type>".
template <std::integral T, typename... What>
T checked_add(T a, T b, const What&... what) {
    T r;
    if (__builtin_add_overflow(a, b, &r)) fail(what..., ": ", a, " + ", b, " overflows ", detail::int_type_name<T>());
    return r;
}

// The product of `dims` (1 when empty), checked at every step.
template <typename... What>
int64_t checked_product(std::initializer_list<int64_t> dims, const What&... what) {
    int64_t n = 1;
    for (int64_t d : dims) n = checked_mul(n, d, what...);
    return n;
}

}  // namespace flashport
