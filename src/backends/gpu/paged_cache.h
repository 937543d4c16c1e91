// paged_cache_write and rope_qk_cache_write (flashport/paged_cache.h) on the GPU. Compiled only in CUDA
// and HIP builds.
#pragma once

#include "flashport/ops.h"

namespace flashport::gpu {

// The op has validated shapes, dtypes and devices; launches one kernel on `stream` (no allocation, no
// synchronisation). Tokens whose slot is negative or past the cache are skipped.
void paged_cache_write(const TensorView& k_cache, const TensorView& v_cache, const TensorView& k, const TensorView& v,
                       const IndexView& slots, void* stream);

// rope_qk_cache_write (rope_cache.cu), validated by the op: one kernel on `stream`. A position
// outside [0, 2^24) makes its token's q and k rows NaN; a slot that is negative or past the cache skips
// its token's cache rows.
void rope_qk_cache_write(const TensorView& q, const TensorView& k, const TensorView& v, const IndexView& positions,
                         double theta, const TensorView& k_cache, const TensorView& v_cache, const IndexView& slots,
                         void* stream);

}  // namespace flashport::gpu
