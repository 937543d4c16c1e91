// The one tolerance rule of the op tests (docs/testing.md, "Tolerance"), implemented here and nowhere
// else. Every output is compared with a float64 reference; the error allowed is derived from the
// error a same-precision emulation makes: the op done naively in the input dtype, rounding where
// PyTorch's math path rounds. Two forms of that one rule:
//
//  1. Element-wise ops whose reference already rounds where the kernel rounds (norms, RoPE, SwiGLU,
//     add, embedding, GEMV/GEMM outputs): the emulation is the reference, so its error is 0 and
//     what is left is fp32 intermediates that land on the other side of a rounding boundary:
//       |out - ref| <= ulps · ulp(dtype, ref) [+ rel_f32 · |ref| for fp32 sums] [+ abs_tol]
//     per element (ulp at the larger of |out| and |ref|), with `ulps` a few, and for 16-bit outputs
//     at least MIN_EXACT_FRACTION of the elements bit-identical to the reference, up to a small
//     statistical allowance (allowed_inexact; compare(), close_enough and EXPECT_OPS_CLOSE).
//  2. Reductions over a long axis (attention: a softmax and two dot products per row): the
//     emulation's error is real, so the bound is relative to it, over all the checked rows:
//       ‖out - ref‖ / ‖ref‖ <= 2 · ‖emu - ref‖ / ‖ref‖ + floor(dtype)
//     (NormError and norm_bound). An all-zero reference (every row sees no key) must be matched
//     exactly. The attention LSE, computed in fp32 by every kernel, gets
//       |lse - ref| <= LSE_ABS_TOL + LSE_REL_TOL · |ref|.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "flashport/dtype.h"
#include "host_tensor.h"
#include "seed.h"

namespace flashport::test {

// ---- 1. element-wise: ulps against a rounding-exact reference ----

// One unit in the last place of `dtype` at |v| (its subnormal step below the normal range).
inline double ulp(DType dtype, double v) {
    const int mant = dtype == DType::F32 ? 23 : dtype == DType::F16 ? 10 : 7;
    const int min_exp = dtype == DType::F16 ? -14 : -126;
    int e = v == 0.0 ? min_exp : std::ilogb(v);
    if (e < min_exp) e = min_exp;
    return std::ldexp(1.0, e - mant);
}

// For bf16/fp16 outputs of ops whose reference rounds where the kernel rounds: at least this share of
// elements must match exactly. A kernel that skipped or moved a rounding step matches far fewer
// (~30-70% for bf16), while fp32 intermediates straddling a rounding boundary are rare (< 0.5%).
constexpr double MIN_EXACT_FRACTION = 0.97;

struct Compare {
    int64_t n = 0, exact = 0, bad = 0;
    double max_err_ulps = 0.0;
    std::string first_bad;
};

// Checks out against ref element by element: finite, and |out - ref| <= ulps · ulp(dtype, ref)
// (+ rel_tol_f32 · |ref| for fp32 outputs, + abs_tol[i]). Returns the counts; the caller asserts on
// them (EXPECT_OPS_CLOSE).
inline Compare compare(const HostTensor& out, const std::vector<double>& ref, double ulps, double rel_tol_f32 = 0.0,
                       const std::vector<double>* abs_tol = nullptr) {
    Compare c;
    c.n = out.numel();
    for (int64_t i = 0; i < c.n; ++i) {
        const double o = out.get(i), r = ref[size_t(i)];
        // ulps count rounding steps: across a power of two the step above is twice the one below, so
        // the step is the one at the larger of |out| and |ref| (-2.00195 is two f16 steps from -1.99902).
        const double u = ulp(out.view.dtype, std::isfinite(o) ? std::max(std::fabs(o), std::fabs(r)) : r);
        double tol = ulps * u + (out.view.dtype == DType::F32 ? rel_tol_f32 * std::fabs(r) : 0.0);
        if (abs_tol) tol += (*abs_tol)[size_t(i)];
        const double err = std::fabs(o - r);
        if (o == r || (std::isnan(o) && std::isnan(r))) ++c.exact;
        c.max_err_ulps = std::max(c.max_err_ulps, err / u);
        if (!std::isfinite(o) || !(err <= tol)) {
            if (c.bad++ == 0) {
                std::ostringstream os;
                os << "element " << i << ": got " << o << ", reference " << r << ", tolerance " << tol;
                c.first_bad = os.str();
            }
        }
    }
    return c;
}

// How many of n elements may differ from a rounding-exact reference when at least `min_exact` of them
// must match: straddles of a rounding boundary are rare independent events, a share 1 - min_exact at
// most on average, so the allowance is that mean plus four of its (Poisson) standard deviations plus
// 3. A case of a few hundred elements then does not fail on one unlucky straddle, while a kernel that
// moved or skipped a rounding step (30-70% of elements inexact) fails at any size. 1: all exact.
inline int64_t allowed_inexact(int64_t n, double min_exact) {
    if (min_exact >= 1.0) return 0;
    if (min_exact <= 0.0) return n;
    const double mean = (1.0 - min_exact) * double(n);
    return std::min(n, int64_t(std::floor(mean + 4.0 * std::sqrt(mean) + 3.0)));
}

// Form 1's verdict: no element beyond its tolerance, and at least `min_exact` of them bit-identical to
// `against` (MIN_EXACT_FRACTION for 16-bit outputs of rounding-exact references; 0 to skip). An
// AssertionResult, so the EXPECT that wraps it reports the caller's line.
inline ::testing::AssertionResult close_enough(const Compare& c, double min_exact,
                                               const char* against = "the rounding-exact reference") {
    const bool enough_exact = c.n - c.exact <= allowed_inexact(c.n, min_exact);
    if (c.bad == 0 && enough_exact) return ::testing::AssertionSuccess();
    ::testing::AssertionResult r = ::testing::AssertionFailure();
    if (c.bad) r << c.bad << " of " << c.n << " elements out of tolerance against " << against << "; first: " << c.first_bad << "\n";
    if (!enough_exact)
        r << "only " << c.exact << " of " << c.n << " elements match " << against << " exactly (max " << c.max_err_ulps
          << " ulps)\n";
    return r << reproduce_line();
}

#define EXPECT_OPS_CLOSE(cmp, require_exact) \
    EXPECT_TRUE(::flashport::test::close_enough((cmp), (require_exact) ? ::flashport::test::MIN_EXACT_FRACTION : 0.0))

// ---- 2. reductions: relative norm against the same-precision emulation's ----

// The floor of the bound:
//  - fp32, 2e-6: the kernel and the emulation sum in different orders (tiles, vector lanes, an exp2
//    polynomial, up to ~10 online-softmax rescalings of the accumulator); each costs a few fp32 ulps
//    (6e-8) relative, ~1e-6 in all, and in a lucky case the emulation's own error can be far smaller.
//    Still 4+ orders of magnitude below what a real bug produces.
//  - fp16, 2^-11 ≈ 4.9e-4, and bf16, 2^-8 ≈ 3.9e-3: half an ulp of the dtype, relative, i.e. the
//    rounding of the output itself, which even an exact-in-fp32 kernel carries and which the 2×
//    term alone would not cover when the emulation happens to be almost exact.
inline double default_floor(DType dtype) {
    switch (dtype) {
        case DType::F32: return 2e-6;
        case DType::F16: return 0x1.0p-11;
        case DType::BF16: return 0x1.0p-8;
    }
    return 0.0;
}

// LSE: every kernel computes it in fp32 from fp32 scores of the same (already rounded) inputs the
// reference reads, so its error is fp32 rounding of a head_dim-term dot product, an exp sum over the
// row and a log: a few 1e-6 for |LSE| of ~2 to ~15. 1e-4 absolute plus 1e-5 of |LSE| is ~30× that,
// while a real bug (a missing max, a log2/ln mix-up, a wrong scale) is O(0.1..1).
constexpr double LSE_ABS_TOL = 1e-4, LSE_REL_TOL = 1e-5;
inline double lse_tolerance(double ref) { return LSE_ABS_TOL + LSE_REL_TOL * std::abs(ref); }

// Sums of squares over the checked elements: out - ref, emulation - ref, and ref.
struct NormError {
    double num = 0.0, num_emulated = 0.0, den = 0.0;
    void add(double got, double ref, double emulated) {
        num += (got - ref) * (got - ref);
        num_emulated += (emulated - ref) * (emulated - ref);
        den += ref * ref;
    }
};

struct NormVerdict {
    double err = 0.0, err_emulated = 0.0, bound = 0.0;
    bool ok = false;
    std::string failure;  // empty when ok
};

// The rule: err <= 2 · err_emulated + floor; with an all-zero reference, err (absolute) must be 0.
inline NormVerdict norm_bound(const NormError& e, double floor) {
    NormVerdict v;
    if (e.den > 0.0) {
        v.err = std::sqrt(e.num / e.den);
        v.err_emulated = std::sqrt(e.num_emulated / e.den);
        v.bound = 2.0 * v.err_emulated + floor;
    } else {
        v.err = std::sqrt(e.num);
    }
    v.ok = v.err <= v.bound;
    if (!v.ok) {
        std::ostringstream os;
        os << "relative error " << v.err << " exceeds the bound " << v.bound
           << (e.den > 0.0 ? "" : " (an all-zero reference must be matched exactly)");
        v.failure = os.str();
    }
    return v;
}

}  // namespace flashport::test
