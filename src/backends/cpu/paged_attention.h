// Paged-KV attention on the CPU (flashport/paged_attention.h): the path the engine runs on the CPU.
// Its float64 reference is the dense one (cpu::reference_row) on each sequence's keys and values: the
// tests (tests/ops/paged_attention_harness.h) keep dense copies of what they write into the cache, so
// the truth does not go through the block table the kernels under test read.
#pragma once

#include <cstdint>

#include "flashport/ops.h"
#include "flashport/paged_attention.h"

namespace flashport::cpu {

// Runs a plan from plan_paged_attention on CPU tensors: each sequence's keys and values are gathered
// through the block table into a dense [1, seq_len, n_kv_heads, head_dim] copy (tracked allocator),
// then the dense CPU flash kernel runs. Throws on an out-of-range block id or seq_len.
void paged_attention(const PagedAttentionPlan& plan, const TensorView& out, const TensorView& q,
                     const PagedKVCache& kv, const TensorView* lse);

// paged_cache_write (flashport/paged_cache.h) on CPU tensors, validated by the op (slots included:
// ops_detail::check_paged_cache_write); a negative slot skips its token.
void paged_cache_write(const TensorView& k_cache, const TensorView& v_cache, const TensorView& k, const TensorView& v,
                       const IndexView& slots);

}  // namespace flashport::cpu
