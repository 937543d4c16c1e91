// rms_norm and add_rms_norm (flashport/ops.h): the cases the CPU test (test_norm_rope.cpp), the GPU
// test (tests/gpu/test_gpu_ops.cpp) and the bench (bench/ops.cpp) run.
//
// Reference: float64, rounding where transformers rounds: h = round_x(x · inv), out = round_out(w · h),
// and for add_rms_norm sum = round(x + residual) first. Tolerance: a sum of squares in another order
// moves inv by its last fp32 bit, which can flip either rounding: h by one ulp of h, so out by |w| ulps
// of h (several ulps of out where |w| > 1 or h sits in a wider binade than out), and out itself by
// one; hence |w| · ulp(h) + 2 ulps of out, plus 1e-5 relative for fp32 outputs. 16-bit outputs must
// be bit-identical for at least 97% of the elements (a moved rounding point leaves ~50%; measured on
// the H200, a row of 896 bf16 values had 98.4%). The sum is exact.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "flashport/ops.h"
#include "ops/op_case.h"

namespace flashport::test {

// x [rows, dim] (flat, row-major) normalised with w [dim], rounded to out_dtype. `h_flip`, when given,
// receives per element what one ulp of the intermediate h moves the output by: |w| · ulp(h).
inline std::vector<double> rms_norm_reference(const HostTensor& x, const HostTensor& w, DType out_dtype, float eps,
                                              std::vector<double>* h_flip = nullptr) {
    const int64_t dim = x.cols(), rows = x.numel() / dim;
    std::vector<double> ref(size_t(x.numel()));
    if (h_flip) h_flip->assign(ref.size(), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
        double ss = 0.0;
        for (int64_t i = 0; i < dim; ++i) ss += x.get(r * dim + i) * x.get(r * dim + i);
        const double inv = 1.0 / std::sqrt(ss / double(dim) + double(eps));
        for (int64_t i = 0; i < dim; ++i) {
            const double h = round_as(x.view.dtype, x.get(r * dim + i) * inv);  // .to(input_dtype)
            ref[size_t(r * dim + i)] = round_as(out_dtype, w.get(i) * h);       // weight * h
            if (h_flip) (*h_flip)[size_t(r * dim + i)] = std::fabs(w.get(i)) * ulp(x.view.dtype, h);
        }
    }
    return ref;
}

constexpr double RMS_NORM_MIN_EXACT = 0.97;

// rms_norm over `shape` (x padded by `pad`, out by pad + 1), or add_rms_norm when `add`.
inline OpCase rms_norm_case(DType dt, std::vector<int64_t> shape, int64_t pad, bool add) {
    OpCase c;
    c.op = add ? "add_rms_norm" : "rms_norm";
    c.name = join_dims(shape, "x") + "_pad" + std::to_string(pad);
    c.dtype = dt;
    c.params = "{\"shape\": [" + join_dims(shape, ", ") + "], \"eps\": 1e-6}";
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    c.bytes = double((add ? 4 : 2) * n + shape.back()) * double(dtype_size(dt));  // x (+ residual, sum), out, w
    c.flops = double((add ? 5 : 4) * n);
    c.make = [=](Rng& rng) {
        OpData d;
        HostTensor& x = d.add(dt, shape, pad);
        x.fill_normal(rng);
        for (int64_t i = 0; i < x.numel(); i += x.cols() * 2) x.set(i, x.get(i) * 40.0);  // rows of other scales
        HostTensor& w = d.add(dt, {shape.back()});
        w.fill_normal(rng, 0.5, 1.0);
        HostTensor& out = d.add(dt, shape, pad + 1);
        d.outputs = {2};
        std::vector<double> h_flip;
        if (!add) {
            d.ref = {rms_norm_reference(x, w, dt, 1e-6f, &h_flip)};
        } else {
            HostTensor& res = d.add(dt, shape);
            res.fill_normal(rng, 4.0);
            HostTensor& sum = d.add(dt, shape, 1);
            d.outputs.push_back(4);
            HostTensor sum_ref(dt, shape);  // round(x + residual)
            for (int64_t i = 0; i < sum_ref.numel(); ++i) sum_ref.set(i, x.get(i) + res.get(i));
            d.ref = {rms_norm_reference(sum_ref, w, dt, 1e-6f, &h_flip), values(sum_ref)};
            (void)sum;
        }
        (void)out;
        d.tol = {ulp_tolerance(d.ref[0], dt, 2.0, 1e-5, &h_flip)};
        if (add) d.tol.push_back(std::vector<double>(d.ref[1].size(), 0.0));
        d.min_exact = RMS_NORM_MIN_EXACT;
        return d;
    };
    c.run = [add](const OpViews& v, void* stream) {
        if (add)
            add_rms_norm(v.t[2], v.t[4], v.t[0], v.t[3], v.t[1], 1e-6f, stream);
        else
            rms_norm(v.t[2], v.t[0], v.t[1], 1e-6f, stream);
        return std::string(add ? "add_rms_norm" : "rms_norm");
    };
    return c;
}

// Odd and Qwen-sized rows, 1-4 dims, padded and not; decode (1 token) to prefill (1025) sizes.
inline std::vector<OpCase> rms_norm_cases(DType dt) {
    std::vector<OpCase> cases;
    const std::vector<std::vector<int64_t>> shapes = {{1, 7},     {5, 33}, {3, 4, 19}, {2, 3, 2, 64},
                                                      {9, 896},   {1, 1},  {1, 3584},  {97, 896},
                                                      {1025, 64}, {7, 40}, {256, 3584}};
    for (const auto& shape : shapes)
        for (int64_t pad : {0, 3}) cases.push_back(rms_norm_case(dt, shape, pad, false));
    for (const auto& shape : std::vector<std::vector<int64_t>>{{3, 5, 40}, {1, 896}, {7, 3584}, {1025, 40}})
        cases.push_back(rms_norm_case(dt, shape, 2, true));
    return cases;
}

}  // namespace flashport::test
