// One `linear` call (flashport/linear.h) with fresh random inputs, and its check against a float64
// evaluation of the whole chain (norm, product, residual add or SwiGLU), shared by the CPU test
// (test_linear.cpp), the GPU one (tests/gpu/test_linear_gpu.cpp) and the bench (bench/ops.cpp).
//
// Reference and tolerance: cpu::linear_reference (src/backends/cpu/linear.h) evaluates the chain in
// float64 and bounds, per output element, the error of an evaluation that rounds where linear rounds;
// 1.5 times that bound is allowed. A misplaced rounding point or a wrong row pairing is off by far more.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cpu/linear.h"
#include "flashport/linear.h"
#include "ops/op_case.h"
#include "ops/ops_test_util.h"

namespace flashport::test {

struct LinearCase {
    int64_t tokens, in, rows;  // rows of the weight (with swiglu: gate rows + up rows)
    bool norm, bias, residual, swiglu;
    bool prologue = false;  // LinearParams::norm_in_prologue (a GPU one-token GEMV's norm folded in)
    MatmulImpl impl = MatmulImpl::AUTO;  // LinearParams::impl (GEMV: a GPU's matrix-core GEMV for 2-32 tokens)

    int64_t cols() const { return swiglu ? rows / 2 : rows; }
    std::string name() const {
        std::ostringstream s;
        s << tokens << "x" << in << "->" << rows << (norm ? " norm" : "") << (bias ? " bias" : "")
          << (residual ? " residual" : "") << (swiglu ? " swiglu" : "") << (prologue ? " prologue" : "")
          << (impl == MatmulImpl::AUTO ? "" : std::string(" ") + matmul_impl_name(impl));
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
    p.norm_in_prologue = c.prologue;
    p.eps = 1e-6f;
    p.residual = c.residual ? residual : nullptr;
    p.swiglu = c.swiglu;
    p.impl = c.impl;
    return p;
}

// Unit roundoff of a dtype: the `u` of cpu::linear_reference's error bound.
inline double unit_roundoff(DType dt) { return dt == DType::F32 ? 0x1.0p-24 : dt == DType::F16 ? 0x1.0p-11 : 0x1.0p-8; }

// `got` (the op's out) against the float64 chain (cpu::linear_reference); `residual` is the
// residual's value before the call (the op may have overwritten it in place). Tolerance: 1.5 times
// the reference's error bound. Returns the number of elements out of tolerance and describes the
// first in `first`; `tols` (when given) receives each element's tolerance, in out's row-major order.
inline int64_t linear_mismatches(const LinearCase& c, const LinearInputs& in, const HostTensor& got,
                                 const std::vector<double>& residual, std::vector<double>* tols, std::string* first) {
    const DType dt = got.view.dtype;
    HostTensor r(dt, {c.tokens, c.cols()});  // the residual as it was (exact: it came from dt)
    for (int64_t i = 0; i < r.numel(); ++i) r.set(i, residual[size_t(i)]);
    const LinearParams p = params_for(c, &in.b->view, &in.gamma->view, &r.view);
    const cpu::LinearReference ref = cpu::linear_reference(in.x->view, in.w->view, p, unit_roundoff(dt));
    if (tols) tols->clear();
    int64_t bad = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
        const double value = got.get(i), want = ref.out[size_t(i)], tol = 1.5 * ref.bound[size_t(i)] + 1e-30;
        if (tols) tols->push_back(tol);
        if (!(std::fabs(value - want) <= tol) && bad++ == 0 && first) {
            std::ostringstream s;
            s << c.name() << " " << short_name(dt) << ": out[" << i / c.cols() << ", " << i % c.cols()
              << "] = " << value << ", float64 reference " << want << ", tolerance " << tol;
            *first = s.str();
        }
    }
    return bad;
}

// linear_mismatches as a gtest check (one failure message, the first element out of tolerance).
inline int64_t check_linear(const LinearCase& c, const LinearInputs& in, const HostTensor& got,
                            const std::vector<double>& residual, std::vector<double>* tols = nullptr) {
    std::string first;
    const int64_t bad = linear_mismatches(c, in, got, residual, tols, &first);
    if (bad) ADD_FAILURE() << first;
    return bad;
}

// Every fusion of linear for one size: none; norm; bias + residual; norm + bias; norm + swiglu;
// swiglu + bias.
inline void add_linear_fusions(std::vector<LinearCase>& cases, int64_t tokens, int64_t in, int64_t rows) {
    for (int f = 0; f < 6; ++f) {
        const bool norm = f == 1 || f == 3 || f == 4, bias = f == 2 || f == 3 || f == 5;
        const bool residual = f == 2, swiglu = f == 4 || f == 5;
        cases.push_back({tokens, in, rows, norm, bias, residual, swiglu});
    }
}

// The sizes every backend runs, each with every fusion: lengths 1 and 7 tokens, odd in and rows,
// Qwen-like shapes (a 7B k/v slice, a long down_proj row); then batched decode's token counts (a
// GPU's matrix-core GEMV takes 2-32 tokens in tiles of 8 or 16: a part of one, one past a tile, the
// largest batch) on rows no 16-row block divides.
inline std::vector<LinearCase> linear_cases() {
    std::vector<LinearCase> cases;
    for (int64_t tokens : {1, 7})
        for (auto [in, rows] : {std::pair<int64_t, int64_t>{64, 98}, {40, 2}, {896, 136}, {3584, 512}, {18944, 10}})
            add_linear_fusions(cases, tokens, in, rows);
    for (int64_t tokens : {2, 9, 17, 32})
        for (auto [in, rows] : {std::pair<int64_t, int64_t>{64, 98}, {40, 2}, {896, 138}, {3584, 40}})
            add_linear_fusions(cases, tokens, in, rows);
    return cases;
}

// A LinearCase as an OpCase (op_case.h), for the bench and the generic runners: tensors x, w, b,
// gamma, residual, out; the reference and tolerance of linear_mismatches.
inline OpCase linear_op_case(const LinearCase& lc, DType dt) {
    OpCase c;
    c.op = "linear";
    c.name = lc.name();
    c.name.replace(c.name.find("->"), 2, "to");  // "1x64to98_norm"
    for (char& ch : c.name) ch = ch == ' ' ? '_' : ch;
    c.dtype = dt;
    const auto flag = [](bool b) { return b ? "true" : "false"; };
    c.params = "{\"tokens\": " + std::to_string(lc.tokens) + ", \"in\": " + std::to_string(lc.in) +
               ", \"rows\": " + std::to_string(lc.rows) + ", \"norm\": " + flag(lc.norm) + ", \"bias\": " +
               flag(lc.bias) + ", \"residual\": " + flag(lc.residual) + ", \"swiglu\": " + flag(lc.swiglu) +
               ", \"eps\": 1e-6}";
    const double es = double(dtype_size(dt));
    c.bytes = es * double(lc.rows * lc.in + lc.tokens * lc.in + lc.tokens * lc.cols() * (lc.residual ? 2 : 1) +
                          (lc.bias ? lc.rows : 0) + (lc.norm ? lc.in : 0));
    c.flops = 2.0 * double(lc.tokens * lc.rows * lc.in);
    c.make = [lc, dt](Rng& rng) {
        LinearInputs in = make_linear_inputs(lc, dt, rng);
        OpData d;
        for (auto* t : {&in.x, &in.w, &in.b, &in.gamma, &in.residual, &in.out}) d.tensors.push_back(std::move(*t));
        d.outputs = {5};
        const LinearParams p = params_for(lc, &d.tensors[2]->view, &d.tensors[3]->view, &d.tensors[4]->view);
        cpu::LinearReference ref = cpu::linear_reference(d.tensors[0]->view, d.tensors[1]->view, p, unit_roundoff(dt));
        for (double& b : ref.bound) b = 1.5 * b + 1e-30;
        d.ref = {std::move(ref.out)};
        d.tol = {std::move(ref.bound)};
        return d;
    };
    const auto params = [lc](const OpViews& v) { return params_for(lc, &v.t[2], &v.t[3], &v.t[4]); };
    c.run = [params](const OpViews& v, void* stream) {
        return linear(v.t[5], v.t[0], v.t[1], params(v), v.workspace, v.workspace_bytes, stream);
    };
    c.workspace_bytes = [params](const OpViews& v) { return linear_workspace_bytes(v.t[5], v.t[0], v.t[1], params(v)); };
    return c;
}

inline std::vector<OpCase> linear_op_cases(DType dt) {
    std::vector<OpCase> cases;
    for (const LinearCase& lc : linear_cases()) cases.push_back(linear_op_case(lc, dt));
    return cases;
}

// Qwen2.5-7B's four decode projections (one token, bf16 in the engine): the perf shapes of the GPU
// test's fused-vs-plain timing and of the bench.
inline std::vector<LinearCase> linear_qwen_cases(int64_t tokens = 1) {
    return {{tokens, 3584, 4608, true, true, false, false},    // qkv (norm, bias)
            {tokens, 3584, 3584, false, false, true, false},   // o_proj (residual)
            {tokens, 3584, 37888, true, false, false, true},   // gate_up (norm, swiglu)
            {tokens, 18944, 3584, false, false, true, false}};  // down (residual)
}

}  // namespace flashport::test
