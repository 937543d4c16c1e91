// Paged-KV attention on the CPU (flashport/paged_attention.h): the path the engine runs on the CPU.
// Its float64 reference is the dense one (cpu::reference_row) on each sequence's keys and values: the
// tests (tests/ops/paged_attention_harness.h) keep dense copies of what they write into the cache, so
// the truth does not go through the block table the kernels under test read.
#pragma once

#include <cstdint>
#include <string>

#include "flashport/ops.h"
#include "flashport/paged_attention.h"

namespace flashport::cpu {

// Runs a plan from plan_paged_attention on CPU tensors: each sequence's keys and values are gathered
// through the block table into a dense [1, seq_len, n_kv_heads, head_dim] copy (tracked allocator),
// then the dense CPU flash kernel runs. Throws on an out-of-range block id or seq_len.
void paged_attention(const PagedAttentionPlan& plan, const TensorView& out, const TensorView& q,
                     const PagedKVCache& kv, const TensorView* lse);

// The decode path (paged_attention_decode.cpp): up to PAGED_DECODE_MAX_Q_LEN query tokens, the keys
// and values read in their pages (no gather), sequences' pages sliced over threads and merged.
// Same contract and checks as paged_attention above. FLASHPORT_CPU_PAGED=gather sends decode through
// the gather path too (A/B runs).
bool paged_attention_decode_serves(const PagedAttentionPlan& plan);
std::string paged_attention_decode_name();  // "cpu.paged_attention.decode.avx512"
void paged_attention_decode(const PagedAttentionPlan& plan, const TensorView& out, const TensorView& q,
                            const PagedKVCache& kv, const TensorView* lse);

// seq_lens[b], checked against the table's capacity; and the first `pages` block ids of sequence b,
// checked against the pool. Both throw flashport::Error naming the entry.
int64_t checked_seq_len(const PagedAttentionPlan& plan, const PagedKVCache& kv, int64_t b);
void check_block_ids(const PagedAttentionPlan& plan, const PagedKVCache& kv, int64_t b, int64_t pages);

// paged_cache_write (flashport/paged_cache.h) on CPU tensors, validated by the op (slots included:
// ops_detail::check_paged_cache_write); a negative slot skips its token.
void paged_cache_write(const TensorView& k_cache, const TensorView& v_cache, const TensorView& k, const TensorView& v,
                       const IndexView& slots);

}  // namespace flashport::cpu
