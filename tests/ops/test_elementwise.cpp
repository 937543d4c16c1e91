// swiglu, add and embedding against float64 references.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "flashport/ops.h"
#include "ops_test_util.h"

namespace flashport::test {
namespace {

class ElementwiseTest : public ::testing::TestWithParam<DType> {};
std::string dtype_param_name(const ::testing::TestParamInfo<DType>& info) { return short_name(info.param); }

const std::vector<std::vector<int64_t>> SHAPES = {{1, 1}, {3, 17}, {2, 5, 67}, {4864}, {2, 1, 3, 29}, {70, 900}};

TEST_P(ElementwiseTest, SwigluMatchesReference) {
    const DType dt = GetParam();
    Rng rng(test_seed());
    for (const auto& shape : SHAPES) {
        SCOPED_TRACE(::testing::Message() << "dims " << shape.size() << " last " << shape.back());
        HostTensor g(dt, shape, 2), u(dt, shape, 1), out(dt, shape, 3);
        g.fill_normal(rng, 3.0);  // silu's curved part and both tails
        u.fill_normal(rng);
        std::vector<double> ref(size_t(g.numel()));
        for (int64_t i = 0; i < g.numel(); ++i) {
            const double gv = g.get(i);
            ref[size_t(i)] = round_as(dt, round_as(dt, gv / (1.0 + std::exp(-gv))) * u.get(i));
        }
        swiglu(out.view, g.view, u.view);
        // fp32: expf and the division carry a few ulps.
        EXPECT_OPS_CLOSE(compare(out, ref, 2.0, 4e-7), dt != DType::F32);
        EXPECT_TRUE(out.padding_intact());
    }
}

TEST_P(ElementwiseTest, AddMatchesReferenceInPlace) {
    const DType dt = GetParam();
    Rng rng(test_seed());
    for (const auto& shape : SHAPES) {
        SCOPED_TRACE(::testing::Message() << "dims " << shape.size() << " last " << shape.back());
        HostTensor a(dt, shape, 1), b(dt, shape);
        a.fill_normal(rng, 10.0);
        b.fill_normal(rng);
        std::vector<double> ref(size_t(a.numel()));
        for (int64_t i = 0; i < a.numel(); ++i) ref[size_t(i)] = round_as(dt, a.get(i) + b.get(i));
        add(a.view, a.view, b.view);  // the residual stream is updated in place
        // The sum of two values of one dtype is exact in fp32 here, so the result is exactly rounded.
        const Compare c = compare(a, ref, 0.0);
        EXPECT_EQ(c.exact, c.n) << c.first_bad;
        EXPECT_TRUE(a.padding_intact());
    }
}

TEST(Elementwise, MixedDtypes) {
    Rng rng(test_seed());
    HostTensor a(DType::BF16, {3, 31}), b(DType::F32, {3, 31}), out(DType::F32, {3, 31});
    a.fill_normal(rng);
    b.fill_normal(rng);
    std::vector<double> ref(size_t(a.numel()));
    for (int64_t i = 0; i < a.numel(); ++i) ref[size_t(i)] = double(float(a.get(i)) + float(b.get(i)));
    add(out.view, a.view, b.view);
    EXPECT_EQ(compare(out, ref, 0.0).bad, 0);
}

TEST_P(ElementwiseTest, EmbeddingCopiesRows) {
    const DType dt = GetParam();
    Rng rng(test_seed());
    const int64_t vocab = 37, hidden = 23;
    HostTensor table(dt, {vocab, hidden}, 4);
    table.fill_normal(rng);
    std::vector<int32_t> ids32 = {0, 36, 5, 5, 17, 1, 36};
    std::vector<int64_t> ids64(ids32.begin(), ids32.end());
    for (DType out_dt : {dt, DType::F32}) {
        for (bool wide : {false, true}) {
            HostTensor out(out_dt, {int64_t(ids32.size()), hidden}, 2);
            const IndexView ids = wide ? IndexView(ids64.data(), int64_t(ids64.size()))
                                       : IndexView(ids32.data(), int64_t(ids32.size()));
            embedding(out.view, table.view, ids);
            std::vector<double> ref(size_t(out.numel()));
            for (size_t t = 0; t < ids32.size(); ++t)
                for (int64_t j = 0; j < hidden; ++j)
                    ref[t * size_t(hidden) + size_t(j)] = table.get(int64_t(ids32[t]) * hidden + j);
            const Compare c = compare(out, ref, 0.0);
            EXPECT_EQ(c.exact, c.n) << c.first_bad;
            EXPECT_TRUE(out.padding_intact());
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Ops, ElementwiseTest, ::testing::Values(DType::F32, DType::F16, DType::BF16),
                         dtype_param_name);

}  // namespace
}  // namespace flashport::test
