// matmul (x · Wᵀ + b) against a float64 reference, on both kernels (GEMV and BLAS), every ISA table
// this CPU can run, 1 and 3 threads, odd sizes, padded rows and mixed dtypes.
//
// Tolerance: the output is rounded once to its dtype (half an ulp), and the fp32 accumulation of k
// products has an error of about sqrt(k) · 2^-24 · Σ|x·w| (rounding errors of a sum add like a random
// walk). We allow 1 ulp plus 8 times that walk: a wrong element, a missed tail or a dropped bias is
// larger by orders of magnitude.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <vector>

#include "backends/cpu/kernels/tile_kernels.h"
#include "flashport/ops.h"
#include "ops_test_util.h"

namespace flashport::test {
namespace {

struct MatmulCase {
    int64_t tokens, in, out;
    DType x, w, o;
    bool bias;
    int64_t pad;  // spare elements after each row of x, weight and out
};

std::string case_name(const MatmulCase& c) {
    std::ostringstream os;
    os << c.tokens << "x" << c.in << "x" << c.out << "_" << short_name(c.x) << "_" << short_name(c.w) << "_"
       << short_name(c.o) << (c.bias ? "_bias" : "") << (c.pad ? "_pad" : "");
    return os.str();
}

void run_matmul_case(const MatmulCase& c, MatmulImpl impl, uint64_t seed) {
    SCOPED_TRACE(case_name(c) + " impl " + matmul_impl_name(impl));
    Rng rng(seed);
    HostTensor x(c.x, {c.tokens, c.in}, c.pad), w(c.w, {c.out, c.in}, c.pad), out(c.o, {c.tokens, c.out}, c.pad);
    HostTensor b(c.w, {c.out});
    x.fill_normal(rng);
    w.fill_normal(rng, 0.2);
    b.fill_normal(rng);
    std::vector<double> ref(size_t(out.numel())), walk(size_t(out.numel()));
    for (int64_t t = 0; t < c.tokens; ++t)
        for (int64_t n = 0; n < c.out; ++n) {
            double s = c.bias ? b.get(n) : 0.0, mag = std::fabs(s);
            for (int64_t i = 0; i < c.in; ++i) {
                const double p = x.get(t * c.in + i) * w.get(n * c.in + i);
                s += p;
                mag += std::fabs(p);
            }
            ref[size_t(t * c.out + n)] = s;
            walk[size_t(t * c.out + n)] = 8.0 * std::sqrt(double(c.in + 1)) * 0x1.0p-24 * mag;
        }
    const std::string kernel = matmul(out.view, x.view, w.view, c.bias ? &b.view : nullptr, impl);
    EXPECT_FALSE(kernel.empty());
    EXPECT_OPS_CLOSE(compare(out, ref, 1.0, 0.0, &walk), false);
    EXPECT_TRUE(out.padding_intact());
}

std::vector<MatmulCase> cases() {
    std::vector<MatmulCase> v;
    const DType all[] = {DType::F32, DType::F16, DType::BF16};
    // Every dtype, uniform: decode sizes (1..8 tokens), just past the GEMV limit, tails of every
    // vector width (in = 3, 33, 67), and an output count that no row block divides.
    for (DType d : all)
        for (auto [t, i, o] : {std::tuple{1, 33, 17}, {3, 67, 45}, {8, 129, 70}, {9, 64, 33}, {17, 3, 130},
                               {5, 896, 61}, {1, 1, 1}})
            for (bool bias : {false, true}) v.push_back({t, i, o, d, d, d, bias, bias ? 3 : 0});
    // Mixed: fp32 activations against bf16/fp16 weights, bf16 activations with an fp32 output.
    v.push_back({4, 77, 29, DType::F32, DType::BF16, DType::F32, true, 1});
    v.push_back({2, 50, 31, DType::F32, DType::F16, DType::BF16, false, 0});
    v.push_back({11, 40, 23, DType::BF16, DType::F32, DType::F32, true, 2});
    return v;
}

class MatmulTest : public ::testing::TestWithParam<MatmulCase> {};

TEST_P(MatmulTest, GemvBlasAndAutoMatchReference) {
    const uint64_t seed = test_seed();
    for (MatmulImpl impl : {MatmulImpl::GEMV, MatmulImpl::BLAS, MatmulImpl::AUTO}) run_matmul_case(GetParam(), impl, seed);
}

std::string param_name(const ::testing::TestParamInfo<MatmulCase>& p) { return case_name(p.param); }
INSTANTIATE_TEST_SUITE_P(Ops, MatmulTest, ::testing::ValuesIn(cases()), param_name);

// The GEMV tables of every ISA this CPU runs, with 1 and 3 threads (3: row ranges that don't split
// evenly), on a decode-sized bf16 problem.
TEST(Matmul, EveryIsaAndThreadCount) {
    const uint64_t seed = test_seed();
    const char* saved = std::getenv("FLASHPORT_CPU_ISA");
    const std::string restore = saved ? saved : "";
    const int threads_before = omp_get_max_threads();
    for (const char* isa : {"generic", "avx2", "avx512"}) {
        if (!cpu::tile_kernels_for(isa)) continue;
        setenv("FLASHPORT_CPU_ISA", isa, 1);
        for (int threads : {1, 3}) {
            omp_set_num_threads(threads);
            SCOPED_TRACE(std::string(isa) + " threads " + std::to_string(threads));
            for (DType d : {DType::BF16, DType::F16, DType::F32}) {
                run_matmul_case({3, 131, 203, DType::F32, d, DType::F32, true, 5}, MatmulImpl::GEMV, seed);
                run_matmul_case({1, 896, 97, d, d, d, false, 0}, MatmulImpl::GEMV, seed);
            }
            HostTensor x(DType::F32, {1, 8}), w(DType::BF16, {4, 8}), o(DType::F32, {1, 4});
            EXPECT_EQ(plan_matmul(o.view, x.view, w.view, nullptr), std::string("cpu.gemv.") + isa);
        }
    }
    omp_set_num_threads(threads_before);
    if (saved) setenv("FLASHPORT_CPU_ISA", restore.c_str(), 1);
    else unsetenv("FLASHPORT_CPU_ISA");
}

TEST(Matmul, AutoPicksGemvForDecodeAndBlasForPrefill) {
    HostTensor x8(DType::BF16, {8, 16}), x9(DType::BF16, {9, 16}), w(DType::BF16, {4, 16});
    HostTensor o8(DType::BF16, {8, 4}), o9(DType::BF16, {9, 4});
    EXPECT_NE(plan_matmul(o8.view, x8.view, w.view, nullptr).find("gemv"), std::string::npos);
    EXPECT_EQ(plan_matmul(o9.view, x9.view, w.view, nullptr), "cpu.blas");
}

TEST(Matmul, EmptyInnerDimensionGivesBias) {
    for (MatmulImpl impl : {MatmulImpl::GEMV, MatmulImpl::BLAS}) {
        std::vector<float> x(1), w(1), bias = {1.5f, -2.0f, 0.25f}, out(6, NAN);
        TensorView xv(x.data(), DType::F32, {2, 0}), wv(w.data(), DType::F32, {3, 0}), bv(bias.data(), DType::F32, {3});
        TensorView ov(out.data(), DType::F32, {2, 3});
        matmul(ov, xv, wv, &bv, impl);
        for (int i = 0; i < 6; ++i) EXPECT_EQ(out[size_t(i)], bias[size_t(i % 3)]) << matmul_impl_name(impl);
    }
}

}  // namespace
}  // namespace flashport::test
