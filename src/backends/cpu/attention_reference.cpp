// The float64 attention reference: plain loops, one query row at a time. Every other kernel is
// tested against it, and `bench` samples rows of it for its error column.
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/attention_cpu.h"

namespace flashport::cpu {

void reference_row(const AttentionPlan& plan, const TensorView& q, const TensorView& k, const TensorView& v,
                   int64_t b, int64_t h, int64_t i, double* out_row, double* lse) {
    const AttentionShape& s = plan.shape;
    const int64_t kvh = h / (s.n_heads / s.n_kv_heads);  // the KV head this query head shares
    const KeyRange keys = visible_keys(i, s.q_len, s.kv_len, plan.params.causal, plan.params.window_left);

    for (int64_t d = 0; d < s.head_dim; ++d) out_row[d] = 0.0;
    if (keys.lo >= keys.hi) {  // sees no key: zeros and an LSE of -inf
        if (lse) *lse = -std::numeric_limits<double>::infinity();
        return;
    }

    // scores[j] = scale * q_i . k_j  over visible keys j
    std::vector<double> scores(size_t(keys.hi - keys.lo));
    double max_score = -std::numeric_limits<double>::infinity();
    for (int64_t j = keys.lo; j < keys.hi; ++j) {
        double dot = 0.0;
        for (int64_t d = 0; d < s.head_dim; ++d)
            dot += double(load_as_float(q.at(b, i, h, d), q.dtype)) * double(load_as_float(k.at(b, j, kvh, d), k.dtype));
        scores[size_t(j - keys.lo)] = double(plan.params.scale) * dot;
        max_score = std::max(max_score, scores[size_t(j - keys.lo)]);
    }
    // softmax, then out_i = sum_j p_j v_j
    double sum = 0.0;
    for (double& x : scores) sum += (x = std::exp(x - max_score));
    for (int64_t j = keys.lo; j < keys.hi; ++j) {
        const double p = scores[size_t(j - keys.lo)] / sum;
        for (int64_t d = 0; d < s.head_dim; ++d) out_row[d] += p * double(load_as_float(v.at(b, j, kvh, d), v.dtype));
    }
    if (lse) *lse = max_score + std::log(sum);
}

}  // namespace flashport::cpu
