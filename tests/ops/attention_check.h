// The core the attention harnesses share (op_harness.cpp for dense attention, paged_attention_harness.h,
// varlen_harness.h): the naive same-precision emulation the error bound is relative to, and the
// checks each output row goes through, tallied into one CaseResult (op_harness.h) by the tolerance
// rule of tests/support/tolerance.h.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "flashport/device.h"
#include "flashport/dtype.h"
#include "flashport/memory.h"
#include "op_harness.h"
#include "support/poison.h"
#include "support/tolerance.h"

namespace flashport::test {

// The "naive same-precision" emulation of one query row, PyTorch's math path in the input dtype:
// S = scale · q kᵀ accumulated in fp32 and rounded to the dtype; P = softmax(S) in fp32, rounded;
// O = P v accumulated in fp32, rounded. For fp32 inputs it is simply a plain fp32 implementation.
// Shapes: q [D]; k, v [keys][n_kv][D] (dense floats); the row sees keys [lo, hi) of head kvh; out [D].
inline void emulate_row(DType dt, float scale, const float* q, const float* k, const float* v, int64_t kvh,
                        int64_t n_kv, int64_t D, int64_t lo, int64_t hi, double* out) {
    std::fill(out, out + D, 0.0);
    if (hi <= lo) return;
    std::vector<float> p(size_t(hi - lo));
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t j = lo; j < hi; ++j) {
        const float* kr = &k[(j * n_kv + kvh) * D];
        float acc = 0.0f;
        for (int64_t d = 0; d < D; ++d) acc += q[d] * kr[d];
        p[size_t(j - lo)] = round_to(dt, acc * scale);
        m = std::max(m, p[size_t(j - lo)]);
    }
    float l = 0.0f;
    for (float& x : p) l += (x = std::exp(x - m));
    for (float& x : p) x = round_to(dt, x / l);
    std::vector<float> o(size_t(D), 0.0f);
    for (int64_t j = lo; j < hi; ++j)
        for (int64_t d = 0; d < D; ++d) o[size_t(d)] += p[size_t(j - lo)] * v[(j * n_kv + kvh) * D + d];
    for (int64_t d = 0; d < D; ++d) out[d] = round_to(dt, o[size_t(d)]);
}

inline std::string fmt_double(double x) {  // "%.3g": failures and summaries print 3 digits
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", x);
    return buf;
}

// Where a harness's host buffer lives for the op: on the CPU the buffer itself, else a device copy
// held by `buf` (at least 16 bytes, so an empty tensor still has an address).
inline void* place_on(Device dev, const void* host, size_t bytes, Buffer& buf) {
    if (dev.is_cpu()) return const_cast<void*>(host);
    buf = Buffer(std::max<size_t>(bytes, 16), dev);
    if (bytes) copy_bytes(buf.data(), dev, host, Device::cpu(), bytes);
    return buf.data();
}

// How failures name a query row: "(b 0, i 5, h 3)".
inline std::string row_name(int64_t b, int64_t i, int64_t h) {
    return "(b " + std::to_string(b) + ", i " + std::to_string(i) + ", h " + std::to_string(h) + ")";
}

// The checks of every output row, in two parts because the dense harness samples the rows it compares
// with the (costly) reference but checks every row's values:
//   check_row:   each element finite; a row that sees no key exactly 0 with an LSE of -inf, any other
//                row a finite LSE.
//   compare_row: the error against the float64 reference and the emulation (NormError), and the
//                LSE's error. With a planted NaN (nan_case), NaN must be exactly where the reference
//                has it, in the output and the LSE, and rows the reference makes NaN are left out of
//                the error; only element `nan_ok_d` may be NaN where the reference is not (a masked
//                key's NaN value reaching the row as 0 · NaN, as in PyTorch's math path).
// `got(d)` reads the output's element d as float; `lse_got` is null when no LSE was requested;
// `where()` names the row for the first failure of each kind.
struct RowTally {
    bool nan_case = false;
    NormError norm;
    double lse_worst = 0.0, lse_max_err = 0.0, lse_tol = 0.0;  // worst |err| / tol, and that error
    int64_t non_finite = 0, nonzero_masked = 0, bad_lse = 0, nan_mismatch = 0;
    std::string first_non_finite, first_nonzero_masked, first_bad_lse, first_nan_mismatch;

    template <typename Got, typename Where>
    void check_row(Got got, int64_t D, bool sees_none, const float* lse_got, Where where) {
        for (int64_t d = 0; d < D; ++d) {
            const float x = got(d);
            if (!nan_case && !std::isfinite(x) && non_finite++ == 0) first_non_finite = where() + " d " + std::to_string(d);
            if (sees_none && x != 0.0f && std::isfinite(x) && nonzero_masked++ == 0)
                first_nonzero_masked = where() + " = " + fmt_double(x);
        }
        if (!lse_got) return;
        const float l = *lse_got;
        const bool good = sees_none ? (std::isinf(l) && l < 0) : nan_case || std::isfinite(l);
        if (!good && bad_lse++ == 0)
            first_bad_lse = where() + " = " + fmt_double(double(l)) + (sees_none ? " (sees no key: want -inf)" : " (want finite)");
    }

    template <typename Got, typename Where>
    void compare_row(Got got, const double* ref, const double* emu, int64_t D, const float* lse_got, double lse_ref,
                     int64_t nan_ok_d, Where where) {
        if (nan_case) {
            bool ref_nan = std::isnan(lse_ref);
            for (int64_t d = 0; d < D; ++d) {
                const float x = got(d);
                ref_nan |= std::isnan(ref[d]);
                if (d == nan_ok_d && std::isnan(x)) {
                    ref_nan = true;  // tolerated, and left out of the error
                    continue;
                }
                if ((std::isnan(x) != std::isnan(ref[d]) || std::isinf(x)) && nan_mismatch++ == 0)
                    first_nan_mismatch = where() + " d " + std::to_string(d) + " = " + fmt_double(x) + ", reference " +
                                         fmt_double(ref[d]);
            }
            if (lse_got && std::isnan(*lse_got) != std::isnan(lse_ref) && nan_mismatch++ == 0)
                first_nan_mismatch = "LSE " + where() + " = " + fmt_double(*lse_got) + ", reference " + fmt_double(lse_ref);
            if (ref_nan) return;
        }
        for (int64_t d = 0; d < D; ++d) norm.add(got(d), ref[d], emu[d]);
        if (lse_got && std::isfinite(lse_ref)) {
            const double e = std::abs(double(*lse_got) - lse_ref), tol = lse_tolerance(lse_ref);
            if (!(e / tol <= lse_worst)) {
                lse_worst = std::isfinite(e) ? e / tol : std::numeric_limits<double>::infinity();
                lse_max_err = e, lse_tol = tol;
            }
        }
    }

    // Both, for harnesses that compare every row with the reference (paged, varlen).
    template <typename Got, typename Where>
    void row(Got got, const double* ref, const double* emu, int64_t D, bool sees_none, const float* lse_got,
             double lse_ref, int64_t nan_ok_d, Where where) {
        check_row(got, D, sees_none, lse_got, where);
        compare_row(got, ref, emu, D, lse_got, lse_ref, nan_ok_d, where);
    }

    // Appends the failures to r and sets its err, err_naive, bound and LSE figures.
    void finish(CaseResult& r) const {
        auto fail = [&](const std::string& s) { r.failures.push_back(s); };
        if (non_finite) fail(std::to_string(non_finite) + " output elements are NaN/Inf, first at " + first_non_finite);
        if (nonzero_masked)
            fail(std::to_string(nonzero_masked) + " outputs of rows that see no key are not 0, first " +
                 first_nonzero_masked);
        if (bad_lse) fail(std::to_string(bad_lse) + " LSE values wrong, first " + first_bad_lse);
        if (nan_mismatch)
            fail(std::to_string(nan_mismatch) +
                 " elements are NaN where the reference is not, or the reverse (NaN must propagate as in "
                 "PyTorch), first " + first_nan_mismatch);
        const NormVerdict v = norm_bound(norm, r.floor);
        r.err = v.err, r.err_naive = v.err_emulated, r.bound = v.bound;
        if (!v.ok) fail(v.failure);
        r.lse_max_err = lse_max_err, r.lse_tol = lse_tol;
        if (lse_worst > 1.0)
            fail("LSE error " + fmt_double(lse_max_err) + " exceeds its tolerance " + fmt_double(lse_tol));
    }
};

// gtest glue of the paged and varlen harnesses: fails with the full summary (numbers, reproduce line).
inline void expect_ok(const CaseResult& r) { EXPECT_TRUE(r.ok()) << r.summary(); }

// With no LSE requested, the op must leave the poisoned LSE buffer as it was.
inline void check_lse_untouched(bool lse_requested, const void* lse, size_t bytes, CaseResult& r) {
    if (!lse_requested && !all_poison(lse, bytes, DType::F32))
        r.failures.push_back("the kernel wrote LSE although none was requested");
}


}  // namespace flashport::test
