// A launcher's copy of a view's strides into a kernel's argument block. The kernels take the outer
// strides of their views, e.g. (batch, position, head) of a [batch, len, heads, head_dim] view or
// (block, slot, head) of a paged cache, since head_dim is contiguous.
#pragma once

#include <cstddef>
#include <cstdint>

#include "flashport/tensor.h"

namespace flashport::gpu {

// dst[d] = t.stride[d] · scale for the first N dimensions: scale 1 for element strides, the element
// size for byte strides. Zeros when there is no view (an lse that was not asked for).
template <size_t N>
void copy_strides(int64_t (&dst)[N], const TensorView* t, int64_t scale = 1) {
    for (size_t d = 0; d < N; ++d) dst[d] = t ? t->stride[d] * scale : 0;
}

}  // namespace flashport::gpu
