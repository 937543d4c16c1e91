// CPU attention (naive and flash) against the float64 reference, through the op harness.
//
// Two grids over the same axes:
//   AttentionSubset  (label unit, runs in CI): a pairwise covering selection, so every length, head
//                    dim, GQA ratio, dtype, implementation, mask, layout, LSE flag and micro-kernel
//                    ISA appears, and every pair of them appears together at least once; plus the
//                    hand-picked edge cases below.
//   AttentionFullGrid (label full, excluded by the `cpu` test preset; run it with
//                    `ctest --test-dir build/cpu -L full`): every impl × dtype × length × head dim
//                    × ratio × mask combination.
// AttentionProblems runs the bench's small problems (attention_case.h).
#include <gtest/gtest.h>

#include <cmath>

#include "attention_case.h"
#include "flashport/attention.h"
#include "op_grid.h"
#include "op_harness.h"

namespace flashport::test {
namespace {

GridAxes cpu_axes() {
    GridAxes a;
    a.impls = {AttentionImpl::NAIVE, AttentionImpl::FLASH};
    a.dtypes = {DType::F32, DType::F16, DType::BF16};
    a.lengths = {
        {1, 1}, {7, 7}, {97, 97}, {1023, 1023}, {1025, 1025},  // q_len = kv_len
        {1, 1023}, {7, 1025},                                  // q_len < kv_len: decode, chunked prefill
        {97, 7}, {1025, 97},  // q_len > kv_len: with causal masking the first rows see no key
    };
    a.head_dims = {1, 3, 17, 40, 64, 80, 96, 128, 200, 256};
    a.gqa_ratios = {1, 2, 7};
    a.masks = {Mask::NONE, Mask::CAUSAL, Mask::WINDOW, Mask::CAUSAL_WINDOW};
    a.layouts = {Layout::BLHD, Layout::BHLD, Layout::BLHD_PADDED, Layout::DIM_STRIDED};
    a.lse = {false, true};
    // "" is the best table this CPU has (avx512 on the dev machine); the others force lower tables so
    // each is tested wherever the CPU can run it (a missing one skips).
    a.cpu_isas = {"", "generic", "avx2"};
    return a;
}

// Edge cases a covering array would only hit by luck.
std::vector<AttentionCase> edge_cases() {
    std::vector<AttentionCase> cases;
    auto base = [](AttentionImpl impl, DType dtype) {
        AttentionCase c;
        c.impl = impl;
        c.dtype = dtype;
        c.batch = 2, c.q_len = 33, c.kv_len = 33, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 64;
        return c;
    };
    for (AttentionImpl impl : {AttentionImpl::NAIVE, AttentionImpl::FLASH}) {
        AttentionCase c = base(impl, DType::F16);
        c.kv_len = 0;  // no keys at all: every row outputs zeros and an LSE of -inf
        c.lse = true;
        cases.push_back(c);

        c = base(impl, DType::F32);
        c.scale = 2.5f;  // scores ~N(0, 40²): one-hot softmax, and exp overflows unless the max is subtracted
        c.lse = true;
        cases.push_back(c);

        c = base(impl, DType::BF16);
        c.scale = -0.125f;  // a negative scale is legal: attends to the least similar keys
        cases.push_back(c);

        c = base(impl, DType::F32);
        c.causal = true, c.window_left = 0;  // each row sees exactly its own key
        c.q_len = 20, c.lse = true;
        cases.push_back(c);

        c = base(impl, DType::F16);
        c.n_heads = 80, c.n_kv_heads = 1;  // a GQA group bigger than flash's 64-row query tile
        c.q_len = c.kv_len = 70, c.head_dim = 32, c.causal = true;
        cases.push_back(c);

        for (int64_t len : {127, 128, 129, 255, 257}) {  // around flash's 128-key block
            c = base(impl, DType::F32);
            c.batch = 1, c.q_len = c.kv_len = len, c.causal = true, c.lse = true;
            cases.push_back(c);
        }

        c = base(impl, DType::F16);
        c.batch = 3, c.q_len = 5, c.kv_len = 300, c.n_heads = 3, c.n_kv_heads = 3, c.head_dim = 8;
        c.causal = true, c.window_left = 37, c.layout = Layout::BHLD, c.lse = true;
        cases.push_back(c);

        for (int threads : {1, 3, 5}) {  // more or fewer threads than this machine's cores
            c = base(impl, DType::F16);
            c.q_len = 300, c.kv_len = 301, c.n_heads = 6, c.n_kv_heads = 2, c.causal = true, c.lse = true;
            c.threads = threads;
            cases.push_back(c);
        }

        c = base(impl, DType::F32);
        c.impl = AttentionImpl::AUTO;  // auto must resolve to a supported implementation and be correct
        if (impl == AttentionImpl::FLASH) cases.push_back(c);
    }
    return cases;
}

std::vector<AttentionCase> subset_cases() {
    std::vector<AttentionCase> cases = pairwise_grid(cpu_axes());
    for (AttentionCase& c : edge_cases()) cases.push_back(c);
    return cases;
}

std::string case_name(const ::testing::TestParamInfo<AttentionCase>& info) { return info.param.name(); }

class AttentionSubset : public ::testing::TestWithParam<AttentionCase> {};
TEST_P(AttentionSubset, MatchesFloat64Reference) { check_case(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Cpu, AttentionSubset, ::testing::ValuesIn(subset_cases()), case_name);

// A planted NaN propagates as in PyTorch: its rows are NaN (output and LSE), masked keys stay out.
std::vector<AttentionCase> cpu_nan_cases() {
    std::vector<AttentionCase> cases;
    for (AttentionImpl impl : {AttentionImpl::FLASH, AttentionImpl::NAIVE})
        for (const AttentionCase& c : nan_cases(impl, {DType::F32, DType::F16, DType::BF16}, Device::cpu()))
            cases.push_back(c);
    return cases;
}
class AttentionNan : public ::testing::TestWithParam<AttentionCase> {};
TEST_P(AttentionNan, PropagatesLikeTheReference) {
    check_case(GetParam());
}
INSTANTIATE_TEST_SUITE_P(Cpu, AttentionNan, ::testing::ValuesIn(cpu_nan_cases()), case_name);

// The bench's small problems (attention_case.h), as the bench runs them (the default kernel).
TEST(AttentionProblems, MatchFloat64Reference) {
    for (DType dt : {DType::F32, DType::BF16, DType::F16})
        expect_bench_cases_pass(attention_bench_cases(dt), Device::cpu());
}

class AttentionFullGrid : public ::testing::TestWithParam<AttentionCase> {};
TEST_P(AttentionFullGrid, MatchesFloat64Reference) { check_case(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Cpu, AttentionFullGrid, ::testing::ValuesIn(full_grid(cpu_axes())), case_name);

// The covering selection must really cover: every value of every axis appears in the CI subset.
TEST(AttentionGrid, SubsetCoversEveryAxisValue) {
    const GridAxes a = cpu_axes();
    const std::vector<AttentionCase> cases = pairwise_grid(a);
    auto appears = [&](auto pred) { return std::any_of(cases.begin(), cases.end(), pred); };
    for (const LengthPair& l : a.lengths)
        EXPECT_TRUE(appears([&](const AttentionCase& c) { return c.q_len == l.q_len && c.kv_len == l.kv_len; }))
            << "q_len " << l.q_len << " kv_len " << l.kv_len;
    for (int64_t d : a.head_dims)
        EXPECT_TRUE(appears([&](const AttentionCase& c) { return c.head_dim == d; })) << "head_dim " << d;
    for (int64_t r : a.gqa_ratios)
        EXPECT_TRUE(appears([&](const AttentionCase& c) { return c.n_heads == r * c.n_kv_heads; })) << "ratio " << r;
    for (DType t : a.dtypes)
        EXPECT_TRUE(appears([&](const AttentionCase& c) { return c.dtype == t; })) << dtype_name(t);
    for (AttentionImpl i : a.impls)
        EXPECT_TRUE(appears([&](const AttentionCase& c) { return c.impl == i; })) << impl_name(i);
    for (Layout l : a.layouts)
        EXPECT_TRUE(appears([&](const AttentionCase& c) { return c.layout == l; })) << layout_name(l);
    for (bool causal : {false, true})
        for (bool window : {false, true})
            EXPECT_TRUE(appears([&](const AttentionCase& c) {
                return c.causal == causal && (c.window_left >= 0) == window;
            })) << "causal " << causal << " window " << window;
    for (bool lse : {false, true})
        EXPECT_TRUE(appears([&](const AttentionCase& c) { return c.lse == lse; })) << "lse " << lse;
    // Pairwise: e.g. every head dim meets every length (the pair most likely to expose tiling bugs).
    for (const LengthPair& l : a.lengths)
        for (int64_t d : a.head_dims)
            EXPECT_TRUE(appears([&](const AttentionCase& c) {
                return c.q_len == l.q_len && c.kv_len == l.kv_len && c.head_dim == d;
            })) << "q_len " << l.q_len << " kv_len " << l.kv_len << " head_dim " << d;
    EXPECT_LT(cases.size(), full_grid(a).size() / 20) << "the subset should be a small fraction of the full grid";
}

// One function decides support and kernel: the plan must say what runs.
TEST(AttentionPlan, ResolvesAutoScaleAndKernelName) {
    std::vector<float> buf(2 * 5 * 4 * 16, 0.5f), out(buf.size());
    const TensorView q(buf.data(), DType::F32, {2, 5, 4, 16});
    const TensorView k(buf.data(), DType::F32, {2, 5, 2, 16});
    const TensorView o(out.data(), DType::F32, {2, 5, 4, 16});
    const AttentionPlan plan = plan_attention(o, q, k, k, nullptr, {});
    EXPECT_EQ(plan.params.impl, AttentionImpl::FLASH) << "auto picks the flash kernel on the CPU";
    EXPECT_FLOAT_EQ(plan.params.scale, 0.25f) << "scale 0 means 1/sqrt(head_dim)";
    EXPECT_EQ(plan.kernel.rfind("cpu.flash.", 0), 0u) << plan.kernel;
    EXPECT_EQ(plan.shape.n_heads, 4);
    EXPECT_EQ(plan.shape.n_kv_heads, 2);
    AttentionParams p;
    p.impl = AttentionImpl::NAIVE;
    p.scale = 0.3f;
    const AttentionPlan naive = plan_attention(o, q, k, k, nullptr, p);
    EXPECT_EQ(naive.kernel, "cpu.naive.blas");
    EXPECT_FLOAT_EQ(naive.params.scale, 0.3f) << "an explicit scale is kept";
}

// The harness checks themselves: a correct run passes, and each kind of wrong output is caught, so
// a silently lenient harness cannot pass for a correct kernel.
class AttentionHarness : public ::testing::Test {
protected:
    static AttentionCase small_case() {
        AttentionCase c;
        c.batch = 1, c.q_len = 16, c.kv_len = 8, c.n_heads = 2, c.n_kv_heads = 1, c.head_dim = 32;
        c.causal = true;  // q_len > kv_len: rows 0..7 see no key
        c.lse = true;
        c.layout = Layout::BLHD_PADDED;
        return c;
    }
    static void expect_caught(const Tamper& tamper, const std::string& what) {
        const CaseResult r = run_case(small_case(), 42, tamper);
        ASSERT_FALSE(r.ok()) << "not caught: " << what << "\n" << r.summary();
        bool named = false;
        for (const std::string& f : r.failures) named = named || f.find(what) != std::string::npos;
        EXPECT_TRUE(named) << "expected a failure mentioning '" << what << "'\n" << r.summary();
    }
};

TEST_F(AttentionHarness, PassesACorrectRun) {
    const CaseResult r = run_case(small_case(), 42);
    EXPECT_TRUE(r.ok()) << r.summary();
    EXPECT_GT(r.err_naive, 0.0) << "the emulation should carry fp32 rounding error";
    EXPECT_EQ(r.rows_checked, r.rows_total) << "small cases compare every row";
    EXPECT_LE(r.err, r.bound);
}

TEST_F(AttentionHarness, CatchesNaN) {
    expect_caught([](const TensorView& o, const TensorView&) { store_from_float(o.at(0, 12, 1, 3), o.dtype, NAN); },
                  "NaN/Inf");
}

TEST_F(AttentionHarness, CatchesASmallError) {
    // 1e-3 on one of 1024 elements is a relative error of ~1e-4, far above the fp32 bound (~2e-6).
    expect_caught(
        [](const TensorView& o, const TensorView&) {
            store_from_float(o.at(0, 15, 0, 0), o.dtype, load_as_float(o.at(0, 15, 0, 0), o.dtype) + 1e-3f);
        },
        "exceeds the bound");
}

TEST_F(AttentionHarness, CatchesOutputInAMaskedRow) {
    expect_caught([](const TensorView& o, const TensorView&) { store_from_float(o.at(0, 2, 1, 5), o.dtype, 1e-30f); },
                  "see no key are not 0");
}

TEST_F(AttentionHarness, CatchesAWriteIntoPadding) {
    // One element past head_dim: inside the buffer (head pitch head_dim + 5) but outside the view.
    expect_caught([](const TensorView& o, const TensorView&) { store_from_float(o.at(0, 9, 0, 32), o.dtype, 0.0f); },
                  "outside the output view");
}

TEST_F(AttentionHarness, CatchesAWrongLse) {
    expect_caught([](const TensorView&, const TensorView& lse) { *static_cast<float*>(lse.at(0, 1, 10)) += 1e-2f; },
                  "LSE error");
    expect_caught(
        [](const TensorView&, const TensorView& lse) { *static_cast<float*>(lse.at(0, 0, 3)) = 0.0f; },  // masked row
        "LSE values wrong");
}

}  // namespace
}  // namespace flashport::test
