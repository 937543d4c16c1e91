// Paged-KV prefill on the GPU (flashport/paged_attention.h with more query tokens than the decode kernel
// serves, or a head dim it lacks): the flash kernels reading K and V through the block table, so chat
// turns and chunked prefill attend to the cached history without gathering it. Compiled only in CUDA and
// HIP builds.
#pragma once

#include "flashport/paged_attention.h"

namespace flashport::gpu {

// Whether a request goes to the prefill path rather than the split-KV decode kernel.
bool paged_attention_prefill_serves(const PagedAttentionPlan& plan);

// As plan_paged_attention_decode, for the prefill path: checks the GPU limits and names the kernel
// ("gpu.paged_attention.prefill.mma.d128"); one split, no workspace.
void plan_paged_attention_prefill(PagedAttentionPlan& plan, const TensorView& out, const TensorView& q,
                                  const PagedKVCache& kv, const TensorView* lse);

// Launches a plan from plan_paged_attention_prefill on `stream`; neither allocates nor synchronises.
void run_paged_attention_prefill(const PagedAttentionPlan& plan, const TensorView& out, const TensorView& q,
                                 const PagedKVCache& kv, const TensorView* lse, void* stream);

}  // namespace flashport::gpu
