// The CPU attention backend: a float64 reference (the truth every kernel is tested against), the
// naive BLAS baseline and the tiled flash kernel.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "flashport/attention.h"

namespace flashport::cpu {

// Name of the flash kernel this machine runs, e.g. "cpu.flash.avx512".
std::string flash_kernel_name();

// Both take a plan from plan_attention (validated, scale resolved).
void attention_naive(const AttentionPlan& plan, const TensorView& out, const TensorView& q, const TensorView& k,
                     const TensorView& v, const TensorView* lse);
void attention_flash(const AttentionPlan& plan, const TensorView& out, const TensorView& q, const TensorView& k,
                     const TensorView& v, const TensorView* lse);

// The range of keys [lo, hi) that query position i sees (bottom-right aligned causal, optional
// left window). lo >= hi means the row sees no key. Shared by every CPU implementation so the
// masking rule lives in one place.
struct KeyRange {
    int64_t lo, hi;
};
inline KeyRange visible_keys(int64_t i, int64_t q_len, int64_t kv_len, bool causal, int64_t window_left) {
    const int64_t diag = i + (kv_len - q_len);  // the key aligned with query i
    int64_t hi = causal ? std::min<int64_t>(kv_len, diag + 1) : kv_len;
    int64_t lo = window_left >= 0 ? std::max<int64_t>(0, diag - window_left) : 0;
    if (hi < 0) hi = 0;
    return {lo, hi};
}

// The float64 reference for one query row of one head: out_row[head_dim] and the row's LSE
// (natural log; -inf when it sees no key). Reads CPU q, k, v of any dtype through their strides.
void reference_row(const AttentionPlan& plan, const TensorView& q, const TensorView& k, const TensorView& v,
                   int64_t b, int64_t h, int64_t i, double* out_row, double* lse);

}  // namespace flashport::cpu
