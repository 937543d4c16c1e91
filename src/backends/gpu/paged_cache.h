// paged_cache_write (flashport/paged_cache.h) on the GPU. Compiled only in CUDA and HIP builds.
#pragma once

#include "flashport/ops.h"

namespace flashport::gpu {

// The op has validated shapes, dtypes and devices; launches one kernel on `stream` (no allocation, no
// synchronisation). Tokens whose slot is negative or past the cache are skipped.
void paged_cache_write(const TensorView& k_cache, const TensorView& v_cache, const TensorView& k, const TensorView& v,
                       const IndexView& slots, void* stream);

}  // namespace flashport::gpu
