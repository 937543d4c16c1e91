// rms_norm, add_rms_norm and rope against float64 references that round where transformers rounds
// (see ops.h): the shared cases of rms_norm_case.h and rope_case.h, then the layouts, mixed dtypes
// and in-place forms only the CPU test covers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "flashport/ops.h"
#include "ops/rms_norm_case.h"
#include "ops/rope_case.h"
#include "ops_test_util.h"

namespace flashport::test {
namespace {

class DtypeTest : public ::testing::TestWithParam<DType> {};
std::string dtype_param_name(const ::testing::TestParamInfo<DType>& info) { return short_name(info.param); }

// ---------------------------------------------------------------------------------------------- rms_norm

// The shared cases (rms_norm_case.h): plain and fused-add forms, with their reference and tolerance.
TEST_P(DtypeTest, RmsNormMatchesReference) {
    Rng rng(test_seed());
    expect_cases_on_host(rms_norm_cases(GetParam()), rng);
}

TEST_P(DtypeTest, RmsNormInPlaceAndMixedDtypes) {
    const DType dt = GetParam();
    Rng rng(test_seed());
    HostTensor x(dt, {4, 45}), w(DType::F32, {45}), out(DType::F32, {4, 45});
    x.fill_normal(rng, 3.0);
    w.fill_normal(rng, 0.5, 1.0);
    // bf16 x with an fp32 weight: PyTorch promotes the product to fp32; h is still rounded to x's dtype.
    // h_flip: where x · inv lies within the kernel's fp32 error of a rounding boundary of x's dtype, h
    // may round the other way (one ulp of h, times |w|), as in the shared cases (rms_norm_case.h).
    std::vector<double> h_flip;
    const std::vector<double> ref = rms_norm_reference(x, w, DType::F32, 1e-5f, &h_flip);
    rms_norm(out.view, x.view, w.view, 1e-5f);
    EXPECT_OPS_CLOSE(compare(out, ref, 2.0, 1e-5, &h_flip), false);
    // In place.
    HostTensor w2(dt, {45});
    w2.fill_normal(rng, 0.5, 1.0);
    const std::vector<double> ref2 = rms_norm_reference(x, w2, dt, 1e-5f, &h_flip);
    rms_norm(x.view, x.view, w2.view, 1e-5f);
    EXPECT_OPS_CLOSE(compare(x, ref2, 2.0, 1e-5, &h_flip), dt != DType::F32);
}

// add_rms_norm is defined as add then rms_norm: the results must be those bits, in place too.
TEST_P(DtypeTest, AddRmsNormIsAddThenRmsNorm) {
    const DType dt = GetParam();
    Rng rng(test_seed());
    const std::vector<int64_t> shape = {3, 5, 40};
    HostTensor x(dt, shape, 2), res(dt, shape), w(dt, {40});
    x.fill_normal(rng);
    res.fill_normal(rng, 4.0);
    w.fill_normal(rng, 0.5, 1.0);
    // The two-op definition, into separate outputs.
    HostTensor sum_ref(dt, shape), out_ref(dt, shape);
    add(sum_ref.view, x.view, res.view);
    rms_norm(out_ref.view, sum_ref.view, w.view, 1e-6f);
    auto same_bits = [](const HostTensor& a, const HostTensor& b) {
        for (int64_t i = 0; i < a.numel(); ++i)
            if (std::memcmp(a.addr(i), b.addr(i), dtype_size(a.view.dtype)) != 0) return false;
        return true;
    };
    // Separate outputs in padded rows (nothing may be written outside the view).
    HostTensor sum(dt, shape, 1), out(dt, shape, 3);
    add_rms_norm(out.view, sum.view, x.view, res.view, w.view, 1e-6f);
    EXPECT_TRUE(same_bits(sum, sum_ref));
    EXPECT_TRUE(same_bits(out, out_ref));
    EXPECT_TRUE(out.padding_intact() && sum.padding_intact());
    // The decoder's in-place form: the residual stream updated in place, the norm into x.
    add_rms_norm(x.view, res.view, x.view, res.view, w.view, 1e-6f);
    EXPECT_TRUE(same_bits(res, sum_ref));
    EXPECT_TRUE(same_bits(x, out_ref));
}

// ---------------------------------------------------------------------------------------------- rope

// The shared cases (rope_case.h): odd and Qwen head dims, int32 and int64 positions up to 2^24 - 1.
TEST_P(DtypeTest, RopeMatchesReference) {
    Rng rng(test_seed());
    expect_cases_on_host(rope_cases(GetParam()), rng);
}

TEST_P(DtypeTest, RopeLayoutsAndInPlace) {
    const DType dt = GetParam();
    Rng rng(test_seed());
    const int64_t batch = 2, len = 3, n_heads = 4, head_dim = 18;
    // [batch, len, n_heads, head_dim] with int32 positions, in place.
    HostTensor x(dt, {batch, len, n_heads, head_dim});
    x.fill_normal(rng);
    std::vector<int64_t> pos64 = random_positions(rng, batch * len);
    std::vector<int32_t> pos32(pos64.begin(), pos64.end());
    const std::vector<double> ref = rope_reference(x, n_heads, head_dim, pos64, 1e6);
    const std::vector<double> tol = rope_abs_tol(x, head_dim);
    rope(x.view, x.view, IndexView(pos32.data(), int64_t(pos32.size())), {1e6, 0});
    EXPECT_OPS_CLOSE(compare(x, ref, 2.0, 0.0, &tol), dt != DType::F32);

    // Packed heads: [tokens, n_heads * head_dim] with params.head_dim, as a fused projection gives.
    HostTensor p(dt, {batch * len, n_heads * head_dim}, 7), po(dt, {batch * len, n_heads * head_dim});
    p.fill_normal(rng);
    const std::vector<double> pref = rope_reference(p, n_heads, head_dim, pos64, 1e6);
    const std::vector<double> ptol = rope_abs_tol(p, head_dim);
    rope(po.view, p.view, IndexView(pos64.data(), int64_t(pos64.size())), {1e6, head_dim});
    EXPECT_OPS_CLOSE(compare(po, pref, 2.0, 0.0, &ptol), dt != DType::F32);
}

TEST(Rope, KnownRotation) {
    // head_dim 2: one pair, inv_freq = 1, so position p rotates (x1, x2) by p radians.
    std::vector<float> x = {1.0f, 0.0f, 0.0f, 1.0f};
    std::vector<int64_t> pos = {1, 2};
    TensorView v(x.data(), DType::F32, {2, 1, 2});
    rope(v, v, IndexView(pos.data(), 2), {10000.0, 0});
    EXPECT_NEAR(x[0], std::cos(1.0), 1e-6);
    EXPECT_NEAR(x[1], std::sin(1.0), 1e-6);
    EXPECT_NEAR(x[2], -std::sin(2.0), 1e-6);
    EXPECT_NEAR(x[3], std::cos(2.0), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Ops, DtypeTest, ::testing::Values(DType::F32, DType::F16, DType::BF16), dtype_param_name);

}  // namespace
}  // namespace flashport::test
