// Variable-length attention: a batch of sequences of different lengths packed along one token axis
// with no padding, FlashAttention's varlen API (flash_attn_varlen_func).
//
//   q    [total_q, n_heads,    head_dim]   sequence b's queries are rows cu_seqlens_q[b] .. cu_seqlens_q[b+1]
//   k,v  [total_k, n_kv_heads, head_dim]   its keys and values rows cu_seqlens_k[b] .. cu_seqlens_k[b+1]
//   out  like q (same dtype);  lse  fp32 [n_heads, total_q], optional (natural log)
//
// Each sequence is an independent dense attention (flashport/attention.h) with its own q_len and kv_len:
// the same masking rules (causal bottom-right aligned within the sequence, left window), GQA, scale and
// implementations. Rows of q that no sequence claims are not written.
//
// Rules for the offsets (int32 [batch + 1], on the tensors' device):
//   0 <= cu[0] <= cu[1] <= ... <= cu[batch] <= total, for q and for k; and every query length is at
//   most max_seqlen_q, which sizes the GPU grid (as in FlashAttention).
//   On the CPU they are read on the host and a broken rule throws. On a GPU the call never reads them on
//   the host (that would synchronise): the kernel checks them, and every row a broken sequence claims
//   (all heads) becomes NaN, so the mistake cannot pass as output; other sequences are unaffected.
// GPU: the flash kernel only (fp16/bf16, its head dims, 16-byte aligned rows), asynchronous on `stream`,
// no allocation or synchronisation, so it can be captured in a CUDA/HIP graph. A few queries per
// sequence against long histories (max_seqlen_q <= 8, total_k >= 256 keys per sequence on average,
// head dim 64/128/256, no window; a server's decode step) go to split-KV instead (gpu.flash.split_kv.…
// .varlen): the paged decode kernels read the packed keys in place and split each sequence's keys over
// the SMs; they take a small stream-ordered allocation (freed on the stream) for a per-sequence table
// and the splits' partials, and check the offsets in the same way.
#pragma once

#include <cstdint>

#include "flashport/attention.h"

namespace flashport {

struct VarlenSeqs {
    const int32_t* cu_seqlens_q = nullptr;  // [batch + 1]
    const int32_t* cu_seqlens_k = nullptr;  // [batch + 1]
    int64_t batch = 0;
    int64_t max_seqlen_q = 0;  // >= every cu_seqlens_q[b + 1] - cu_seqlens_q[b]
    // Optional: the longest key count, or 0 when unknown (then total_k stands in). Only split-KV reads
    // it, to size its split count; a wrong value costs speed, never correctness.
    int64_t max_seqlen_k = 0;
};

// Validates the request and picks the kernel. The plan's shape has batch = seqs.batch,
// q_len = max_seqlen_q and kv_len = total_k. Throws flashport::Error naming the broken limit.
AttentionPlan plan_attention_varlen(const TensorView& out, const TensorView& q, const TensorView& k,
                                    const TensorView& v, const VarlenSeqs& seqs, const TensorView* lse = nullptr,
                                    const AttentionParams& params = {});

// Plans and runs. `stream` is the GPU stream (ignored on the CPU).
AttentionPlan attention_varlen(const TensorView& out, const TensorView& q, const TensorView& k, const TensorView& v,
                               const VarlenSeqs& seqs, const TensorView* lse = nullptr,
                               const AttentionParams& params = {}, void* stream = nullptr);

}  // namespace flashport
