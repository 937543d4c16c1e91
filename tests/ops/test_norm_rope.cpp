// rms_norm and rope against float64 references that round where transformers rounds (see ops.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "flashport/ops.h"
#include "ops_test_util.h"

namespace flashport::test {
namespace {

class DtypeTest : public ::testing::TestWithParam<DType> {};
std::string dtype_param_name(const ::testing::TestParamInfo<DType>& info) { return short_name(info.param); }

// ---------------------------------------------------------------------------------------------- rms_norm

std::vector<double> rms_norm_reference(const HostTensor& x, const HostTensor& w, DType out_dtype, float eps) {
    const int64_t dim = x.cols(), rows = x.numel() / dim;
    std::vector<double> ref(size_t(x.numel()));
    for (int64_t r = 0; r < rows; ++r) {
        double ss = 0.0;
        for (int64_t i = 0; i < dim; ++i) ss += x.get(r * dim + i) * x.get(r * dim + i);
        const double inv = 1.0 / std::sqrt(ss / double(dim) + double(eps));
        for (int64_t i = 0; i < dim; ++i) {
            const double h = round_as(x.view.dtype, x.get(r * dim + i) * inv);  // .to(input_dtype)
            ref[size_t(r * dim + i)] = round_as(out_dtype, w.get(i) * h);     // weight * h
        }
    }
    return ref;
}

TEST_P(DtypeTest, RmsNormMatchesReference) {
    const DType dt = GetParam();
    Rng rng(test_seed());
    const std::vector<std::vector<int64_t>> shapes = {{1, 7}, {5, 33}, {3, 4, 19}, {2, 3, 2, 64}, {9, 896}, {1, 1}};
    for (const auto& shape : shapes) {
        for (int64_t pad : {0, 3}) {
            SCOPED_TRACE(::testing::Message() << "shape dims " << shape.size() << " last " << shape.back() << " pad " << pad);
            HostTensor x(dt, shape, pad), w(dt, {shape.back()}), out(dt, shape, pad + 1);
            x.fill_normal(rng);
            // Rows of very different scale: the variance must not be absolute.
            for (int64_t i = 0; i < x.numel(); i += x.cols() * 2) x.set(i, x.get(i) * 40.0);
            w.fill_normal(rng, 0.5, 1.0);
            const float eps = 1e-6f;
            rms_norm(out.view, x.view, w.view, eps);
            EXPECT_OPS_CLOSE(compare(out, rms_norm_reference(x, w, dt, eps), 2.0, 1e-5), dt != DType::F32);
            EXPECT_TRUE(out.padding_intact());
        }
    }
}

TEST_P(DtypeTest, RmsNormInPlaceAndMixedDtypes) {
    const DType dt = GetParam();
    Rng rng(test_seed());
    HostTensor x(dt, {4, 45}), w(DType::F32, {45}), out(DType::F32, {4, 45});
    x.fill_normal(rng, 3.0);
    w.fill_normal(rng, 0.5, 1.0);
    // bf16 x with an fp32 weight: PyTorch promotes the product to fp32; h is still rounded to x's dtype.
    const std::vector<double> ref = rms_norm_reference(x, w, DType::F32, 1e-5f);
    rms_norm(out.view, x.view, w.view, 1e-5f);
    EXPECT_OPS_CLOSE(compare(out, ref, 2.0, 1e-5), false);
    // In place.
    HostTensor w2(dt, {45});
    w2.fill_normal(rng, 0.5, 1.0);
    const std::vector<double> ref2 = rms_norm_reference(x, w2, dt, 1e-5f);
    rms_norm(x.view, x.view, w2.view, 1e-5f);
    EXPECT_OPS_CLOSE(compare(x, ref2, 2.0, 1e-5), dt != DType::F32);
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

// inv_freq as transformers computes it in fp32. powf itself is libm's, as in the kernel: at position
// p a 1-ulp change of inv_freq moves the angle by ~p·6e-8 rad (a whole radian near 2^24), so no
// independent power function can serve as the reference there. (PyTorch's own CPU pow may differ
// from libm's by that ulp; the angle error it causes is below bf16 resolution for p < 32768.)
float inv_freq_f32(double theta, int64_t i, int64_t head_dim) {
    const float e = float(2 * i) / float(head_dim);
    return 1.0f / std::pow(float(theta), e);
}

// x viewed as [tokens, n_heads, head_dim] (flat, row-major), one position per token.
std::vector<double> rope_reference(const HostTensor& x, int64_t n_heads, int64_t head_dim,
                                   const std::vector<int64_t>& pos, double theta) {
    const DType dt = x.view.dtype;
    const int64_t half = head_dim / 2, tokens = int64_t(pos.size());
    std::vector<double> ref(size_t(x.numel()));
    for (int64_t t = 0; t < tokens; ++t)
        for (int64_t i = 0; i < half; ++i) {
            const float angle = inv_freq_f32(theta, i, head_dim) * float(pos[size_t(t)]);
            const double c = round_as(dt, std::cos(double(angle))), s = round_as(dt, std::sin(double(angle)));
            for (int64_t h = 0; h < n_heads; ++h) {
                const int64_t base = (t * n_heads + h) * head_dim;
                const double x1 = x.get(base + i), x2 = x.get(base + i + half);
                ref[size_t(base + i)] = round_as(dt, round_as(dt, x1 * c) - round_as(dt, x2 * s));
                ref[size_t(base + i + half)] = round_as(dt, round_as(dt, x2 * c) + round_as(dt, x1 * s));
            }
        }
    return ref;
}

std::vector<int64_t> random_positions(Rng& rng, int64_t n) {
    std::vector<int64_t> pos(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) pos[size_t(i)] = i % 5 == 4 ? rng.below(1 << 24) : rng.below(40000);
    if (n > 1) pos[0] = 0;  // the identity rotation
    return pos;
}

// fp32 outputs: angles up to 2^24 rad make cos/sin sensitive to the last bit of fp32 range reduction;
// a few fp32 ulps of |x| is still 1000× below what a wrong frequency or a swapped half gives.
std::vector<double> rope_abs_tol(const HostTensor& x, int64_t head_dim) {
    std::vector<double> tol(size_t(x.numel()));
    const int64_t half = head_dim / 2;
    for (int64_t i = 0; i < x.numel(); ++i) {
        const int64_t j = i % head_dim, partner = j < half ? i + half : i - half;
        tol[size_t(i)] = x.view.dtype == DType::F32 ? 8e-7 * (std::fabs(x.get(i)) + std::fabs(x.get(partner))) : 0.0;
    }
    return tol;
}

TEST_P(DtypeTest, RopeMatchesReference) {
    const DType dt = GetParam();
    Rng rng(test_seed());
    struct Case { int64_t tokens, n_heads, head_dim; double theta; };
    for (const Case& c : {Case{7, 3, 34, 10000.0}, Case{1, 14, 64, 1000000.0}, Case{5, 2, 128, 1000000.0},
                          Case{3, 1, 2, 10000.0}, Case{11, 5, 6, 500.0}}) {
        for (int64_t pad : {0, 5}) {
            SCOPED_TRACE(::testing::Message() << c.tokens << "x" << c.n_heads << "x" << c.head_dim << " theta "
                                              << c.theta << " pad " << pad);
            HostTensor x(dt, {c.tokens, c.n_heads, c.head_dim}, pad), out(dt, {c.tokens, c.n_heads, c.head_dim}, pad);
            x.fill_normal(rng);
            const std::vector<int64_t> pos = random_positions(rng, c.tokens);
            rope(out.view, x.view, IndexView(pos.data(), int64_t(pos.size())), {c.theta, 0});
            const std::vector<double> tol = rope_abs_tol(x, c.head_dim);
            EXPECT_OPS_CLOSE(compare(out, rope_reference(x, c.n_heads, c.head_dim, pos, c.theta), 2.0, 0.0, &tol),
                             dt != DType::F32);
            EXPECT_TRUE(out.padding_intact());
        }
    }
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
