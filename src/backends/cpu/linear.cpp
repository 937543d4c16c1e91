// linear's float64 reference (backends/cpu/linear.h). The CPU op itself is the composition of the
// CPU rms_norm, matmul and add / swiglu kernels (src/ops/linear.cpp); this file is what they are
// judged against.
#include "backends/cpu/linear.h"

#include <cmath>

#include "flashport/dtype.h"

namespace flashport::cpu {
namespace {

// Element [i, j] of a 2-D host view (or [j] of a 1-D one, i = 0) as a double.
double at(const TensorView& t, int64_t i, int64_t j) {
    const int64_t off = t.ndim == 1 ? j * t.stride[0] : i * t.stride[0] + j * t.stride[1];
    return double(load_as_float(static_cast<const char*>(t.data) + off * int64_t(dtype_size(t.dtype)), t.dtype));
}

}  // namespace

LinearReference linear_reference(const TensorView& x, const TensorView& weight, const LinearParams& p, double u) {
    const int64_t tokens = x.dim(0), in = x.dim(1), rows = weight.dim(0);
    const int64_t cols = p.swiglu ? rows / 2 : rows;
    LinearReference ref;
    ref.out.reserve(size_t(tokens * cols));
    ref.bound.reserve(size_t(tokens * cols));
    std::vector<double> h(static_cast<size_t>(in));  // [in]: this token's normalised x
    for (int64_t t = 0; t < tokens; ++t) {
        double inv = 1.0;
        if (p.norm_weight) {
            double ss = 0.0;
            for (int64_t k = 0; k < in; ++k) ss += at(x, t, k) * at(x, t, k);
            inv = 1.0 / std::sqrt(ss / double(in) + double(p.eps));
        }
        for (int64_t k = 0; k < in; ++k)
            h[size_t(k)] = at(x, t, k) * inv * (p.norm_weight ? at(*p.norm_weight, 0, k) : 1.0);
        // y of weight row n, and its error bound.
        const auto product = [&](int64_t n, double& err) {
            double y = p.bias ? at(*p.bias, 0, n) : 0.0, mag = 0.0;
            for (int64_t k = 0; k < in; ++k) {
                const double hw = h[size_t(k)] * at(weight, n, k);
                y += hw;
                mag += std::fabs(hw);
            }
            err = (p.norm_weight ? 2 * u : 0.0) * mag + 1e-5 * mag + u * std::fabs(y);
            return y;
        };
        for (int64_t n = 0; n < cols; ++n) {
            double out, err;
            if (p.swiglu) {
                double eg, ev;
                const double g = product(n, eg), v = product(n + cols, ev);
                const double silu = g / (1.0 + std::exp(-g));
                out = silu * v;
                err = 1.1 * eg * std::fabs(v) + std::fabs(silu) * ev + 2 * u * std::fabs(out);
            } else {
                out = product(n, err);
                if (p.residual) {
                    out += at(*p.residual, t, n);
                    err += u * std::fabs(out);
                }
            }
            ref.out.push_back(out);
            ref.bound.push_back(err);
        }
    }
    return ref;
}

}  // namespace flashport::cpu
