// argmax (flashport/ops.h) on the CPU: the first maximum of each row (ties go to the lowest index, as
// torch.argmax), -1 for a row with a NaN or +inf, -inf entries allowed, strided rows, every dtype,
// and bad views. The cases are argmax_case.h's, which tests/gpu/test_gpu_ops.cpp and the bench run too.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "common/error_text.h"
#include "flashport/ops.h"
#include "ops/argmax_case.h"

using ::testing::HasSubstr;

namespace flashport::test {
namespace {

TEST(Argmax, FirstMaximumAndBadRows) {
    Rng rng(test_seed());
    for (DType dt : {DType::F32, DType::F16, DType::BF16}) expect_cases_on_host(argmax_cases(dt), rng);
}

TEST(Argmax, BadViews) {
    HostTensor x(DType::BF16, {2, 4}), empty(DType::BF16, {2, 0}), x3(DType::BF16, {2, 2, 2});
    int32_t ids[2];
    const auto message = [](const std::function<void()>& f) { return error_of(f); };
    EXPECT_THAT(message([&] { argmax(ids, empty.view); }), HasSubstr("argmax: x must be [rows, n] with 1 <= n"));
    EXPECT_THAT(message([&] { argmax(ids, x3.view); }), HasSubstr("argmax: x must have 2 dimensions"));
    EXPECT_THAT(message([&] { argmax(nullptr, x.view); }), HasSubstr("argmax: ids has no data"));
}

}  // namespace
}  // namespace flashport::test
