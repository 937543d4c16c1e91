// One `linear` call (flashport/linear.h) with fresh random inputs, and its check against a float64
// evaluation of the whole chain (norm, product, residual add or SwiGLU), shared by the CPU test
// (test_linear.cpp) and the GPU one (tests/gpu/test_linear_gpu.cpp).
//
// Tolerance, per output element, from the rounding points the op has (u = one unit of the dtype
// relative: 2^-8 bf16, 2^-11 fp16, 2^-24 fp32):
//   h = round(gamma · round(x · inv))          |Δh_i| <= 2u |h_i|
//   y = round(Σ h_i w_i + b)                   |Δy| <= 2u Σ|h_i w_i| + 1e-5 Σ|h_i w_i| (fp32 sums) + u |y|
//   residual: out = round(r + y)               |Δout| <= |Δy| + u |out|
//   swiglu: out = round(round(silu(g)) · v)    |Δout| <= 1.1 |Δg| |v| + |silu(g)| |Δv| + 2u |out|
// (|silu'| < 1.1), and 1.5 times that bound is allowed. A misplaced rounding point or a wrong row
// pairing is off by far more.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "flashport/linear.h"
#include "ops/ops_test_util.h"

namespace flashport::test {

struct LinearCase {
    int64_t tokens, in, rows;  // rows of the weight (with swiglu: gate rows + up rows)
    bool norm, bias, residual, swiglu;

    int64_t cols() const { return swiglu ? rows / 2 : rows; }
    std::string name() const {
        std::ostringstream s;
        s << tokens << "x" << in << "->" << rows << (norm ? " norm" : "") << (bias ? " bias" : "")
          << (residual ? " residual" : "") << (swiglu ? " swiglu" : "");
        return s.str();
    }
};

// The inputs of one case, filled from rng (out poisoned: NaN everywhere, padding included).
struct LinearInputs {
    std::unique_ptr<HostTensor> x, w, b, gamma, residual, out;
};

inline LinearInputs make_linear_inputs(const LinearCase& c, DType dt, Rng& rng) {
    LinearInputs in;
    in.x = std::make_unique<HostTensor>(dt, std::vector<int64_t>{c.tokens, c.in});
    in.w = std::make_unique<HostTensor>(dt, std::vector<int64_t>{c.rows, c.in});
    in.b = std::make_unique<HostTensor>(dt, std::vector<int64_t>{c.rows});
    in.gamma = std::make_unique<HostTensor>(dt, std::vector<int64_t>{c.in});
    in.residual = std::make_unique<HostTensor>(dt, std::vector<int64_t>{c.tokens, c.cols()});
    in.out = std::make_unique<HostTensor>(dt, std::vector<int64_t>{c.tokens, c.cols()});
    in.x->fill_normal(rng, 2.0, 0.3);  // not unit scale, so the norm matters
    in.w->fill_normal(rng, 1.0 / std::sqrt(double(std::max<int64_t>(c.in, 1))));
    in.b->fill_normal(rng, 0.1);
    in.gamma->fill_normal(rng, 0.2, 1.0);
    in.residual->fill_normal(rng);
    return in;
}

inline LinearParams params_for(const LinearCase& c, const TensorView* b, const TensorView* gamma,
                               const TensorView* residual) {
    LinearParams p;
    p.bias = c.bias ? b : nullptr;
    p.norm_weight = c.norm ? gamma : nullptr;
    p.eps = 1e-6f;
    p.residual = c.residual ? residual : nullptr;
    p.swiglu = c.swiglu;
    return p;
}

// `got` (the op's out) against the float64 chain; `residual` is the residual's value before the call
// (the op may have overwritten it in place). Returns the number of elements out of tolerance; `tols`
// (when given) receives each element's tolerance, in out's row-major order.
inline int64_t check_linear(const LinearCase& c, const LinearInputs& in, const HostTensor& got,
                            const std::vector<double>& residual, std::vector<double>* tols = nullptr) {
    if (tols) tols->clear();
    const DType dt = got.view.dtype;
    const double u = dt == DType::F32 ? 0x1.0p-24 : dt == DType::F16 ? 0x1.0p-11 : 0x1.0p-8;
    int64_t bad = 0;
    std::vector<double> h(size_t(c.in));
    for (int64_t t = 0; t < c.tokens; ++t) {
        double inv = 1.0;
        if (c.norm) {
            double ss = 0.0;
            for (int64_t k = 0; k < c.in; ++k) ss += in.x->get(t * c.in + k) * in.x->get(t * c.in + k);
            inv = 1.0 / std::sqrt(ss / double(c.in) + 1e-6);
        }
        for (int64_t k = 0; k < c.in; ++k)
            h[size_t(k)] = in.x->get(t * c.in + k) * inv * (c.norm ? in.gamma->get(k) : 1.0);
        // y and its error bound for row n.
        const auto product = [&](int64_t n, double& err) {
            double y = c.bias ? in.b->get(n) : 0.0, mag = 0.0;
            for (int64_t k = 0; k < c.in; ++k) {
                const double p = h[size_t(k)] * in.w->get(n * c.in + k);
                y += p;
                mag += std::fabs(p);
            }
            err = (c.norm ? 2 * u : 0.0) * mag + 1e-5 * mag + u * std::fabs(y);
            return y;
        };
        for (int64_t n = 0; n < c.cols(); ++n) {
            double ref, err;
            if (c.swiglu) {
                double eg, ev;
                const double g = product(n, eg), v = product(n + c.cols(), ev);
                const double silu = g / (1.0 + std::exp(-g));
                ref = silu * v;
                err = 1.1 * eg * std::fabs(v) + std::fabs(silu) * ev + 2 * u * std::fabs(ref);
            } else {
                ref = product(n, err);
                if (c.residual) {
                    ref += residual[size_t(t * c.cols() + n)];
                    err += u * std::fabs(ref);
                }
            }
            const double value = got.get(t * c.cols() + n), tol = 1.5 * err + 1e-30;
            if (tols) tols->push_back(tol);
            if (!(std::fabs(value - ref) <= tol) && bad++ == 0)
                ADD_FAILURE() << c.name() << " " << short_name(dt) << ": out[" << t << ", " << n << "] = " << value
                              << ", float64 reference " << ref << ", tolerance " << tol;
        }
    }
    return bad;
}

// The sizes every backend runs: lengths 1 and 7 tokens, odd in and rows, Qwen-like shapes (a 7B
// k/v slice, a long down_proj row), each with every fusion.
inline std::vector<LinearCase> linear_cases() {
    std::vector<LinearCase> cases;
    for (int64_t tokens : {1, 7})
        for (auto [in, rows] : {std::pair<int64_t, int64_t>{64, 98}, {40, 2}, {896, 136}, {3584, 512}, {18944, 10}})
            for (int f = 0; f < 6; ++f) {
                // none; norm; bias + residual; norm + bias; norm + swiglu; swiglu + bias
                const bool norm = f == 1 || f == 3 || f == 4, bias = f == 2 || f == 3 || f == 5;
                const bool residual = f == 2, swiglu = f == 4 || f == 5;
                cases.push_back({tokens, in, rows, norm, bias, residual, swiglu});
            }
    return cases;
}

}  // namespace flashport::test
