// find_non_finite (flashport/dtype.h): a NaN or Inf is an exponent field of all ones, in every dtype,
// so the scan is integer masks over the raw bits. Chunks are tested with a branch-free OR (which
// vectorises) in parallel, and only a chunk that holds a hit is searched element by element: a
// multi-gigabyte weight scan runs at memory bandwidth.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "flashport/dtype.h"

namespace flashport {
namespace {

constexpr int64_t CHUNK = int64_t(1) << 16;  // elements per parallel task

template <typename Bits, Bits MASK>
bool any_non_finite(const Bits* p, int64_t n) {
    unsigned bad = 0;
    for (int64_t i = 0; i < n; ++i) bad |= unsigned((p[i] & MASK) == MASK);
    return bad != 0;
}

template <typename Bits, Bits MASK>
int64_t find_in(const void* data, int64_t n) {
    const Bits* p = static_cast<const Bits*>(data);
    const int64_t chunks = (n + CHUNK - 1) / CHUNK;
    int64_t first = std::numeric_limits<int64_t>::max();
#pragma omp parallel for schedule(static) reduction(min : first) if (chunks > 4)
    for (int64_t c = 0; c < chunks; ++c) {
        const int64_t begin = c * CHUNK, len = std::min(CHUNK, n - begin);
        if (begin < first && any_non_finite<Bits, MASK>(p + begin, len)) first = std::min(first, c);
    }
    if (first == std::numeric_limits<int64_t>::max()) return -1;
    for (int64_t i = first * CHUNK;; ++i)
        if ((p[i] & MASK) == MASK) return i;
}

}  // namespace

int64_t find_non_finite(const void* data, DType dtype, int64_t n) {
    if (n <= 0) return -1;
    switch (dtype) {
        case DType::F32:
            return find_in<uint32_t, 0x7f800000u>(data, n);
        case DType::F16:
            return find_in<uint16_t, uint16_t(0x7c00u)>(data, n);
        case DType::BF16:
            return find_in<uint16_t, uint16_t(0x7f80u)>(data, n);
    }
    return -1;
}

}  // namespace flashport
