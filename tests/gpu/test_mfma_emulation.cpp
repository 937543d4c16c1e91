// The MFMA and dot2 emulation (src/backends/gpu/vendor/hip_cpu_mfma.h) against AMD's published lane
// layouts, before any kernel relies on it. Runs under the hip-cpu preset only (a 64-lane wave on the
// CPU); no AMD GPU was available, so this checks the emulator against AMD's documentation, which in
// turn describes the hardware.
//
// Sources of the layouts (reproduced here as index formulas, written for this test):
//  - AMD lab notes "AMD matrix cores" (https://gpuopen.com/learn/amd-lab-notes/amd-lab-notes-matrix-cores-README/),
//    whose examples were run on MI100/MI200: repository amd/amd-lab-notes,
//    matrix-cores/src/mfma_fp32_32x32x8fp16.cpp and matrix-cores/src/mfma_fp32_16x16x16fp16.cpp. One
//    wave is launched as dim3(M, 64 / M): tx = lane % M, ty = lane / M.
//      A (M x K, row-major): register element e of lane (tx, ty) holds A[tx][4 ty + e].
//      B (K x N, row-major): element e of lane (tx, ty) holds B[4 ty + e][tx].
//      D 32x32x8:   register 4 g + e of lane (tx, ty) holds D[8 g + 4 ty + e][tx]   (g < 4, e < 4).
//      D 16x16x16:  register e of lane (tx, ty) holds D[4 ty + e][tx].
//  - ROCm/amd_matrix_instruction_calculator (matrix_calculator.py, README): the same instructions'
//    register layouts, and the bf16 `_1k` forms (v_mfma_f32_32x32x8bf16_1k, v_mfma_f32_16x16x16bf16_1k
//    on CDNA2/CDNA3) with the shapes and layouts of the f16 forms.
//  - v_dot2_f32_f16 (gfx906): D = A.lo * B.lo + A.hi * B.hi + C on each lane (AMD "Vega 7nm"
//    instruction set architecture guide, VOP3P opcodes).
//
// Checks: (1) layout, with integer-coded matrices whose sums are exact in any order, so the result of
// each lane's register must equal the documented element exactly; (2) random fp16/bf16 GEMMs against
// float64; (3) dot2. Two waves per block, fed different data, also check that each wave's exchange is
// its own.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/gpu/mfma.cuh"
#include "flashport/dtype.h"

namespace flashport::gpu {
namespace {

constexpr int LANES = 64, WAVES = 2, THREADS = LANES * WAVES;

// One instruction's shape and spelling.
template <int M_, bool BF16_>
struct Shape {
    static constexpr int M = M_, N = M_, K = 4 * 64 / M_, REGS = M_ * M_ / 64;
    static constexpr bool BF16 = BF16_;
};
using F16_32 = Shape<32, false>;
using BF16_32 = Shape<32, true>;
using F16_16 = Shape<16, false>;
using BF16_16 = Shape<16, true>;

// The lab notes' layouts (see the header comment), as (row, column) of the element a register holds.
template <typename S>
void doc_a(int lane, int e, int& i, int& k) {
    i = lane % S::M, k = 4 * (lane / S::M) + e;
}
template <typename S>
void doc_b(int lane, int e, int& k, int& j) {
    k = 4 * (lane / S::N) + e, j = lane % S::N;
}
template <typename S>
void doc_d(int lane, int reg, int& i, int& j) {
    const int tx = lane % S::N, ty = lane / S::N;
    if constexpr (S::M == 32)
        i = 8 * (reg / 4) + 4 * ty + reg % 4;
    else
        i = 4 * ty + reg;
    j = tx;
}

// Per thread: 4 A values, 4 B values (raw 16-bit), REGS accumulator floats in, REGS floats out.
template <typename S>
__global__ void one_mfma_kernel(const uint16_t* a, const uint16_t* b, const float* c, float* d) {
    const int t = int(threadIdx.x);
    fp_i16x4 av{}, bv{};
    for (int e = 0; e < 4; ++e) av[e] = short(a[4 * t + e]), bv[e] = short(b[4 * t + e]);
    if constexpr (S::M == 32) {
        fp_f32x16 acc{};
        for (int r = 0; r < S::REGS; ++r) acc[r] = c[S::REGS * t + r];
        acc = S::BF16 ? fp_mfma_32x32x8_bf16(av, bv, acc) : fp_mfma_32x32x8_f16(av, bv, acc);
        for (int r = 0; r < S::REGS; ++r) d[S::REGS * t + r] = acc[r];
    } else {
        fp_f32x4 acc{};
        for (int r = 0; r < S::REGS; ++r) acc[r] = c[S::REGS * t + r];
        acc = S::BF16 ? fp_mfma_16x16x16_bf16(av, bv, acc) : fp_mfma_16x16x16_f16(av, bv, acc);
        for (int r = 0; r < S::REGS; ++r) d[S::REGS * t + r] = acc[r];
    }
}

__global__ void dot2_kernel(const uint32_t* a, const uint32_t* b, const float* c, float* d) {
    const int t = int(threadIdx.x);
    d[t] = fp_dot2_f32_f16(a[t], b[t], c[t]);
}

template <typename T>
T* to_device(const std::vector<T>& host) {
    void* p = nullptr;
    EXPECT_EQ(hipMalloc(&p, host.size() * sizeof(T)), hipSuccess);
    EXPECT_EQ(hipMemcpy(p, host.data(), host.size() * sizeof(T), hipMemcpyHostToDevice), hipSuccess);
    return static_cast<T*>(p);
}

// Matrices of one block's waves (index w) in row-major float form, and the instruction run on them.
template <typename S>
struct Problem {
    std::vector<float> A = std::vector<float>(WAVES * S::M * S::K), B = std::vector<float>(WAVES * S::K * S::N),
                       C = std::vector<float>(WAVES * S::M * S::N);
    float& a(int w, int i, int k) { return A[(w * S::M + i) * S::K + k]; }
    float& b(int w, int k, int j) { return B[(w * S::K + k) * S::N + j]; }
    float& c(int w, int i, int j) { return C[(w * S::M + i) * S::N + j]; }

    static uint16_t bits(float x) { return S::BF16 ? float_to_bf16(x) : float_to_fp16(x); }

    // Distributes A, B and C over the lanes by the documented layouts, runs one instruction per wave
    // and gathers D by the documented layout: D[w][i][j] in row-major order.
    std::vector<float> run() {
        std::vector<uint16_t> fa(4 * THREADS), fb(4 * THREADS);
        std::vector<float> fc(S::REGS * THREADS), fd(S::REGS * THREADS, NAN);
        for (int w = 0; w < WAVES; ++w)
            for (int lane = 0; lane < LANES; ++lane) {
                const int t = w * LANES + lane;
                for (int e = 0; e < 4; ++e) {
                    int i, k, j;
                    doc_a<S>(lane, e, i, k);
                    fa[4 * t + e] = bits(a(w, i, k));
                    doc_b<S>(lane, e, k, j);
                    fb[4 * t + e] = bits(b(w, k, j));
                }
                for (int r = 0; r < S::REGS; ++r) {
                    int i, j;
                    doc_d<S>(lane, r, i, j);
                    fc[S::REGS * t + r] = c(w, i, j);
                }
            }
        uint16_t *da = to_device(fa), *db = to_device(fb);
        float *dc = to_device(fc), *dd = to_device(fd);
        launch_kernel(one_mfma_kernel<S>, dim3(1), dim3(THREADS), 0, nullptr, da, db, dc, dd);
        EXPECT_EQ(hipDeviceSynchronize(), hipSuccess);
        EXPECT_EQ(hipMemcpy(fd.data(), dd, fd.size() * sizeof(float), hipMemcpyDeviceToHost), hipSuccess);
        for (void* p : {static_cast<void*>(da), static_cast<void*>(db), static_cast<void*>(dc), static_cast<void*>(dd)})
            EXPECT_EQ(hipFree(p), hipSuccess);
        std::vector<float> D(WAVES * S::M * S::N, NAN);
        for (int w = 0; w < WAVES; ++w)
            for (int lane = 0; lane < LANES; ++lane)
                for (int r = 0; r < S::REGS; ++r) {
                    int i, j;
                    doc_d<S>(lane, r, i, j);
                    D[(w * S::M + i) * S::N + j] = fd[S::REGS * (w * LANES + lane) + r];
                }
        return D;
    }
};

template <typename S>
class MfmaEmulation : public ::testing::Test {};
using Shapes = ::testing::Types<F16_32, BF16_32, F16_16, BF16_16>;
struct ShapeNames {
    template <typename S>
    static std::string GetName(int) {
        return std::string(S::M == 32 ? "32x32x8" : "16x16x16") + (S::BF16 ? "_bf16_1k" : "_f16");
    }
};
TYPED_TEST_SUITE(MfmaEmulation, Shapes, ShapeNames);

// Layout: for each k0, one of A and B is coded with each element's own (row, column) and the other
// selects k0, so D[i][j] = code(i, k0) + C[i][j] (or code(k0, j) + C[i][j]). Codes are integers
// 1..256 (exact in fp16 and bf16), C a distinct multiple of 512 per element: every sum is exact, so a
// register holding anything but the documented element fails by equality.
TYPED_TEST(MfmaEmulation, LayoutMatchesAmdLabNotes) {
    using S = TypeParam;
    for (int coded = 0; coded < 2; ++coded)  // 0: A coded, B selects; 1: B coded, A selects
        for (int k0 = 0; k0 < S::K; ++k0) {
            Problem<S> p;
            for (int w = 0; w < WAVES; ++w) {
                const int shift = w * 7;  // the second wave's codes differ from the first's
                for (int i = 0; i < S::M; ++i)
                    for (int k = 0; k < S::K; ++k)
                        p.a(w, i, k) = coded == 0 ? float((i * S::K + k + shift) % 256 + 1) : float(k == k0);
                for (int k = 0; k < S::K; ++k)
                    for (int j = 0; j < S::N; ++j)
                        p.b(w, k, j) = coded == 1 ? float((k * S::N + j + shift) % 256 + 1) : float(k == k0);
                for (int i = 0; i < S::M; ++i)
                    for (int j = 0; j < S::N; ++j) p.c(w, i, j) = float(512 * (i * S::N + j + w));
            }
            const std::vector<float> D = p.run();
            for (int w = 0; w < WAVES; ++w)
                for (int i = 0; i < S::M; ++i)
                    for (int j = 0; j < S::N; ++j) {
                        const float want = (coded == 0 ? p.a(w, i, k0) : p.b(w, k0, j)) + p.c(w, i, j);
                        ASSERT_EQ(D[(w * S::M + i) * S::N + j], want)
                            << "wave " << w << " D[" << i << "][" << j << "], k0 " << k0 << (coded ? ", B" : ", A")
                            << " coded";
                    }
        }
}

// Random inputs in [-1, 1) rounded to the 16-bit type, against a float64 GEMM. The emulation sums in
// float64 and rounds once, so each result is within half an ulp of float; the bound allows 4 ulps of
// the magnitude sum (what any fp32 accumulation order gives for K <= 16 with a few ulps to spare).
TYPED_TEST(MfmaEmulation, RandomGemmAgainstFloat64) {
    using S = TypeParam;
    std::mt19937 gen(15 + S::M + S::BF16);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    const auto round16 = [](float x) {
        return S::BF16 ? bf16_to_float(float_to_bf16(x)) : fp16_to_float(float_to_fp16(x));
    };
    for (int trial = 0; trial < 4; ++trial) {
        Problem<S> p;
        for (float& x : p.A) x = round16(dist(gen));
        for (float& x : p.B) x = round16(dist(gen));
        for (float& x : p.C) x = dist(gen);
        const std::vector<float> D = p.run();
        for (int w = 0; w < WAVES; ++w)
            for (int i = 0; i < S::M; ++i)
                for (int j = 0; j < S::N; ++j) {
                    double ref = p.c(w, i, j), mag = std::fabs(ref);
                    for (int k = 0; k < S::K; ++k) {
                        ref += double(p.a(w, i, k)) * double(p.b(w, k, j));
                        mag += std::fabs(double(p.a(w, i, k)) * double(p.b(w, k, j)));
                    }
                    ASSERT_NEAR(D[(w * S::M + i) * S::N + j], ref, 4 * std::ldexp(mag, -24))
                        << "wave " << w << " D[" << i << "][" << j << "]";
                }
    }
}

// v_dot2_f32_f16 per lane: exact on small integers (each lane its own), and within float rounding
// of float64 on random fp16 values, specials included (inf propagates, inf * 0 gives NaN).
TEST(Dot2Emulation, PerLaneDotOfTwoHalves) {
    std::mt19937 gen(906);
    std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
    std::vector<uint32_t> a(THREADS), b(THREADS);
    std::vector<float> c(THREADS), d(THREADS, NAN), want(THREADS);
    const auto pack = [](float lo, float hi) {
        return uint32_t(float_to_fp16(lo)) | uint32_t(float_to_fp16(hi)) << 16;
    };
    for (int t = 0; t < THREADS; ++t) {
        const bool exact = t % 2 == 0;
        const float a0 = exact ? float(t % 17) : dist(gen), a1 = exact ? -float(t % 5) : dist(gen);
        const float b0 = exact ? float(t % 3) : dist(gen), b1 = exact ? float(t % 11) : dist(gen);
        a[t] = pack(a0, a1), b[t] = pack(b0, b1), c[t] = exact ? float(t) : dist(gen);
        want[t] = float(double(fp16_to_float(uint16_t(a[t]))) * fp16_to_float(uint16_t(b[t])) +
                        double(fp16_to_float(uint16_t(a[t] >> 16))) * fp16_to_float(uint16_t(b[t] >> 16)) + c[t]);
    }
    a[1] = pack(INFINITY, 1.0f), b[1] = pack(2.0f, 1.0f), c[1] = 0.0f, want[1] = INFINITY;
    a[3] = pack(INFINITY, 1.0f), b[3] = pack(0.0f, 1.0f), c[3] = 0.0f, want[3] = NAN;
    uint32_t *da = to_device(a), *db = to_device(b);
    float *dc = to_device(c), *dd = to_device(d);
    launch_kernel(dot2_kernel, dim3(1), dim3(THREADS), 0, nullptr, da, db, dc, dd);
    ASSERT_EQ(hipDeviceSynchronize(), hipSuccess);
    ASSERT_EQ(hipMemcpy(d.data(), dd, d.size() * sizeof(float), hipMemcpyDeviceToHost), hipSuccess);
    for (void* p : {static_cast<void*>(da), static_cast<void*>(db), static_cast<void*>(dc), static_cast<void*>(dd)})
        EXPECT_EQ(hipFree(p), hipSuccess);
    for (int t = 0; t < THREADS; ++t) {
        if (std::isnan(want[t]))
            EXPECT_TRUE(std::isnan(d[t])) << "thread " << t;
        else if (t % 2 == 0 || std::isinf(want[t]))
            EXPECT_EQ(d[t], want[t]) << "thread " << t;
        else
            EXPECT_NEAR(d[t], want[t], 2 * std::ldexp(std::fabs(want[t]) + 32.0, -24)) << "thread " << t;
    }
}

}  // namespace
}  // namespace flashport::gpu
