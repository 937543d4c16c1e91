// matmul (x · Wᵀ + b, flashport/ops.h): the cases the CPU test (test_matmul.cpp), the GPU test
// (tests/gpu/test_gpu_ops.cpp) and the bench (bench/ops.cpp) run.
//
// Reference: the float64 product. Tolerance: the output is rounded once to its dtype (1 ulp), and an
// fp32 accumulation of k products errs by about sqrt(k) · 2^-24 · Σ|x·w| (rounding errors of a sum add
// like a random walk) on the CPU, and by up to 1e-5 · Σ|x·w| in a BLAS's own order (split-K) on the
// GPU: 1 ulp plus max(8 · sqrt(k + 1) · 2^-24, 1e-5) · Σ|x·w|. A wrong element, a missed tail or a
// dropped bias is larger by orders of magnitude.
#pragma once

#include <cmath>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "flashport/ops.h"
#include "ops/op_case.h"

namespace flashport::test {

struct MatmulShape {
    int64_t tokens, in, out;
    DType x, w, o;
    bool bias;
    int64_t pad;  // spare elements after each row of x, weight and out
};

// out [tokens, out] = x [tokens, in] · w [out, in]ᵀ (+ b [out]) through `impl`.
inline OpCase matmul_case(const MatmulShape& m, MatmulImpl impl) {
    OpCase c;
    c.op = "matmul";
    std::ostringstream os;
    os << m.tokens << "x" << m.in << "x" << m.out << "_" << short_name(m.x) << "_" << short_name(m.w) << "_"
       << short_name(m.o) << (m.bias ? "_bias" : "") << (m.pad ? "_pad" : "") << "_" << matmul_impl_name(impl);
    c.name = os.str();
    c.dtype = m.x;
    c.params = "{\"tokens\": " + std::to_string(m.tokens) + ", \"in\": " + std::to_string(m.in) +
               ", \"out\": " + std::to_string(m.out) + ", \"w_dtype\": \"" + short_name(m.w) + "\", \"out_dtype\": \"" +
               short_name(m.o) + "\", \"bias\": " + (m.bias ? "true" : "false") + "}";
    c.on_gpu = m.x == m.w && (m.o == m.x || m.o == DType::F32);  // the GPU's BLAS takes one input dtype
    c.bytes = double(m.tokens * m.in * int64_t(dtype_size(m.x)) + m.out * m.in * int64_t(dtype_size(m.w)) +
                     m.tokens * m.out * int64_t(dtype_size(m.o)));
    c.flops = 2.0 * double(m.tokens * m.in * m.out);
    c.make = [m](Rng& rng) {
        OpData d;
        HostTensor& x = d.add(m.x, {m.tokens, m.in}, m.pad);
        HostTensor& w = d.add(m.w, {m.out, m.in}, m.pad);
        HostTensor& b = d.add(m.w, {m.out});
        d.add(m.o, {m.tokens, m.out}, m.pad);
        d.outputs = {3};
        x.fill_normal(rng);
        w.fill_normal(rng, 0.2);
        b.fill_normal(rng);
        std::vector<double> ref(size_t(m.tokens * m.out)), walk(ref.size());
        const double slack = std::max(8.0 * std::sqrt(double(m.in + 1)) * 0x1.0p-24, 1e-5);
        for (int64_t t = 0; t < m.tokens; ++t)
            for (int64_t n = 0; n < m.out; ++n) {
                double s = m.bias ? b.get(n) : 0.0, mag = std::fabs(s);
                for (int64_t i = 0; i < m.in; ++i) {
                    const double p = x.get(t * m.in + i) * w.get(n * m.in + i);
                    s += p;
                    mag += std::fabs(p);
                }
                ref[size_t(t * m.out + n)] = s;
                walk[size_t(t * m.out + n)] = slack * mag;
            }
        d.tol = {ulp_tolerance(ref, m.o, 1.0, 0.0, &walk)};
        d.ref = {std::move(ref)};
        return d;
    };
    c.run = [bias = m.bias, impl](const OpViews& v, void* stream) {
        return matmul(v.t[3], v.t[0], v.t[1], bias ? &v.t[2] : nullptr, impl, stream);
    };
    return c;
}

// Every dtype, uniform: decode sizes (1..8 tokens), just past the GEMV limit, tails of every vector
// width (in = 3, 33, 67), an output count no row block divides, Qwen-sized rows; then mixed dtypes
// (fp32 activations against bf16/fp16 weights, bf16 activations with an fp32 output).
inline std::vector<MatmulShape> matmul_shapes(DType dt) {
    std::vector<MatmulShape> v;
    for (auto [t, i, o] : {std::tuple{1, 33, 17},
                           {3, 67, 45},
                           {8, 129, 70},
                           {9, 64, 33},
                           {17, 3, 130},
                           {5, 896, 61},
                           {1, 1, 1},
                           {1, 896, 136},
                           {97, 896, 136}})
        for (bool bias : {false, true}) v.push_back({t, i, o, dt, dt, dt, bias, bias ? 3 : 0});
    if (dt == DType::F32) {
        v.push_back({4, 77, 29, DType::F32, DType::BF16, DType::F32, true, 1});
        v.push_back({2, 50, 31, DType::F32, DType::F16, DType::BF16, false, 0});
    }
    if (dt == DType::BF16) v.push_back({11, 40, 23, DType::BF16, DType::F32, DType::F32, true, 2});
    if (dt != DType::F32) v.push_back({7, 64, 97, dt, dt, DType::F32, true, 0});  // fp32 out of 16-bit inputs
    return v;
}

// The shared list: each shape through AUTO (the kernel each backend picks) and BLAS.
inline std::vector<OpCase> matmul_cases(DType dt) {
    std::vector<OpCase> cases;
    for (const MatmulShape& m : matmul_shapes(dt))
        for (MatmulImpl impl : {MatmulImpl::AUTO, MatmulImpl::BLAS}) cases.push_back(matmul_case(m, impl));
    return cases;
}

}  // namespace flashport::test
