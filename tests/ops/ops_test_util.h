// Helpers for the op tests: a seeded generator, host tensors with padded (NaN-filled) rows, and the
// tolerance checks against float64 references.
//
// Tolerances are in units in the last place (ulp) of the output dtype at the reference value, plus,
// for fp32, a relative slack for fp32 sums. The references round where transformers rounds, so for
// bf16 and fp16 most outputs must be bit-identical to them (MIN_EXACT_FRACTION); the ulp bound only
// absorbs fp32 intermediates that land on the other side of a rounding boundary.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "flashport/dtype.h"
#include "flashport/tensor.h"

namespace flashport::test {

// Seeded per test from its name, so a failure reproduces; FLASHPORT_TEST_SEED varies every case.
inline uint64_t splitmix64(uint64_t& s) {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

class Rng {
public:
    explicit Rng(uint64_t seed) : s_(seed) {}
    uint64_t next() { return splitmix64(s_); }
    double uniform() { return (double(next() >> 11) + 0.5) * 0x1.0p-53; }  // (0, 1)
    double normal() {
        const double r = std::sqrt(-2.0 * std::log(uniform())), t = 2.0 * M_PI * uniform();
        return r * std::cos(t);
    }
    int64_t below(int64_t n) { return int64_t(next() % uint64_t(n)); }

private:
    uint64_t s_;
};

inline uint64_t test_seed() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char* p : {info->test_suite_name(), info->name()})
        for (; *p; ++p) h = (h ^ uint8_t(*p)) * 0x100000001b3ull;
    if (const char* env = std::getenv("FLASHPORT_TEST_SEED")) h ^= std::strtoull(env, nullptr, 10);
    return h;
}

// A host tensor whose rows may sit in a wider buffer (`pad` spare elements after each row, filled
// with NaN), so a kernel that reads past a row poisons its result and one that writes past it is
// caught by padding_intact().
struct HostTensor {
    std::vector<uint8_t> bytes;
    TensorView view;
    int64_t pad = 0;

    HostTensor(DType dtype, std::vector<int64_t> shape, int64_t pad_ = 0) : pad(pad_) {
        view.dtype = dtype;
        view.ndim = int(shape.size());
        int64_t st = 1;
        for (int d = view.ndim - 1; d >= 0; --d) {
            view.shape[size_t(d)] = shape[size_t(d)];
            view.stride[size_t(d)] = st;
            st *= shape[size_t(d)] + (d == view.ndim - 1 ? pad : 0);
        }
        bytes.resize(size_t(std::max<int64_t>(st, 1)) * dtype_size(dtype) + 64);
        view.data = bytes.data();
        poison();
    }
    HostTensor(const HostTensor&) = delete;  // the view points into bytes

    int64_t numel() const { return view.numel(); }
    int64_t cols() const { return view.shape[size_t(view.ndim - 1)]; }
    // Flat index (row-major over the view's shape) -> element address.
    void* addr(int64_t flat) const {
        int64_t off = 0;
        for (int d = view.ndim - 1; d >= 0; --d) {
            off += (flat % view.shape[size_t(d)]) * view.stride[size_t(d)];
            flat /= view.shape[size_t(d)];
        }
        return static_cast<char*>(view.data) + off * int64_t(dtype_size(view.dtype));
    }
    double get(int64_t flat) const { return load_as_float(addr(flat), view.dtype); }
    void set(int64_t flat, double v) { store_from_float(addr(flat), view.dtype, float(v)); }

    void poison() {
        const float nan = std::numeric_limits<float>::quiet_NaN();
        const size_t es = dtype_size(view.dtype);
        for (size_t i = 0; i + es <= bytes.size(); i += es) store_from_float(bytes.data() + i, view.dtype, nan);
    }
    void fill_normal(Rng& rng, double std = 1.0, double mean = 0.0) {
        for (int64_t i = 0; i < numel(); ++i) set(i, mean + std * rng.normal());
    }
    // True when every padding element still holds NaN (nothing wrote outside the view).
    bool padding_intact() const {
        if (pad == 0) return true;
        const size_t es = dtype_size(view.dtype);
        const int64_t rows = numel() / std::max<int64_t>(cols(), 1);
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t j = 0; j < pad; ++j) {
                const char* p = static_cast<const char*>(addr(r * cols())) + (cols() + j) * int64_t(es);
                if (!std::isnan(load_as_float(p, view.dtype))) return false;
            }
        return true;
    }
};

// Every element of t (row-major over its shape), as doubles.
inline std::vector<double> values(const HostTensor& t) {
    std::vector<double> v(size_t(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) v[size_t(i)] = t.get(i);
    return v;
}

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

// Checks out against ref element by element: finite, and |out - ref| <= ulps · ulp(dtype, ref) + abs_tol.
// Returns the counts; the caller asserts on them (EXPECT_OPS_CLOSE).
inline Compare compare(const HostTensor& out, const std::vector<double>& ref, double ulps, double rel_tol_f32 = 0.0,
                       const std::vector<double>* abs_tol = nullptr) {
    Compare c;
    c.n = out.numel();
    for (int64_t i = 0; i < c.n; ++i) {
        const double o = out.get(i), r = ref[size_t(i)];
        const double u = ulp(out.view.dtype, r);
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

#define EXPECT_OPS_CLOSE(cmp, require_exact)                                                                    \
    do {                                                                                                        \
        const ::flashport::test::Compare& c_ = (cmp);                                                           \
        EXPECT_EQ(c_.bad, 0) << c_.bad << " of " << c_.n << " elements out of tolerance; first: " << c_.first_bad; \
        if (require_exact) {                                                                                    \
            EXPECT_GE(double(c_.exact), ::flashport::test::MIN_EXACT_FRACTION * double(c_.n))                  \
                << "only " << c_.exact << " of " << c_.n << " elements match the rounding-exact reference";     \
        }                                                                                                       \
    } while (0)

inline const char* short_name(DType d) { return d == DType::F32 ? "f32" : d == DType::F16 ? "f16" : "bf16"; }

// Rounds a double as the kernel's fp32 arithmetic would, then to dtype.
inline double round_as(DType dtype, double v) { return double(round_to(dtype, float(v))); }

}  // namespace flashport::test
