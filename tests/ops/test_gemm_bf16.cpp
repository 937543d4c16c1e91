// The AVX512-BF16 prefill GEMM (backends/cpu/kernels/gemm_bf16.h) against a float64 reference on odd
// shapes: the edges of its blocking (6 tokens × 64 rows register blocks, k packed 256 at a time as
// pairs): tokens 1, 5, 6, 7, 13, 97; k 1, 2, 3 (an odd k's last pair is half past the end), 31, 33,
// 67, 255, 257 (one past a packed chunk), 901, 1023, 1025; rows 1, 5, 15, 16, 17, 31, 33, 47, 64, 65,
// 129 (ragged vectors and panels); padded row strides and unaligned starts; NaN in every padding;
// outputs poisoned with NaN and with a huge finite value, which the kernel must overwrite, not add
// to. Skipped, saying so, on CPUs without avx512_bf16. The matmul op's own cases (test_matmul.cpp)
// run through it too wherever x and weight are bf16.
//
// Tolerance. The kernel multiplies bf16 values exactly and sums each output in one fp32 lane, in
// order: ceil(k/2) vdpbf16ps steps, two roundings each (the same order class as sgemm's micro-kernel
// on the fp32 route). Against Σ x_bf16·w (float64) the error is below (k + 2)·2^-24 · Σ|x·w|
// (Higham's γ_n bound, n = k + 1 roundings, plus slack). fp32 activations rounded to bf16 first move
// each product by up to 2^-8 of itself (bf16 keeps 8 significant bits): against the unrounded x the
// bound adds 2^-8 · Σ|x·w|.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/cpu/kernels/gemm_bf16.h"
#include "flashport/dtype.h"
#include "flashport/error.h"
#include "flashport/ops.h"
#include "support/rng.h"
#include "support/seed.h"

namespace flashport::test {
namespace {

struct Shape {
    int64_t tokens, k, rows;
};

void check_shape(const Shape& s, float poison, Rng& rng) {
    // Padded strides (ld = k + 3) and a start one element past the allocation's, so no row is aligned.
    const int64_t ldx = s.k + 3, ldw = s.k + 5, ldy = s.rows + 2;
    std::vector<float> x32(size_t(s.tokens * s.k));
    std::vector<uint16_t> xb(size_t(s.tokens * ldx + 1), 0x7FC0), wb(size_t(s.rows * ldw + 1), 0x7FC0);  // NaN pads
    std::vector<float> y(size_t(s.tokens * ldy), poison);
    for (int64_t t = 0; t < s.tokens; ++t)
        for (int64_t i = 0; i < s.k; ++i) {
            x32[size_t(t * s.k + i)] = float(rng.normal());
            xb[size_t(1 + t * ldx + i)] = float_to_bf16(x32[size_t(t * s.k + i)]);
        }
    for (int64_t n = 0; n < s.rows; ++n)
        for (int64_t i = 0; i < s.k; ++i) wb[size_t(1 + n * ldw + i)] = float_to_bf16(float(0.2 * rng.normal()));
    // NaN in the padding would poison a sum that read past k: the masked tail must not.
    cpu::gemm_bf16(xb.data() + 1, ldx, s.tokens, wb.data() + 1, ldw, s.rows, s.k, y.data(), ldy);

    const double sum_bound = (double(s.k) + 2) * 0x1.0p-24, round_bound = 0x1.0p-8;
    for (int64_t t = 0; t < s.tokens; ++t)
        for (int64_t n = 0; n < s.rows; ++n) {
            double exact_bf16 = 0, exact_f32 = 0, mag = 0;
            for (int64_t i = 0; i < s.k; ++i) {
                const double w = bf16_to_float(wb[size_t(1 + n * ldw + i)]);
                exact_bf16 += double(bf16_to_float(xb[size_t(1 + t * ldx + i)])) * w;
                exact_f32 += double(x32[size_t(t * s.k + i)]) * w;
                mag += std::fabs(double(x32[size_t(t * s.k + i)]) * w);
            }
            const double got = y[size_t(t * ldy + n)];
            ASSERT_LE(std::fabs(got - exact_bf16), sum_bound * mag * 1.01 + 1e-30)
                << s.tokens << "x" << s.k << "x" << s.rows << " at t " << t << " n " << n;
            ASSERT_LE(std::fabs(got - exact_f32), (sum_bound + round_bound) * mag * 1.01 + 1e-30)
                << s.tokens << "x" << s.k << "x" << s.rows << " at t " << t << " n " << n;
        }
    for (int64_t t = 0; t < s.tokens; ++t)  // the row padding of y is never written
        for (int64_t n = s.rows; n < ldy; ++n) {
            const float v = y[size_t(t * ldy + n)];
            ASSERT_TRUE(std::isnan(poison) ? std::isnan(v) : v == poison) << s.tokens << "x" << s.k << "x" << s.rows;
        }
}

TEST(GemmBf16, MatchesFloat64OnOddShapes) {
    if (!cpu::has_gemm_bf16()) GTEST_SKIP() << "this CPU lacks avx512_bf16 (the fp32 OpenBLAS path serves bf16)";
    Rng rng(test_seed());
    for (int64_t tokens : {1, 5, 6, 7, 13, 97})
        for (int64_t k : {1, 2, 3, 31, 33, 67, 255, 257, 901, 1023, 1025})
            for (int64_t rows : {1, 5, 15, 16, 17, 31, 33, 47, 64, 65, 129})
                for (float poison : {NAN, 3e38f}) check_shape({tokens, k, rows}, poison, rng);
}

// matmul's BLAS route names the kernel it runs; FLASHPORT_CPU_GEMM=fp32 keeps OpenBLAS.
TEST(GemmBf16, MatmulRouteAndFallback) {
    if (!cpu::has_gemm_bf16()) GTEST_SKIP() << "this CPU lacks avx512_bf16 (the fp32 OpenBLAS path serves bf16)";
    const char* saved = std::getenv("FLASHPORT_CPU_GEMM");
    const std::string restore = saved ? saved : "";
    std::vector<uint16_t> x(9 * 16, 0x3F80), w(4 * 16, 0x3F80), o(9 * 4);
    const TensorView xv(x.data(), DType::BF16, {9, 16}), wv(w.data(), DType::BF16, {4, 16});
    const TensorView ov(o.data(), DType::BF16, {9, 4});
    unsetenv("FLASHPORT_CPU_GEMM");
    const std::string isa = std::getenv("FLASHPORT_CPU_ISA") ? std::getenv("FLASHPORT_CPU_ISA") : "";
    if (isa.empty() || isa == "avx512") {
        EXPECT_EQ(plan_matmul(ov, xv, wv, nullptr), "cpu.matmul.bf16.avx512bf16");
        matmul(ov, xv, wv, nullptr, MatmulImpl::BLAS);
        for (uint16_t v : o) EXPECT_EQ(bf16_to_float(v), 16.0f);
    }
    setenv("FLASHPORT_CPU_GEMM", "fp32", 1);
    EXPECT_EQ(plan_matmul(ov, xv, wv, nullptr), "cpu.matmul.blas");
    setenv("FLASHPORT_CPU_GEMM", "amx", 1);
    EXPECT_THROW(plan_matmul(ov, xv, wv, nullptr), Error);
    if (saved)
        setenv("FLASHPORT_CPU_GEMM", restore.c_str(), 1);
    else
        unsetenv("FLASHPORT_CPU_GEMM");
}

}  // namespace
}  // namespace flashport::test
