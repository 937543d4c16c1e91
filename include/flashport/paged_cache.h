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

// What a decoder layer does between its q/k/v projections and attention, in one call:
//   rope(q, q, positions, params); rope(k, k, positions, params);
//   paged_cache_write(k_cache, v_cache, k, v, slots);
// with the same bits as those three calls (q and k rotated in place, the rotated k and v copied to
// their slots), on a GPU in one launch instead of three.
//   q                 [tokens, n_heads, head_dim]     rotated in place
//   k                 [tokens, n_kv_heads, head_dim]  rotated in place, then written to k_cache
//   v                 [tokens, n_kv_heads, head_dim]  written to v_cache
//   positions, slots  one per token, on the tensors' device (as rope and paged_cache_write take them)
// q has k's dtype (so one cos/sin table serves both); k, v and the caches as paged_cache_write wants.
// q, k and v are distinct tensors (e.g. slices of one fused QKV projection; not overlapping).
// Errors are rope's and paged_cache_write's, named after this op, and all come before anything is
// written (the CPU checks positions and slots on the host first). On a GPU, where positions and slots
// are not read on the host: a position outside [0, 2^24) makes its token's q and k rows NaN (a NaN k
// row still goes to its slot), a negative slot or one past the cache skips the token's cache rows.
// It lives here, not in ops.h, because it writes the paged layout this header defines, while ops.h
// (whose RopeParams and IndexView it takes) knows nothing of caches.
void rope_qk_cache_write(const TensorView& q, const TensorView& k, const TensorView& v, const IndexView& positions,
                         const RopeParams& params, const TensorView& k_cache, const TensorView& v_cache,
                         const IndexView& slots, void* stream = nullptr);

}  // namespace flashport
