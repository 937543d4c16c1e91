// matmul (x · Wᵀ + b) against a float64 reference, on both kernels (GEMV and BLAS), every ISA table
// this CPU can run, 1 and 3 threads, odd sizes, padded rows and mixed dtypes. The cases, reference and
// tolerance are matmul_case.h's, shared with the GPU test and the bench.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <vector>

#include "backends/cpu/kernels/tile_kernels.h"
#include "flashport/ops.h"
#include "ops/matmul_case.h"
#include "ops_test_util.h"

namespace flashport::test {
namespace {

void run_matmul_case(const MatmulShape& m, MatmulImpl impl, uint64_t seed) {
    Rng rng(seed);
    expect_cases_on_host({matmul_case(m, impl)}, rng);
}

class MatmulTest : public ::testing::TestWithParam<DType> {};

// The shared shapes (matmul_case.h) through every kernel: GEMV, BLAS and AUTO's choice; the BLAS
// route both ways (FLASHPORT_CPU_GEMM): the bf16 GEMM where the CPU has one, and OpenBLAS.
TEST_P(MatmulTest, GemvBlasAndAutoMatchReference) {
    const uint64_t seed = test_seed();
    const char* saved = std::getenv("FLASHPORT_CPU_GEMM");
    const std::string restore = saved ? saved : "";
    for (const char* gemm : {"bf16", "fp32"}) {
        setenv("FLASHPORT_CPU_GEMM", gemm, 1);
        SCOPED_TRACE(std::string("FLASHPORT_CPU_GEMM=") + gemm);
        for (const MatmulShape& m : matmul_shapes(GetParam()))
            for (MatmulImpl impl : {MatmulImpl::GEMV, MatmulImpl::BLAS, MatmulImpl::AUTO})
                run_matmul_case(m, impl, seed);
    }
    if (saved)
        setenv("FLASHPORT_CPU_GEMM", restore.c_str(), 1);
    else
        unsetenv("FLASHPORT_CPU_GEMM");
}

INSTANTIATE_TEST_SUITE_P(Ops, MatmulTest, ::testing::Values(DType::F32, DType::F16, DType::BF16),
                         [](const ::testing::TestParamInfo<DType>& p) { return std::string(short_name(p.param)); });

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
            EXPECT_EQ(plan_matmul(o.view, x.view, w.view, nullptr), std::string("cpu.matmul.gemv.") + isa);
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
    const std::string blas = plan_matmul(o9.view, x9.view, w.view, nullptr);
    EXPECT_TRUE(blas == "cpu.matmul.blas" || blas == "cpu.matmul.bf16.avx512bf16") << blas;
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
