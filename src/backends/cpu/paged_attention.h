// Paged-KV attention on the CPU (flashport/paged_attention.h): the float64 reference that the GPU
// decode kernel is tested against, and the path the engine runs on the CPU.
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

// The float64 reference for sequence b, through cpu::reference_row on the gathered keys and values:
// out_rows [q_len][n_heads][head_dim] and lse [n_heads][q_len] (may be null). Reads CPU tensors.
void paged_reference_sequence(const PagedAttentionPlan& plan, const TensorView& q, const PagedKVCache& kv,
                              int64_t b, double* out_rows, double* lse);

// paged_cache_write (flashport/paged_cache.h) on CPU tensors, validated by the op (slots included:
// ops_detail::check_paged_cache_write); a negative slot skips its token.
void paged_cache_write(const TensorView& k_cache, const TensorView& v_cache, const TensorView& k, const TensorView& v,
                       const IndexView& slots);

}  // namespace flashport::cpu
