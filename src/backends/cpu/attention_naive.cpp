// CPU naive attention, the baseline: exactly BMM -> softmax -> BMM with the whole
// [batch, n_heads, q_len, kv_len] score matrix in memory, as PyTorch's math path does. The two
// BMMs are OpenBLAS sgemm calls and the softmax uses the same vectorised exp2 as flash, so the
// comparison is against a fair baseline, not a slow loop.
#include <omp.h>

#include <cmath>
#include <limits>

#include "backends/cpu/attention_cpu.h"
#include "backends/cpu/attention_packing.h"
#include "backends/cpu/blas.h"
#include "backends/cpu/kernels/tile_kernels.h"
#include "flashport/error.h"
#include "flashport/memory.h"

namespace flashport::cpu {
namespace {

// An fp32 [batch, heads, len, head_dim] operand for sgemm: the caller's tensor itself when it is
// already fp32 with unit head_dim stride, else a converted copy (as a math-path upcast would make).
struct Operand {
    Buffer copy;
    const float* base = nullptr;
    int64_t stride_b = 0, stride_h = 0, ld = 0;  // in floats; ld is the row (position) pitch

    const float* at(int64_t b, int64_t h) const { return base + b * stride_b + h * stride_h; }
};

Operand as_fp32(const TensorView& t) {
    Operand op;
    const int64_t batch = t.shape[0], len = t.shape[1], heads = t.shape[2], head_dim = t.shape[3];
    if (t.dtype == DType::F32 && t.stride[3] == 1 && t.stride[1] >= head_dim && t.stride[1] <= INT32_MAX) {
        op.base = static_cast<const float*>(t.data);
        op.stride_b = t.stride[0], op.stride_h = t.stride[2], op.ld = t.stride[1];
        return op;
    }
    op.copy = Buffer(sizeof(float) * size_t(batch * heads * len * head_dim));
    float* dst = op.copy.as<float>();
#pragma omp parallel for collapse(2)
    for (int64_t b = 0; b < batch; ++b)
        for (int64_t h = 0; h < heads; ++h) load_rows(dst + (b * heads + h) * len * head_dim, head_dim, t, b, 0, len, h, 1.0f);
    op.base = dst;
    op.stride_b = heads * len * head_dim, op.stride_h = len * head_dim, op.ld = head_dim;
    return op;
}

}  // namespace

void attention_naive(const AttentionPlan& plan, const TensorView& out, const TensorView& q, const TensorView& k,
                     const TensorView& v, const TensorView* lse) {
    const AttentionShape& s = plan.shape;
    if (s.batch == 0 || s.q_len == 0 || s.n_heads == 0) return;
    const Blas& blas = cpu::blas();
    const TileKernels& kern = tile_kernels();
    const int64_t group = s.n_heads / s.n_kv_heads;
    const int64_t D = s.head_dim;
    // Rows padded to the vector width so the softmax kernel has no tail; padding is masked out.
    const int64_t ldp = round_up(std::max<int64_t>(s.kv_len, 1), kern.vec);
    const int64_t bh = s.batch * s.n_heads;
    FP_CHECK(s.q_len <= INT32_MAX && ldp <= INT32_MAX, "naive attention on the CPU: q_len (", s.q_len, ") and kv_len (",
             s.kv_len, ") must fit BLAS's 32-bit sizes; use the flash implementation");

    const Operand Q = as_fp32(q), K = as_fp32(k), V = as_fp32(v);
    Buffer scores(sizeof(float) * size_t(bh * s.q_len * ldp));  // the N×N matrix flash avoids
    Buffer o32(sizeof(float) * size_t(bh * s.q_len * D));
    float* S = scores.as<float>();

    // BMM 1: S = (scale · log2 e) · Q Kᵀ, in log2 units for the exp2-based softmax.
    for (int64_t b = 0; b < s.batch; ++b)
        for (int64_t h = 0; h < s.n_heads; ++h) {
            float* s_bh = S + (b * s.n_heads + h) * s.q_len * ldp;
            if (s.kv_len > 0)
                blas.sgemm(true, int(s.q_len), int(s.kv_len), int(D), plan.params.scale * LOG2E, Q.at(b, h), int(Q.ld),
                           K.at(b, h / group), int(K.ld), 0.0f, s_bh, int(ldp));
        }

    // Softmax over each row, masked by the same visible_keys rule as every other implementation.
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < bh * s.q_len; ++row) {
        const int64_t i = row % s.q_len, head = (row / s.q_len) % s.n_heads, b = row / (s.q_len * s.n_heads);
        float* p = S + row * ldp;
        const KeyRange keys = visible_keys(i, s.q_len, s.kv_len, plan.params.causal, plan.params.window_left);
        for (int64_t j = 0; j < ldp; ++j)
            if (j < keys.lo || j >= keys.hi) p[j] = -std::numeric_limits<float>::infinity();
        float m = -std::numeric_limits<float>::infinity(), l = 0.0f, alpha;
        kern.softmax_step(p, ldp, 1, int(ldp), &m, &l, &alpha);
        if (std::isnan(l))  // a NaN score: the whole row is NaN, as PyTorch's softmax makes it
            std::fill(p, p + ldp, std::numeric_limits<float>::quiet_NaN());
        else if (l > 0.0f)
            kern.scale(p, ldp, 1.0f / l);
        if (lse)  // l = 0: no key seen; a NaN l gives a NaN LSE
            *static_cast<float*>(lse->at(b, head, i)) =
                l == 0.0f ? -std::numeric_limits<float>::infinity() : (m + std::log2(l)) * LN2;
    }

    // BMM 2: O = P V.
    float* O = o32.as<float>();
    for (int64_t b = 0; b < s.batch; ++b)
        for (int64_t h = 0; h < s.n_heads; ++h) {
            float* o_bh = O + (b * s.n_heads + h) * s.q_len * D;
            const float* p_bh = S + (b * s.n_heads + h) * s.q_len * ldp;
            if (s.kv_len > 0)
                blas.sgemm(false, int(s.q_len), int(D), int(s.kv_len), 1.0f, p_bh, int(ldp), V.at(b, h / group),
                           int(V.ld), 0.0f, o_bh, int(D));
            else
                std::fill(o_bh, o_bh + s.q_len * D, 0.0f);
        }

#pragma omp parallel for collapse(2)
    for (int64_t b = 0; b < s.batch; ++b)
        for (int64_t i = 0; i < s.q_len; ++i)
            for (int64_t h = 0; h < s.n_heads; ++h) {
                const float* o = O + ((b * s.n_heads + h) * s.q_len + i) * D;
                for (int64_t d = 0; d < D; ++d) store_from_float(out.at(b, i, h, d), out.dtype, o[d]);
            }
}

}  // namespace flashport::cpu
