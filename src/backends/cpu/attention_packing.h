// Moving attention operands between strided tensors of any dtype and the fp32 tiles the CPU kernels
// read. Shared by the naive and flash paths so both see identical fp32 inputs.
#pragma once

#include <cstdint>

#include "flashport/tensor.h"

namespace flashport::cpu {

constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;

inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// dst[i][d] = mul · src(b, pos0 + i, head, d) for i < n rows of head_dim values; rows past the
// tensor's length (pos0 + i >= len) are zero. ld is dst's row pitch in floats.
inline void load_rows(float* dst, int64_t ld, const TensorView& src, int64_t b, int64_t pos0, int64_t n, int64_t head,
                      float mul) {
    const int64_t len = src.shape[1], head_dim = src.shape[3];
    for (int64_t i = 0; i < n; ++i) {
        float* row = dst + i * ld;
        const int64_t pos = pos0 + i;
        for (int64_t d = 0; d < head_dim; ++d)
            row[d] = pos < len ? mul * load_as_float(src.at(b, pos, head, d), src.dtype) : 0.0f;
    }
}

}  // namespace flashport::cpu
