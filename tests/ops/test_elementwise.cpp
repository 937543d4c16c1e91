// swiglu, add and embedding against float64 references: the shared cases of elementwise_case.h and
// embedding_case.h, then mixed dtypes.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "flashport/ops.h"
#include "ops/elementwise_case.h"
#include "ops/embedding_case.h"
#include "ops_test_util.h"

namespace flashport::test {
namespace {

class ElementwiseTest : public ::testing::TestWithParam<DType> {};
std::string dtype_param_name(const ::testing::TestParamInfo<DType>& info) { return short_name(info.param); }

// The shared cases (elementwise_case.h): swiglu, and add in place as the residual stream runs it.
TEST_P(ElementwiseTest, SwigluMatchesReference) {
    Rng rng(test_seed());
    expect_cases_on_host(swiglu_cases(GetParam()), rng);
}

TEST_P(ElementwiseTest, AddMatchesReferenceInPlace) {
    Rng rng(test_seed());
    expect_cases_on_host(add_cases(GetParam()), rng);
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

// The shared cases (embedding_case.h): to the table's dtype and fp32, int32 and int64 ids.
TEST_P(ElementwiseTest, EmbeddingCopiesRows) {
    Rng rng(test_seed());
    expect_cases_on_host(embedding_cases(GetParam()), rng);
}

INSTANTIATE_TEST_SUITE_P(Ops, ElementwiseTest, ::testing::Values(DType::F32, DType::F16, DType::BF16),
                         dtype_param_name);

}  // namespace
}  // namespace flashport::test
