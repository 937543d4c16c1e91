// swiglu and add (flashport/ops.h): the cases the CPU test (test_elementwise.cpp), the GPU test
// (tests/gpu/test_gpu_ops.cpp) and the bench (bench/ops.cpp) run.
//
// swiglu: reference round(round(silu(g)) · up) in float64; 2 ulps, plus 4e-7 relative for fp32 (expf
// and the division carry a few fp32 ulps; the GPU's exp for fp32 gates is a double rounded once, for
// 16-bit gates an fp32 expf); 16-bit outputs at least 99.9% bit-identical. add: round(a + b) is exact
// in fp32 for two values of one dtype, so the result must be bit-identical; the residual stream's
// form, out = a, runs in place.
#pragma once

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "flashport/ops.h"
#include "ops/op_case.h"

namespace flashport::test {

constexpr double SWIGLU_MIN_EXACT = 0.999;

// out = swiglu(gate, up) over `shape`, each operand with its own row padding.
inline OpCase swiglu_case(DType dt, std::vector<int64_t> shape) {
    OpCase c;
    c.op = "swiglu";
    c.name = join_dims(shape, "x");
    c.dtype = dt;
    c.params = "{\"shape\": [" + join_dims(shape, ", ") + "]}";
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    c.bytes = double(3 * n) * double(dtype_size(dt));
    c.flops = double(5 * n);
    c.make = [=](Rng& rng) {
        OpData d;
        HostTensor& g = d.add(dt, shape, 2);
        HostTensor& u = d.add(dt, shape, 1);
        d.add(dt, shape, 3);
        d.outputs = {2};
        g.fill_normal(rng, 3.0);  // silu's curved part and both tails
        u.fill_normal(rng);
        std::vector<double> ref(size_t(g.numel()));
        for (int64_t i = 0; i < g.numel(); ++i) {
            const double gv = g.get(i);
            ref[size_t(i)] = round_as(dt, round_as(dt, gv / (1.0 + std::exp(-gv))) * u.get(i));
        }
        d.tol = {ulp_tolerance(ref, dt, 2.0, 4e-7)};
        d.ref = {std::move(ref)};
        d.min_exact = SWIGLU_MIN_EXACT;
        return d;
    };
    c.run = [](const OpViews& v, void* stream) {
        swiglu(v.t[2], v.t[0], v.t[1], stream);
        return std::string("swiglu");
    };
    return c;
}

// out = swiglu(gate, up) with gate and up the two halves of each row of one [rows, 2 · cols] product,
// as `linear` calls it after [gate; up] (16-byte aligned rows when cols is a multiple of 8: the wide
// path). Every 97th gate lies in [-88, -80], where 1 + exp(-g) passes 2^126 (the fast division's limit).
inline OpCase swiglu_halves_case(DType dt, int64_t rows, int64_t cols) {
    OpCase c;
    c.op = "swiglu";
    c.name = std::to_string(rows) + "x" + std::to_string(cols) + "_halves";
    c.dtype = dt;
    c.params = "{\"shape\": [" + std::to_string(rows) + ", " + std::to_string(cols) + "]}";
    c.bytes = double(3 * rows * cols) * double(dtype_size(dt));
    c.flops = double(5 * rows * cols);
    c.make = [=](Rng& rng) {
        OpData d;
        HostTensor& y = d.add(dt, {rows, 2 * cols});
        d.add(dt, {rows, cols});
        d.outputs = {1};
        y.fill_normal(rng, 3.0);
        std::vector<double> ref(size_t(rows * cols));
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t i = 0; i < cols; ++i) {
                if ((r * cols + i) % 97 == 0) y.set(r * 2 * cols + i, -80.0 - 8.0 * rng.uniform());
                const double gv = y.get(r * 2 * cols + i), uv = y.get(r * 2 * cols + cols + i);
                ref[size_t(r * cols + i)] = round_as(dt, round_as(dt, gv / (1.0 + std::exp(-gv))) * uv);
            }
        d.tol = {ulp_tolerance(ref, dt, 2.0, 4e-7)};
        d.ref = {std::move(ref)};
        d.min_exact = SWIGLU_MIN_EXACT;
        return d;
    };
    c.run = [cols](const OpViews& v, void* stream) {
        swiglu(v.t[1], v.t[0].narrowed(1, 0, cols), v.t[0].narrowed(1, cols, cols), stream);
        return std::string("swiglu");
    };
    return c;
}

// a = a + b in place over `shape` (a's rows padded by `pad` elements).
inline OpCase add_case(DType dt, std::vector<int64_t> shape, int64_t pad = 1) {
    OpCase c;
    c.op = "add";
    c.name = join_dims(shape, "x") + "_inplace" + (pad ? "" : "_dense");
    c.dtype = dt;
    c.params = "{\"shape\": [" + join_dims(shape, ", ") + "]}";
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    c.bytes = double(3 * n) * double(dtype_size(dt));
    c.flops = double(n);
    c.make = [=](Rng& rng) {
        OpData d;
        HostTensor& a = d.add(dt, shape, pad);
        HostTensor& b = d.add(dt, shape);
        a.fill_normal(rng, 10.0);
        b.fill_normal(rng);
        d.outputs = {0};
        std::vector<double> ref(size_t(a.numel()));
        for (int64_t i = 0; i < a.numel(); ++i) ref[size_t(i)] = round_as(dt, a.get(i) + b.get(i));
        d.tol = {std::vector<double>(ref.size(), 0.0)};
        d.ref = {std::move(ref)};
        d.min_exact = 1.0;
        return d;
    };
    c.run = [](const OpViews& v, void* stream) {
        add(v.t[0], v.t[0], v.t[1], stream);
        return std::string("add");
    };
    return c;
}

// 1 to 4 dims, odd rows, a long 1-D one, decode to prefill sizes of Qwen's widths.
inline std::vector<std::vector<int64_t>> elementwise_shapes() {
    return {{1, 1}, {3, 17}, {2, 5, 67}, {4864}, {2, 1, 3, 29}, {70, 900}, {1, 18944}, {97, 3584}, {1025, 40}};
}

inline std::vector<OpCase> swiglu_cases(DType dt) {
    std::vector<OpCase> cases;
    for (const auto& shape : elementwise_shapes()) cases.push_back(swiglu_case(dt, shape));
    // The engine's layout: Qwen2.5-0.5B's width at decode and at prefill, 7B's at prefill (256 of a
    // 512-token prompt's rows: the CPU reference's time); odd widths.
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 4864}, {97, 4864}, {256, 18944}, {3, 20}, {5, 21}})
        cases.push_back(swiglu_halves_case(dt, rows, cols));
    return cases;
}

inline std::vector<OpCase> add_cases(DType dt) {
    std::vector<OpCase> cases;
    for (const auto& shape : elementwise_shapes()) cases.push_back(add_case(dt, shape));
    // The residual stream of a prefill (the vector paths): Qwen2.5-7B's width, unpadded.
    cases.push_back(add_case(dt, {256, 3584}, 0));
    return cases;
}

}  // namespace flashport::test
