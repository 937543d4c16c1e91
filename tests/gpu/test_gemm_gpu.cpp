// The GEMM kernels behind blas::gemm without a vendor BLAS (src/backends/gpu/gemm_kernels.h: portable,
// and MFMA where the build and device have it) against a
// float64 product of the stored inputs: odd m, n, k (1, 7, 97, 1023, 1025: every edge of a tile and of
// a k slice), both tiles of the portable kernel, every transpose, C in the inputs' dtype and in fp32,
// batch strides of 0 (a broadcast operand), aligned and misaligned operands (vector and scalar loads),
// alpha and beta.
//
// Poison: C's elements start as NaN when beta = 0 (the kernel must not read them), and C's padding
// columns (ldc > n) and the rows past m of the last batch entry must still be NaN afterwards.
//
// Tolerance: fp32 accumulation of k products in any order, with or without FMA, errs by at most
// (k + 2) · 2^-24 · (|alpha| Σ|a·b| + |beta·c|) (the standard γ_k bound), and C is rounded once to its
// dtype: half an ulp, 2^-24 (fp32), 2^-11 (fp16), 2^-8 (bf16) of |ref|. A wrong element, a dropped k
// slice or a misplaced tile is off by the size of a product.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "backends/gpu/blas.h"
#include "backends/gpu/gemm_kernels.h"
#include "backends/gpu/sm90.h"
#include "flashport/device.h"
#include "flashport/memory.h"
#include "flashport/ops.h"
#include "gpu_test_util.h"

namespace flashport {
namespace {

namespace blas = gpu::blas;

struct Shape {
    int64_t m, n, k, batch;
};

struct Layout {
    bool ta, tb;
    bool a_broadcast, b_broadcast;  // batch stride 0
    int64_t misalign;               // 0: leading dimensions padded to a multiple of 4 (vector loads); 1: base and
                                    // leading dimensions one element off (scalar loads)
};

// One case: C = alpha op(A) op(B) + beta C through the current backend, checked element by element.
void run_case(DType dt, DType ct, const Shape& s, const Layout& l, float alpha, float beta, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    const size_t es = dtype_size(dt), ces = dtype_size(ct);
    const auto ld_of = [&](int64_t cols) { return l.misalign ? cols + 1 : (cols + 3) / 4 * 4; };
    const int64_t lda = ld_of(l.ta ? s.m : s.k), ldb = ld_of(l.tb ? s.k : s.n), ldc = s.n + 3;
    const int64_t a_rows = l.ta ? s.k : s.m, b_rows = l.tb ? s.n : s.k;
    const int64_t sa = l.a_broadcast ? 0 : a_rows * lda, sb = l.b_broadcast ? 0 : b_rows * ldb, sc = s.m * ldc;
    const int64_t na = l.misalign + (l.a_broadcast ? a_rows * lda : sa * s.batch);
    const int64_t nb = l.misalign + (l.b_broadcast ? b_rows * ldb : sb * s.batch);
    const int64_t nc = sc * s.batch + ldc;  // one spare row after the last entry
    std::vector<uint8_t> a(size_t(na) * es), b(size_t(nb) * es), c(size_t(nc) * ces);
    std::vector<double> af(static_cast<size_t>(na)), bf(static_cast<size_t>(nb)), cf(static_cast<size_t>(nc));
    for (int64_t i = 0; i < na; ++i) {
        store_from_float(a.data() + i * es, dt, dist(rng));
        af[size_t(i)] = load_as_float(a.data() + i * es, dt);
    }
    for (int64_t i = 0; i < nb; ++i) {
        store_from_float(b.data() + i * es, dt, dist(rng));
        bf[size_t(i)] = load_as_float(b.data() + i * es, dt);
    }
    for (int64_t i = 0; i < nc; ++i) {
        const int64_t col = i % ldc;
        const bool inside = col < s.n && i < sc * s.batch;
        store_from_float(c.data() + i * ces, ct, inside && beta != 0.0f ? dist(rng) : NAN);
        cf[size_t(i)] = load_as_float(c.data() + i * ces, ct);
    }

    Buffer da(a.size(), Device::gpu()), db(b.size(), Device::gpu()), dc(c.size(), Device::gpu());
    copy_bytes(da.data(), Device::gpu(), a.data(), Device::cpu(), a.size());
    copy_bytes(db.data(), Device::gpu(), b.data(), Device::cpu(), b.size());
    copy_bytes(dc.data(), Device::gpu(), c.data(), Device::cpu(), c.size());
    const auto* pa = static_cast<const uint8_t*>(da.data()) + l.misalign * es;
    const auto* pb = static_cast<const uint8_t*>(db.data()) + l.misalign * es;
    blas::gemm(dc.data(), ldc, sc, ct, dt, s.m, s.n, s.k, alpha, beta, {pa, lda, sa, l.ta}, {pb, ldb, sb, l.tb},
               s.batch, nullptr);
    synchronize(Device::gpu());
    std::vector<uint8_t> got(c.size());
    copy_bytes(got.data(), Device::cpu(), dc.data(), Device::gpu(), c.size());

    const double unit = ct == DType::F32 ? 0x1.0p-24 : ct == DType::F16 ? 0x1.0p-11 : 0x1.0p-8;
    const double gamma = double(s.k + 2) * 0x1.0p-24;
    const std::string what =
        std::string(dtype_name(dt)) + "->" + dtype_name(ct) + " " + blas::backend_name(blas::backend()) +
        " m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k) +
        " batch=" + std::to_string(s.batch) + " ta=" + std::to_string(l.ta) + " tb=" + std::to_string(l.tb) +
        " bcast=" + std::to_string(l.a_broadcast) + std::to_string(l.b_broadcast) +
        " misalign=" + std::to_string(l.misalign) + " beta=" + std::to_string(beta);
    for (int64_t i = 0; i < nc; ++i) {
        const double g = load_as_float(got.data() + i * ces, ct);
        const int64_t z = i / sc, row = (i % sc) / ldc, col = i % ldc;
        if (col >= s.n || z >= s.batch) {
            ASSERT_TRUE(std::isnan(g)) << what << ": C's padding at " << i << " was written";
            continue;
        }
        const double* az = af.data() + l.misalign + z * sa;
        const double* bz = bf.data() + l.misalign + z * sb;
        double ref = 0.0, mag = 0.0;
        for (int64_t p = 0; p < s.k; ++p) {
            const double x = l.ta ? az[p * lda + row] : az[row * lda + p];
            const double y = l.tb ? bz[col * ldb + p] : bz[p * ldb + col];
            ref += x * y;
            mag += std::fabs(x * y);
        }
        ref *= alpha;
        mag *= std::fabs(alpha);
        if (beta != 0.0f) {
            ref += double(beta) * cf[size_t(i)];
            mag += std::fabs(double(beta) * cf[size_t(i)]);
        }
        const double tol = unit * std::fabs(ref) + gamma * mag + 1e-30;
        ASSERT_LE(std::fabs(g - ref), tol)
            << what << " at (" << z << "," << row << "," << col << "): got " << g << " ref " << ref << " tol " << tol;
    }
}

// The shapes: every one runs at every dtype, C dtype and transpose. The first few are edges (1, 7,
// 97, k of 1023 and 1025 around the 8-deep slices); the last take the 128x128 tile with ragged edges.
const std::vector<Shape>& shapes() {
    static const std::vector<Shape> v{{1, 1, 1, 1},    {7, 1, 97, 2},    {1, 7, 1025, 1},
                                      {97, 7, 33, 3},  {9, 13, 1023, 1}, {65, 97, 9, 2},
                                      {7, 130, 16, 1}, {257, 255, 7, 1}, {129, 250, 17, 2}};
    return v;
}

// Runs the grid through `backend` for the given input dtypes.
void run_grid(blas::Backend backend, const std::vector<DType>& dtypes) {
    const blas::Backend saved = blas::backend();
    blas::set_backend(backend);
    bool saw_big = false, saw_small = false;
    uint32_t seed = 1;
    for (DType dt : dtypes)
        for (DType ct : {dt, DType::F32}) {
            for (const Shape& s : shapes()) {
                const std::string tile = blas::gemm_portable_tile(s.m, s.n);
                saw_big |= tile == "128x128";
                saw_small |= tile == "64x64";
                for (int t = 0; t < 4; ++t) {
                    // Alternate the layouts so each shape meets broadcasts, misalignment and beta.
                    const Layout l{(t & 1) != 0, (t & 2) != 0, s.batch > 1 && t == 1, s.batch > 1 && t == 2,
                                   int64_t((seed % 3 == 0) ? 1 : 0)};
                    const float beta = seed % 2 == 0 ? 0.5f : 0.0f;
                    run_case(dt, ct, s, l, seed % 5 == 0 ? -1.25f : 1.0f, beta, seed);
                    ++seed;
                    if (::testing::Test::HasFatalFailure()) {
                        blas::set_backend(saved);
                        return;
                    }
                }
            }
            if (dt == DType::F32) break;  // fp32 -> fp32 once
        }
    EXPECT_TRUE(saw_big && saw_small) << "the shapes must reach both tiles";
    blas::set_backend(saved);
}

TEST(GemmPortable, OddShapesMatchFloat64) {
    FP_SKIP_WITHOUT_GPU();
    run_grid(blas::Backend::PORTABLE, {DType::F32, DType::F16, DType::BF16});
}

// The MFMA kernel (AMD matrix cores; under the HIP CPU Runtime's instruction emulation, which reports
// gfx90a) on the same grid, fp16 and bf16 inputs. Skips where the build or device lacks it.
TEST(GemmMfma, OddShapesMatchFloat64) {
    FP_SKIP_WITHOUT_GPU();
    if (!blas::mfma_available()) GTEST_SKIP() << "no MFMA GEMM in this build or on this device";
    {
        const blas::Backend saved = blas::backend();
        blas::set_backend(blas::Backend::MFMA);
        EXPECT_EQ(blas::backend_for(DType::BF16), blas::Backend::MFMA);
        EXPECT_EQ(blas::backend_for(DType::F32), blas::Backend::PORTABLE) << "fp32 inputs take the portable kernel";
        EXPECT_STREQ(blas::gemm_name(DType::F16), "mfma-gemm");
        EXPECT_STREQ(blas::gemm_name(DType::F32), "portable-gemm");
        blas::set_backend(saved);
    }
    run_grid(blas::Backend::MFMA, {DType::F16, DType::BF16});
}

// alpha = 0 with beta = 0 writes zeros (no NaN from C), and k = 0 gives beta · C.
TEST(GemmPortable, EmptySumsAndZeroAlpha) {
    FP_SKIP_WITHOUT_GPU();
    const blas::Backend saved = blas::backend();
    blas::set_backend(blas::Backend::PORTABLE);
    run_case(DType::BF16, DType::F32, {33, 17, 0, 2}, {false, true, false, false, 0}, 1.0f, 0.5f, 7);
    run_case(DType::F16, DType::F16, {33, 17, 0, 1}, {true, false, false, false, 0}, 1.0f, 0.0f, 8);
    run_case(DType::F32, DType::F32, {70, 9, 12, 1}, {false, false, false, false, 0}, 0.0f, 0.0f, 9);
    blas::set_backend(saved);
}

// The probes' operands: a and b, 1024 normal values each in `dt` (their bytes), and the same values
// as doubles for the float64 reference (a drawn before b, element by element, from one generator).
void probe_operands(DType dt, unsigned seed, std::vector<uint8_t>& a, std::vector<double>& af,
                    std::vector<uint8_t>& b, std::vector<double>& bf) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    a.assign(64 * 16 * 2, 0), b.assign(64 * 16 * 2, 0), af.assign(64 * 16, 0.0), bf.assign(64 * 16, 0.0);
    for (int i = 0; i < 64 * 16; ++i) {
        store_from_float(a.data() + 2 * i, dt, dist(rng));
        store_from_float(b.data() + 2 * i, dt, dist(rng));
        af[size_t(i)] = load_as_float(a.data() + 2 * i, dt);
        bf[size_t(i)] = load_as_float(b.data() + 2 * i, dt);
    }
}

// wgmma.cuh's shared-memory layout, descriptors and accumulator map, on one 64 x 64 x 16 product
// (sm90.h: wgmma_probe), against float64: every one of the 4096 entries, d poisoned with NaN first.
// Products of fp16/bf16 values are exact in fp32, so the only error is the fp32 sum of 16 of them:
// 18 · 2^-24 · Σ|a·b|. A wrong descriptor or fragment map puts whole rows or columns elsewhere.
TEST(Wgmma, ProbeMatchesFloat64) {
    FP_SKIP_WITHOUT_GPU();
    if (!gpu::sm90_available()) GTEST_SKIP() << "wgmma needs compute capability 9.0 (H100/H200) and a CUDA build";
    for (DType dt : {DType::F16, DType::BF16}) {
        std::vector<uint8_t> a, b;
        std::vector<double> af, bf;
        probe_operands(dt, dt == DType::F16 ? 17u : 29u, a, af, b, bf);
        std::vector<float> d(64 * 64, NAN);
        Buffer da(a.size(), Device::gpu()), db(b.size(), Device::gpu()), dd(d.size() * 4, Device::gpu());
        copy_bytes(da.data(), Device::gpu(), a.data(), Device::cpu(), a.size());
        copy_bytes(db.data(), Device::gpu(), b.data(), Device::cpu(), b.size());
        copy_bytes(dd.data(), Device::gpu(), d.data(), Device::cpu(), d.size() * 4);
        gpu::wgmma_probe(da.data(), db.data(), static_cast<float*>(dd.data()), dt);
        synchronize(Device::gpu());
        copy_bytes(d.data(), Device::cpu(), dd.data(), Device::gpu(), d.size() * 4);
        int bad = 0;
        for (int r = 0; r < 64; ++r)
            for (int c = 0; c < 64; ++c) {
                double ref = 0.0, mag = 0.0;
                for (int k = 0; k < 16; ++k) {
                    ref += af[size_t(r * 16 + k)] * bf[size_t(c * 16 + k)];
                    mag += std::fabs(af[size_t(r * 16 + k)] * bf[size_t(c * 16 + k)]);
                }
                const double got = d[size_t(r * 64 + c)];
                if (!(std::fabs(got - ref) <= 18 * 0x1.0p-24 * mag + 1e-30) && bad++ < 5)
                    ADD_FAILURE() << dtype_name(dt) << " d[" << r << ", " << c << "] = " << got << ", float64 " << ref;
            }
        EXPECT_EQ(bad, 0) << dtype_name(dt) << ": entries off";
    }
}

// How many of the candidate MN-major placements give a · b (float64) through wgmma_probe_mn_major, each
// printed with its count of wrong entries; fails where none does.
void expect_some_mn_layout(const std::vector<gpu::WgmmaMnLayout>& candidates) {
    for (DType dt : {DType::F16, DType::BF16}) {
        std::vector<uint8_t> a, b;
        std::vector<double> af, bf;
        probe_operands(dt, dt == DType::F16 ? 41u : 43u, a, af, b, bf);
        Buffer da(a.size(), Device::gpu()), db(b.size(), Device::gpu()), dd(64 * 64 * 4, Device::gpu());
        copy_bytes(da.data(), Device::gpu(), a.data(), Device::cpu(), a.size());
        copy_bytes(db.data(), Device::gpu(), b.data(), Device::cpu(), b.size());
        int matches = 0;
        for (const gpu::WgmmaMnLayout& l : candidates) {
            std::vector<float> d(64 * 64, NAN);
            copy_bytes(dd.data(), Device::gpu(), d.data(), Device::cpu(), d.size() * 4);
            gpu::wgmma_probe_mn_major(da.data(), db.data(), static_cast<float*>(dd.data()), dt, l);
            synchronize(Device::gpu());
            copy_bytes(d.data(), Device::cpu(), dd.data(), Device::gpu(), d.size() * 4);
            int bad = 0;
            for (int r = 0; r < 64; ++r)
                for (int c = 0; c < 64; ++c) {
                    double ref = 0.0, mag = 0.0;
                    for (int k = 0; k < 16; ++k) {
                        ref += af[size_t(r * 16 + k)] * bf[size_t(k * 64 + c)];
                        mag += std::fabs(af[size_t(r * 16 + k)] * bf[size_t(k * 64 + c)]);
                    }
                    bad += !(std::fabs(d[size_t(r * 64 + c)] - ref) <= 18 * 0x1.0p-24 * mag + 1e-30);
                }
            if (l.swizzle128)
                std::printf("[ measured ] %s MN-major B, 128-byte swizzle, k groups %u B apart, LBO %u, SBO %u: "
                            "%d of 4096 entries off\n",
                            dtype_name(dt), l.k_group_bytes, l.lbo, l.sbo, bad);
            else
                std::printf("[ measured ] %s MN-major B, k groups %u B apart, column groups %u B apart, LBO %u, "
                            "SBO %u: %d of 4096 entries off\n",
                            dtype_name(dt), l.k_group_bytes, l.n_group_bytes, l.lbo, l.sbo, bad);
            matches += bad == 0;
        }
        EXPECT_GE(matches, 1) << dtype_name(dt) << ": no candidate layout gives a · b";
    }
}

// The MN-major B operand (wgmma_mma with TRANS_B): which leading / stride byte offsets describe which
// placement of the core matrices. Two placements (k groups side by side, or column groups side by
// side), each read with the two pairings of the descriptor's offsets. On the H200 (2026-12-04) the
// first and the fourth match: LBO is the distance between k groups, SBO between column groups. The
// wgmma kernel's untransposed V uses the fourth.
TEST(Wgmma, MnMajorBFindsItsLayout) {
    FP_SKIP_WITHOUT_GPU();
    if (!gpu::sm90_available()) GTEST_SKIP() << "wgmma needs compute capability 9.0 (H100/H200) and a CUDA build";
    expect_some_mn_layout({
        {128, 256, 128, 256}, {128, 256, 256, 128},     // k groups adjacent, column groups 256 bytes apart
        {1024, 128, 128, 1024}, {1024, 128, 1024, 128}  // column groups adjacent, k groups 1024 bytes apart
    });
}

// The same in the 128-byte swizzle layout, for V swizzled like Q and K (one 64-column atom: the field
// that is not the k groups' distance is unused here). k groups 1024 or 2048 bytes apart, each with the
// distance in LBO or in SBO: which fields match says where the k groups' distance goes, or that the
// hardware takes atoms as adjacent (both 1024 pairings match, neither 2048 one). Not yet run on an H200.
TEST(Wgmma, MnMajorSwizzledBFindsItsLayout) {
    FP_SKIP_WITHOUT_GPU();
    if (!gpu::sm90_available()) GTEST_SKIP() << "wgmma needs compute capability 9.0 (H100/H200) and a CUDA build";
    expect_some_mn_layout({
        {1024, 16, 1024, 2048, true}, {1024, 16, 2048, 1024, true},  // k groups adjacent 1024-byte atoms
        {2048, 16, 2048, 1024, true}, {2048, 16, 1024, 2048, true},  // a 1024-byte gap between them
    });
}

}  // namespace
}  // namespace flashport
