// Writing new tokens' keys and values into a paged KV cache (the layout flashport/paged_attention.h
// reads): token t's rows go to slot slots[t] = block · block_size + offset. One call per layer writes a
// whole batch whatever its sequences' blocks (vLLM's reshape_and_cache); on a GPU one kernel instead of
// a driver copy per run of tokens, and nothing that would stop a CUDA graph from capturing it.
//
//   k_cache, v_cache  [num_blocks, block_size, n_kv_heads, head_dim]
//   k, v              [tokens, n_kv_heads, head_dim], the caches' dtype, unit inner stride
//   slots             int32 or int64 [tokens], on the caches' device; a negative slot skips its token
//                     (padding rows)
// A slot at or past num_blocks · block_size is an error on the CPU. On a GPU the slots are device
// memory, which the call does not read on the host (that would synchronise): such a token is skipped,
// so callers compute slots from blocks they allocated (as the engine does, checked on the host).
#pragma once

#include "flashport/ops.h"
#include "flashport/tensor.h"

namespace flashport {

void paged_cache_write(const TensorView& k_cache, const TensorView& v_cache, const TensorView& k, const TensorView& v,
                       const IndexView& slots, void* stream = nullptr);

}  // namespace flashport
