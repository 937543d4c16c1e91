// NaN poisoning: every output buffer, and every byte of an input that a kernel must not read (padding,
// spare rows, empty cache slots), starts as a quiet NaN of its dtype. A kernel that reads there
// poisons its own result; one that writes there leaves a non-NaN that the harness finds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "flashport/dtype.h"

namespace flashport::test {

// The quiet-NaN bit pattern of one element (the low dtype_size bytes).
inline uint32_t poison_bits(DType dtype) {
    switch (dtype) {
        case DType::F32: return 0x7fc00000u;
        case DType::F16: return 0x7e00u;
        case DType::BF16: return 0x7fc0u;
    }
    return 0;
}

// Fills `bytes` bytes at `data` with the dtype's NaN, element by element (a trailing partial element
// is left alone).
inline void fill_poison(void* data, size_t bytes, DType dtype) {
    const size_t es = dtype_size(dtype);
    const uint32_t bits = poison_bits(dtype);
    for (size_t off = 0; off + es <= bytes; off += es) std::memcpy(static_cast<char*>(data) + off, &bits, es);
}

// True when the element at p still holds the poison pattern, bit for bit.
inline bool is_poison(const void* p, DType dtype) {
    const uint32_t bits = poison_bits(dtype);
    return std::memcmp(p, &bits, dtype_size(dtype)) == 0;
}

// True when every element of the `bytes` bytes at `data` still holds the poison pattern.
inline bool all_poison(const void* data, size_t bytes, DType dtype) {
    const size_t es = dtype_size(dtype);
    for (size_t off = 0; off + es <= bytes; off += es)
        if (!is_poison(static_cast<const char*>(data) + off, dtype)) return false;
    return true;
}

}  // namespace flashport::test
