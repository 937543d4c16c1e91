// tests/support's own checks: the generator is deterministic, the seed rule separates cases and
// reproduces them, poisoning is detected, and the tolerance rule's two forms pass and fail where
// they should.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "support/host_tensor.h"
#include "support/poison.h"
#include "support/rng.h"
#include "support/seed.h"
#include "support/tolerance.h"

namespace flashport::test {
namespace {

TEST(Support, RngIsDeterministicAndInRange) {
    Rng a(7), b(7);
    for (int i = 0; i < 1000; ++i) {
        const double u = a.uniform();
        EXPECT_EQ(u, b.uniform());
        EXPECT_GT(u, 0.0);
        EXPECT_LT(u, 1.0);
        const int64_t k = a.below(13);
        EXPECT_EQ(k, b.below(13));
        EXPECT_GE(k, 0);
        EXPECT_LT(k, 13);
    }
    double sum = 0.0, sq = 0.0;  // 10^5 normals: mean ~0 and variance ~1 within 5 sigma
    for (int i = 0; i < 100000; ++i) {
        const double x = a.normal();
        sum += x, sq += x * x;
    }
    EXPECT_NEAR(sum / 1e5, 0.0, 5.0 / std::sqrt(1e5));
    EXPECT_NEAR(sq / 1e5, 1.0, 5.0 * std::sqrt(2.0 / 1e5));
}

TEST(Support, CaseSeedsDependOnNameAndRunSeed) {
    EXPECT_EQ(case_seed("a", 1), case_seed("a", 1));
    EXPECT_NE(case_seed("a", 1), case_seed("b", 1));
    EXPECT_NE(case_seed("a", 1), case_seed("a", 2));
    EXPECT_EQ(test_seed(), case_seed("Support.CaseSeedsDependOnNameAndRunSeed"));
    EXPECT_NE(reproduce_line().find("FLASHPORT_TEST_SEED=" + std::to_string(run_seed())), std::string::npos);
    EXPECT_NE(reproduce_line().find("Support.CaseSeedsDependOnNameAndRunSeed"), std::string::npos);
}

TEST(Support, PaddingIsPoisonUntilWritten) {
    for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
        HostTensor t(dt, {3, 5}, 2);
        EXPECT_TRUE(all_poison(t.bytes.data(), t.bytes.size(), dt));
        Rng rng(1);
        t.fill_normal(rng);
        EXPECT_TRUE(t.padding_intact());
        store_from_float(static_cast<char*>(t.addr(4)) + dtype_size(dt), dt, 1.0f);  // just past row 0
        EXPECT_FALSE(t.padding_intact());
    }
}

TEST(Support, ElementwiseToleranceCountsUlpsAndExactMatches) {
    HostTensor out(DType::BF16, {100});
    std::vector<double> ref(100);
    for (int64_t i = 0; i < 100; ++i) {
        ref[size_t(i)] = double(round_to(DType::BF16, float(1.0 + 0.01 * double(i))));
        out.set(i, ref[size_t(i)]);
    }
    EXPECT_TRUE(close_enough(compare(out, ref, 1.0), MIN_EXACT_FRACTION));
    for (int64_t i = 0; i < 5; ++i) out.set(i, ref[size_t(i)] + ulp(DType::BF16, ref[size_t(i)]));  // 5% one ulp off
    Compare c = compare(out, ref, 1.0);
    EXPECT_EQ(c.bad, 0);
    EXPECT_EQ(c.exact, 95);
    EXPECT_TRUE(close_enough(c, MIN_EXACT_FRACTION));  // straddles: 3 expected, 12 allowed at n = 100
    EXPECT_FALSE(close_enough(c, 1.0));                // "all exact" means all
    for (int64_t i = 0; i < 30; ++i) out.set(i, ref[size_t(i)] + ulp(DType::BF16, ref[size_t(i)]));  // a moved rounding
    c = compare(out, ref, 1.0);
    EXPECT_EQ(c.bad, 0);
    EXPECT_FALSE(close_enough(c, MIN_EXACT_FRACTION));  // within ulps, but too few exact
    out.set(50, ref[50] + 4 * ulp(DType::BF16, ref[50]));
    EXPECT_EQ(compare(out, ref, 1.0).bad, 1);
}

// The allowance for inexact elements: the mean share plus four Poisson deviations plus 3.
TEST(Support, AllowedInexactIsAStatisticalBound) {
    EXPECT_EQ(allowed_inexact(1000, 1.0), 0);
    EXPECT_EQ(allowed_inexact(1000, 0.0), 1000);
    EXPECT_EQ(allowed_inexact(174, 0.999), 4);         // 0.17 + 4 * 0.42 + 3
    EXPECT_EQ(allowed_inexact(2, 0.97), 2);            // never more than n
    EXPECT_EQ(allowed_inexact(1000000, 0.999), 1129);  // 1000 + 4 * 31.6 + 3
}

// ulps count rounding steps, measured at the larger magnitude: across a power of two the step above
// is twice the one below.
TEST(Support, UlpsAcrossAPowerOfTwo) {
    HostTensor out(DType::F16, {1});
    out.set(0, -2.0 - 0x1.0p-9);                         // -2.00195: one step above 2
    const std::vector<double> ref = {-2.0 + 0x1.0p-10};  // -1.99902: one step below 2
    EXPECT_EQ(compare(out, ref, 2.0).bad, 0);
    EXPECT_EQ(compare(out, ref, 1.0).bad, 1);
}

TEST(Support, NormBoundIsTwiceTheEmulationPlusFloor) {
    NormError e;
    e.add(1.0 + 1e-3, 1.0, 1.0 + 1e-3);  // as wrong as the emulation: within 2x
    NormVerdict v = norm_bound(e, default_floor(DType::F16));
    EXPECT_TRUE(v.ok) << v.failure;
    EXPECT_DOUBLE_EQ(v.bound, 2.0 * v.err_emulated + 0x1.0p-11);
    NormError worse;
    worse.add(1.0 + 1e-2, 1.0, 1.0 + 1e-3);  // 10x the emulation's error
    EXPECT_FALSE(norm_bound(worse, default_floor(DType::F16)).ok);
    NormError zeros;  // all-zero reference: only exact zeros pass
    zeros.add(0.0, 0.0, 0.0);
    EXPECT_TRUE(norm_bound(zeros, 1.0).ok);
    zeros.add(1e-9, 0.0, 0.0);
    EXPECT_FALSE(norm_bound(zeros, 1.0).ok);
}

}  // namespace
}  // namespace flashport::test
