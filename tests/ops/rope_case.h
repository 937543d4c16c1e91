// rope (flashport/ops.h): the cases the CPU test (test_norm_rope.cpp), the GPU test
// (tests/gpu/test_gpu_ops.cpp) and the bench (bench/ops.cpp) run.
//
// Reference: transformers' rotate_half in float64 with its rounding points: inv_freq in fp32, cos and
// sin rounded to x's dtype, each product and the sum rounded. Tolerance: 2 ulps of out, 16-bit outputs
// at least 99% bit-identical (ROPE_MIN_EXACT says why); fp32 outputs also 8e-7 · (|x_i| + |x_partner|): angles up to 2^24 rad
// make cos/sin depend on the last bit of fp32 range reduction (glibc's cosf/sinf on the CPU, a double
// rounded once on the GPU), still 1000x below what a wrong frequency or a swapped half gives.
#pragma once

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "flashport/ops.h"
#include "ops/op_case.h"

namespace flashport::test {

// inv_freq as transformers computes it in fp32. powf itself is libm's, as in the kernel: at position
// p a 1-ulp change of inv_freq moves the angle by ~p·6e-8 rad (a whole radian near 2^24), so no
// independent power function can serve as the reference there.
inline float inv_freq_f32(double theta, int64_t i, int64_t head_dim) {
    const float e = float(2 * i) / float(head_dim);
    return 1.0f / std::pow(float(theta), e);
}

// x viewed as [tokens, n_heads, head_dim] (flat, row-major), one position per token.
inline std::vector<double> rope_reference(const HostTensor& x, int64_t n_heads, int64_t head_dim,
                                          const std::vector<int64_t>& pos, double theta) {
    const DType dt = x.view.dtype;
    const int64_t half = head_dim / 2, tokens = int64_t(pos.size());
    std::vector<double> ref(size_t(x.numel()));
    for (int64_t t = 0; t < tokens; ++t)
        for (int64_t i = 0; i < half; ++i) {
            const float angle = inv_freq_f32(theta, i, head_dim) * float(pos[size_t(t)]);
            const double c = round_as(dt, std::cos(double(angle))), s = round_as(dt, std::sin(double(angle)));
            for (int64_t h = 0; h < n_heads; ++h) {
                const int64_t base = (t * n_heads + h) * head_dim;
                const double x1 = x.get(base + i), x2 = x.get(base + i + half);
                ref[size_t(base + i)] = round_as(dt, round_as(dt, x1 * c) - round_as(dt, x2 * s));
                ref[size_t(base + i + half)] = round_as(dt, round_as(dt, x2 * c) + round_as(dt, x1 * s));
            }
        }
    return ref;
}

// Positions below 40000 and, every fifth token, up to 2^24 - 1; the first is 0 (the identity).
inline std::vector<int64_t> random_positions(Rng& rng, int64_t n) {
    std::vector<int64_t> pos(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) pos[size_t(i)] = i % 5 == 4 ? rng.below(1 << 24) : rng.below(40000);
    if (n > 1) pos[0] = 0;
    return pos;
}

// The one tolerance rule of RoPE: c and s computed twice (glibc's fp32 cosf and sinf on the CPU, the
// float64 cos and sin rounded once in the reference and on the GPU) and rounded to one dtype can land
// one step apart. That moves output e = x_e·c ∓ x_partner·s by up to step_c·|x_e| + step_s·|x_partner|,
// and after the two products cancel one step is many ulps of a small output. Per element of x, viewed
// as rows of head_dim; steps(row, i) gives (step_c, step_s) for frequency i of that row.
template <typename Steps>
std::vector<double> rope_step_tol(const HostTensor& x, int64_t head_dim, Steps steps) {
    std::vector<double> tol(size_t(x.numel()), 0.0);
    const int64_t half = head_dim / 2;
    for (int64_t e = 0; e < x.numel(); ++e) {
        const int64_t j = e % head_dim, partner = j < half ? e + half : e - half;
        const auto [step_c, step_s] = steps(e / head_dim, j % half);
        tol[size_t(e)] = step_c * std::fabs(x.get(e)) + step_s * std::fabs(x.get(partner));
    }
    return tol;
}

// The fp32 slack of the header, per element of x [.., head_dim] (0 for 16-bit x): a step of 8e-7
// for c and s.
inline std::vector<double> rope_abs_tol(const HostTensor& x, int64_t head_dim) {
    if (x.view.dtype != DType::F32) return std::vector<double>(size_t(x.numel()), 0.0);
    return rope_step_tol(x, head_dim, [](int64_t, int64_t) { return std::pair{8e-7, 8e-7}; });
}

// rope_reference's 16-bit slack: a step of c and of s at their own values, ulp(c) and ulp(s) in x's
// dtype (0 for fp32 x; rope_abs_tol covers fp32). The two computations land on neighbouring 16-bit
// values now and then: fresh seeds found cases beyond 1e-4 relative of a rounding midpoint.
inline std::vector<double> rope_rounding_tol(const HostTensor& x, int64_t n_heads, int64_t head_dim,
                                             const std::vector<int64_t>& pos, double theta) {
    const DType dt = x.view.dtype;
    const int64_t half = head_dim / 2;
    if (dt == DType::F32) return std::vector<double>(size_t(x.numel()), 0.0);
    auto slack = [dt](double v) { return ulp(dt, round_as(dt, v)); };
    std::vector<std::pair<double, double>> steps(pos.size() * size_t(half));  // [token][frequency]
    for (size_t t = 0; t < pos.size(); ++t)
        for (int64_t i = 0; i < half; ++i) {
            const float angle = inv_freq_f32(theta, i, head_dim) * float(pos[t]);
            steps[t * size_t(half) + size_t(i)] = {slack(std::cos(double(angle))), slack(std::sin(double(angle)))};
        }
    return rope_step_tol(x, head_dim, [&](int64_t row, int64_t i) { return steps[size_t(row / n_heads * half + i)]; });
}

// A GPU result against the CPU op's: both round their c and s to x's dtype, so one step of that dtype
// at 1 (the largest |c|, |s|) bounds the difference, fp32 included. Rare (a few elements in 10^4 for
// 16-bit types), so the callers' exact-match fraction still catches a systematic error.
inline std::vector<double> rope_cos_sin_tol(const HostTensor& x, int64_t head_dim) {
    const double step = ulp(x.view.dtype, 1.0);
    return rope_step_tol(x, head_dim, [step](int64_t, int64_t) { return std::pair{step, step}; });
}

// rope_abs_tol plus rope_rounding_tol.
inline std::vector<double> rope_extra_tol(const HostTensor& x, int64_t n_heads, int64_t head_dim,
                                                const std::vector<int64_t>& pos, double theta) {
    std::vector<double> tol = rope_abs_tol(x, head_dim);
    const std::vector<double> mid = rope_rounding_tol(x, n_heads, head_dim, pos, theta);
    for (size_t i = 0; i < tol.size(); ++i) tol[i] += mid[i];
    return tol;
}

// One c or s that rounds to the neighbouring value changes up to 2 · n_heads elements at once (every
// head of that token and frequency), so the exact share leaves room for a few such clusters; a
// kernel that rounds c, s or a product anywhere else still matches only 30-70%.
constexpr double ROPE_MIN_EXACT = 0.99;

// x, out [tokens, n_heads, head_dim], rows padded by `pad`; int64 positions when `wide`.
inline OpCase rope_case(DType dt, int64_t tokens, int64_t n_heads, int64_t head_dim, double theta, int64_t pad,
                        bool wide) {
    OpCase c;
    c.op = "rope";
    c.name = std::to_string(tokens) + "x" + std::to_string(n_heads) + "x" + std::to_string(head_dim) + "_theta" +
             std::to_string(int64_t(theta)) + "_pad" + std::to_string(pad) + (wide ? "_i64" : "_i32");
    c.dtype = dt;
    c.params = "{\"tokens\": " + std::to_string(tokens) + ", \"n_heads\": " + std::to_string(n_heads) +
               ", \"head_dim\": " + std::to_string(head_dim) + ", \"theta\": " + std::to_string(theta) + "}";
    const int64_t n = tokens * n_heads * head_dim;
    c.bytes = double(2 * n) * double(dtype_size(dt)) + double(tokens) * (wide ? 8 : 4);
    c.flops = double(3 * n);
    c.make = [=](Rng& rng) {
        OpData d;
        HostTensor& x = d.add(dt, {tokens, n_heads, head_dim}, pad);
        x.fill_normal(rng);
        d.add(dt, {tokens, n_heads, head_dim}, pad);
        d.outputs = {1};
        d.set_index(random_positions(rng, tokens), wide);
        d.ref = {rope_reference(x, n_heads, head_dim, d.index, theta)};
        const std::vector<double> extra = rope_extra_tol(x, n_heads, head_dim, d.index, theta);
        d.tol = {ulp_tolerance(d.ref[0], dt, 2.0, 0.0, &extra)};
        d.min_exact = ROPE_MIN_EXACT;
        return d;
    };
    c.run = [theta](const OpViews& v, void* stream) {
        rope(v.t[1], v.t[0], v.index, {theta, 0}, stream);
        return std::string("rope");
    };
    return c;
}

// Odd head dims (2, 6, 34), Qwen's (64, 128), one head to 14, decode to prefill token counts.
inline std::vector<OpCase> rope_cases(DType dt) {
    struct Shape {
        int64_t tokens, n_heads, head_dim;
        double theta;
    };
    std::vector<OpCase> cases;
    int i = 0;
    for (const Shape& s : {Shape{7, 3, 34, 10000.0}, Shape{1, 14, 64, 1000000.0}, Shape{5, 2, 128, 1000000.0},
                           Shape{3, 1, 2, 10000.0}, Shape{11, 5, 6, 500.0}, Shape{97, 3, 40, 10000.0},
                           Shape{1025, 2, 128, 1000000.0}, Shape{1023, 14, 64, 1000000.0}})
        for (int64_t pad : {0, 5})
            cases.push_back(rope_case(dt, s.tokens, s.n_heads, s.head_dim, s.theta, pad, ++i % 2));
    return cases;
}

}  // namespace flashport::test
