// The non-attention ops (flashport/ops.h) on GPU views against the same ops on the CPU, on fresh
// random inputs of odd sizes, every dtype, contiguous and strided views; GPU outputs are NaN-poisoned
// (HostTensor fills its bytes with NaN, padding included) before each run.
//
// Tolerances, against the CPU op's result at its value (ulp of the output dtype):
//   add, embedding, add_rms_norm's residual_out: bit for bit.
//   rms_norm: the block reduction sums the squares in another order than the CPU's SIMD loop, so the
//     fp32 scale may differ in its last bit: fp32 outputs within 2 ulps + 1e-5 relative; 16-bit
//     outputs within 2 ulps (a 1-ulp flip of the rounded x·scale, times the weight), and at least
//     97% of them identical (a moved rounding point would leave ~50%). Not 99.9%: a sum of n squares
//     in another order moves the scale by up to ~n·2^-24 relative, and each of the two bf16 roundings
//     flips for ~2^8 times that share of the elements; measured on the H200, one row of 896 bf16
//     values had 882 (98.4%) identical.
//   swiglu: the GPU's exp (double, rounded once) and glibc's expf disagree in the last bit for ~0.06%
//     of fp32 arguments; through the division and the product that is at most a few ulps: fp32
//     within 4 ulps; 16-bit within 2 ulps (a 1-ulp flip of the rounded silu, times up), >= 99.9%
//     identical.
//   rope: likewise cos/sin (double, rounded once) against glibc's cosf/sinf, which is not correctly
//     rounded for ~1.3% of fp32 angles: fp32 within 2 ulps + 2^-23 · (|x_i| + |x_partner|); 16-bit
//     within 2 ulps, >= 99.9% identical.
//   matmul: against a float64 product, |out − ref| <= ulp-sized rounding of out's dtype · |ref| +
//     1e-5 · Σ|x·w| (fp32 accumulation in the BLAS's order), for both GEMM backends.
// The error tests run without a GPU too: their checks fail before anything touches the device.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "backends/gpu/blas.h"
#include "backends/gpu/ops_gpu.h"
#include "common/error_text.h"
#include "flashport/device.h"
#include "flashport/error.h"
#include "flashport/memory.h"
#include "flashport/ops.h"
#include "gpu_op_case.h"
#include "gpu_ops_util.h"
#include "gpu_test_util.h"
#include "ops/argmax_case.h"
#include "ops/elementwise_case.h"
#include "ops/embedding_case.h"
#include "ops/matmul_case.h"
#include "ops/rms_norm_case.h"
#include "ops/rope_case.h"
#include "ops/ops_test_util.h"

using ::testing::HasSubstr;

namespace flashport::test {
namespace {

// Where a test tensor's rows sit in memory (not the attention harness's Placement, which is the order of
// the axes). PADDED rows are 3 elements apart more than their length (no vector access); PADDED4 by 4
// (vector access with outer strides); SHIFTED starts one element past an aligned address (no vector
// access).
enum class Placement { CONTIGUOUS, PADDED, PADDED4, SHIFTED };
constexpr Placement ALL_PLACEMENTS[] = {Placement::CONTIGUOUS, Placement::PADDED, Placement::PADDED4,
                                        Placement::SHIFTED};
const char* placement_name(Placement p) {
    return p == Placement::CONTIGUOUS ? "contiguous"
           : p == Placement::PADDED   ? "padded"
           : p == Placement::PADDED4  ? "padded4"
                                      : "shifted";
}

std::unique_ptr<HostTensor> make(DType dt, std::vector<int64_t> shape, Placement placement) {
    const int64_t pad = placement == Placement::PADDED ? 3 : placement == Placement::PADDED4 ? 4 : 0;
    auto t = std::make_unique<HostTensor>(dt, std::move(shape), pad);
    if (placement == Placement::SHIFTED) t->view.data = static_cast<char*>(t->view.data) + dtype_size(dt);
    return t;
}

// make, filled with normal values of standard deviation `sd`.
std::unique_ptr<HostTensor> make_normal(DType dt, std::vector<int64_t> shape, Placement placement, Rng& rng,
                                        double sd = 1.0) {
    auto t = make(dt, std::move(shape), placement);
    t->fill_normal(rng, sd);
    return t;
}

constexpr int64_t ROWS[] = {1, 7, 97, 1023, 1025};
constexpr int64_t DIMS[] = {40, 64, 896, 3584};

// Calls f(rows, dim, placement) for every rows x dim above, cycling through the placements.
template <typename F>
void for_each_size(F&& f) {
    int i = 0;
    for (int64_t rows : ROWS)
        for (int64_t dim : DIMS) {
            const Placement placement = ALL_PLACEMENTS[i++ % 4];
            SCOPED_TRACE(::testing::Message() << rows << "x" << dim << " " << placement_name(placement));
            f(rows, dim, placement);
        }
}
Placement next_placement(Placement p) {
    return ALL_PLACEMENTS[(int(p) + 1) % 4];
}

class GpuOps : public ::testing::TestWithParam<DType> {};
std::string dtype_param_name(const ::testing::TestParamInfo<DType>& info) { return short_name(info.param); }

// ---------------------------------------------------------------------------------------------- rms_norm

TEST_P(GpuOps, RmsNormMatchesCpu) {
    FP_SKIP_WITHOUT_GPU();
    const DType dt = GetParam();
    Rng rng(test_seed());
    for_each_size([&](int64_t rows, int64_t dim, Placement placement) {
        auto x = make_normal(dt, {rows, dim}, placement, rng);
        auto out = make(dt, {rows, dim}, next_placement(placement));
        HostTensor w(dt, {dim}), cpu_out(dt, {rows, dim});
        for (int64_t e = 0; e < x->numel(); e += dim * 3) x->set(e, x->get(e) * 40.0);  // rows of other scales
        w.fill_normal(rng, 0.5, 1.0);
        GpuTensor gx(*x), gw(w), gout(*out);
        rms_norm(gout.view, gx.view, gw.view, 1e-6f);
        rms_norm(cpu_out.view, x->view, w.view, 1e-6f);
        gout.download(*out);
        expect_matches_cpu(*out, cpu_out, ulps_for(dt, 2.0), NORM_EXACT, 1e-5);
    });
}

// Qwen3's q_norm: [tokens, heads, head_dim] sliced out of a fused projection, in place, and an fp32
// weight with a 16-bit x (mixed dtypes).
TEST_P(GpuOps, RmsNormOnHeadSlicesInPlace) {
    FP_SKIP_WITHOUT_GPU();
    const DType dt = GetParam();
    Rng rng(test_seed());
    for (int64_t tokens : {1, 97}) {
        HostTensor qkv(dt, {tokens, 14 + 2 * 2, 128}), w(DType::F32, {128});
        qkv.fill_normal(rng, 2.0);
        w.fill_normal(rng, 0.5, 1.0);
        qkv.view.shape[1] = 14;  // the q heads only
        GpuTensor gq(qkv), gw(w);
        HostTensor cpu(dt, {tokens, 14, 128});
        rms_norm(cpu.view, qkv.view, w.view, 1e-6f);
        rms_norm(gq.view, gq.view, gw.view, 1e-6f);
        gq.download(qkv);
        expect_matches_cpu(qkv, cpu, ulps_for(dt, 2.0), NEARLY, 1e-5);
    }
}

TEST_P(GpuOps, AddRmsNormMatchesCpuAndUnfusedGpu) {
    FP_SKIP_WITHOUT_GPU();
    const DType dt = GetParam();
    Rng rng(test_seed());
    int i = 0;
    for (int64_t rows : {int64_t(1), int64_t(7), int64_t(1025)})
        for (int64_t dim : {int64_t(40), int64_t(896), int64_t(3584)}) {
            const Placement placement = ALL_PLACEMENTS[i++ % 4];
            SCOPED_TRACE(::testing::Message() << rows << "x" << dim << " " << placement_name(placement));
            auto x = make(dt, {rows, dim}, placement);
            auto res = make(dt, {rows, dim}, Placement::CONTIGUOUS);
            HostTensor w(dt, {dim}), cpu_sum(dt, {rows, dim}), cpu_out(dt, {rows, dim});
            x->fill_normal(rng);
            res->fill_normal(rng, 3.0);
            w.fill_normal(rng, 0.5, 1.0);
            add_rms_norm(cpu_out.view, cpu_sum.view, x->view, res->view, w.view, 1e-6f);

            auto sum = make(dt, {rows, dim}, placement), out = make(dt, {rows, dim}, Placement::PADDED);
            GpuTensor gx(*x), gres(*res), gw(w), gsum(*sum), gout(*out);
            add_rms_norm(gout.view, gsum.view, gx.view, gres.view, gw.view, 1e-6f);
            gsum.download(*sum);
            gout.download(*out);
            expect_matches_cpu(*sum, cpu_sum, 0.0, EXACT);
            expect_matches_cpu(*out, cpu_out, ulps_for(dt, 2.0), NORM_EXACT, 1e-5);

            // The decoder's in-place form against the GPU's own add then rms_norm: the same bits.
            HostTensor unfused_sum(dt, {rows, dim}), unfused_out(dt, {rows, dim});
            GpuTensor gus(unfused_sum), guo(unfused_out);
            add(gus.view, gx.view, gres.view);
            rms_norm(guo.view, gus.view, gw.view, 1e-6f);
            add_rms_norm(gx.view, gres.view, gx.view, gres.view, gw.view, 1e-6f);
            gus.download(unfused_sum);
            guo.download(unfused_out);
            gres.download(*res);
            gx.download(*x);
            expect_matches_cpu(*res, unfused_sum, 0.0, EXACT);
            expect_matches_cpu(*x, unfused_out, 0.0, EXACT);
        }
}

// ---------------------------------------------------------------------------------------------- rope

std::vector<int64_t> positions_for(Rng& rng, int64_t n) {
    std::vector<int64_t> pos(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) pos[size_t(i)] = i % 5 == 4 ? rng.below(1 << 24) : rng.below(40000);
    return pos;
}

TEST_P(GpuOps, RopeMatchesCpu) {
    FP_SKIP_WITHOUT_GPU();
    const DType dt = GetParam();
    Rng rng(test_seed());
    struct Shape { int64_t n_heads, head_dim; double theta; };
    int i = 0;
    for (int64_t tokens : ROWS)
        for (const Shape& s : {Shape{14, 64, 1000000.0}, Shape{3, 40, 10000.0}, Shape{2, 128, 1000000.0}}) {
            const Placement placement = ALL_PLACEMENTS[i++ % 4];
            SCOPED_TRACE(::testing::Message()
                         << tokens << "x" << s.n_heads << "x" << s.head_dim << " " << placement_name(placement));
            auto x = make(dt, {tokens, s.n_heads, s.head_dim}, placement);
            auto out = make(dt, {tokens, s.n_heads, s.head_dim}, placement);
            HostTensor cpu(dt, {tokens, s.n_heads, s.head_dim});
            x->fill_normal(rng);
            const std::vector<int64_t> pos = positions_for(rng, tokens);
            rope(cpu.view, x->view, IndexView(pos.data(), tokens), {s.theta, 0});
            GpuTensor gx(*x), gout(*out);
            if (i % 2) {
                GpuIndices<int64_t> gp(pos);
                rope(gout.view, gx.view, gp.view, {s.theta, 0});
                gout.download(*out);
            } else {
                GpuIndices<int32_t> gp(std::vector<int32_t>(pos.begin(), pos.end()));
                rope(gout.view, gx.view, gp.view, {s.theta, 0});
                gout.download(*out);
            }
            const std::vector<double> tol = rope_cos_sin_tol(*x, s.head_dim);
            expect_matches_cpu(*out, cpu, ulps_for(dt, 2.0), NEARLY, 0.0, &tol);
        }
}

// Packed heads [tokens, n_heads * head_dim] (params.head_dim) sliced from a fused QKV, in place; and
// [batch, len, n_heads, head_dim].
TEST_P(GpuOps, RopeLayouts) {
    FP_SKIP_WITHOUT_GPU();
    const DType dt = GetParam();
    Rng rng(test_seed());
    const int64_t tokens = 97, n_heads = 7, head_dim = 64;
    HostTensor qkv(dt, {tokens, (n_heads + 2) * head_dim});
    qkv.fill_normal(rng);
    qkv.view.shape[1] = n_heads * head_dim;
    const std::vector<int64_t> pos = positions_for(rng, tokens);
    HostTensor cpu(dt, {tokens, n_heads * head_dim});
    rope(cpu.view, qkv.view, IndexView(pos.data(), tokens), {1e6, head_dim});
    const std::vector<double> tol = rope_cos_sin_tol(qkv, head_dim);
    GpuTensor gq(qkv);
    GpuIndices<int64_t> gp(pos);
    rope(gq.view, gq.view, gp.view, {1e6, head_dim});
    gq.download(qkv);
    expect_matches_cpu(qkv, cpu, ulps_for(dt, 2.0), NEARLY, 0.0, &tol);

    HostTensor x4(dt, {3, 7, 2, 128}), out4(dt, {3, 7, 2, 128}), cpu4(dt, {3, 7, 2, 128});
    x4.fill_normal(rng);
    const std::vector<int64_t> pos4 = positions_for(rng, 21);
    rope(cpu4.view, x4.view, IndexView(pos4.data(), 21), {1e4, 0});
    GpuTensor gx4(x4), go4(out4);
    GpuIndices<int64_t> gp4(pos4);
    rope(go4.view, gx4.view, gp4.view, {1e4, 0});
    go4.download(out4);
    const std::vector<double> tol4 = rope_cos_sin_tol(x4, 128);
    expect_matches_cpu(out4, cpu4, ulps_for(dt, 2.0), NEARLY, 0.0, &tol4);
}

// Positions outside [0, 2^24) are on the GPU, so not checked on the host: their tokens become NaN and
// the others are unaffected.
TEST_P(GpuOps, RopeBadPositionsGiveNanRows) {
    FP_SKIP_WITHOUT_GPU();
    const DType dt = GetParam();
    Rng rng(test_seed());
    HostTensor x(dt, {4, 2, 64}), out(dt, {4, 2, 64}), cpu(dt, {4, 2, 64});
    x.fill_normal(rng);
    const std::vector<int32_t> bad = {5, -1, 1 << 24, 9};
    const std::vector<int32_t> good = {5, 0, 0, 9};
    rope(cpu.view, x.view, IndexView(good.data(), 4), {1e4, 0});
    GpuTensor gx(x), gout(out);
    GpuIndices<int32_t> gp(bad);
    rope(gout.view, gx.view, gp.view, {1e4, 0});
    gout.download(out);
    for (int64_t e = 0; e < out.numel(); ++e) {
        const int64_t t = e / 128;
        if (t == 1 || t == 2)
            EXPECT_TRUE(std::isnan(out.get(e))) << "token " << t << " has a bad position";
        else
            EXPECT_NEAR(out.get(e), cpu.get(e), 2.0 * ulp(dt, cpu.get(e)) + 1e-6) << "element " << e;
    }
}

// ---------------------------------------------------------------------------------------------- swiglu, add

TEST_P(GpuOps, SwigluAndAddMatchCpu) {
    FP_SKIP_WITHOUT_GPU();
    const DType dt = GetParam();
    Rng rng(test_seed());
    for_each_size([&](int64_t rows, int64_t dim, Placement placement) {
        auto a = make_normal(dt, {rows, dim}, placement, rng, 3.0);
        auto b = make_normal(dt, {rows, dim}, next_placement(placement), rng);
        auto out = make(dt, {rows, dim}, placement);
        HostTensor cpu(dt, {rows, dim});
        GpuTensor ga(*a), gb(*b), gout(*out);

        swiglu(cpu.view, a->view, b->view);
        swiglu(gout.view, ga.view, gb.view);
        gout.download(*out);
        expect_matches_cpu(*out, cpu, ulps_for(dt, 4.0), NEARLY);

        add(cpu.view, a->view, b->view);
        add(gout.view, ga.view, gb.view);
        gout.download(*out);
        expect_matches_cpu(*out, cpu, 0.0, EXACT);
    });
}

// Every tensor in its own dtype, 3-D views, in place.
TEST(GpuOpsMixed, ElementwiseMixedDtypesInPlace) {
    FP_SKIP_WITHOUT_GPU();
    Rng rng(test_seed());
    HostTensor g(DType::BF16, {5, 3, 97}), u(DType::F32, {5, 3, 97}), o(DType::F16, {5, 3, 97}), cpu(DType::F16, {5, 3, 97});
    g.fill_normal(rng, 2.0);
    u.fill_normal(rng);
    GpuTensor gg(g), gu(u), go(o);
    swiglu(cpu.view, g.view, u.view);
    swiglu(go.view, gg.view, gu.view);
    go.download(o);
    expect_matches_cpu(o, cpu, 2.0, NEARLY);

    HostTensor cpu_sum(DType::F32, {5, 3, 97});
    add(cpu_sum.view, u.view, g.view);
    add(gu.view, gu.view, gg.view);  // in place, fp32 += bf16
    gu.download(u);
    expect_matches_cpu(u, cpu_sum, 0.0, EXACT);
}

// ---------------------------------------------------------------------------------------------- embedding

TEST_P(GpuOps, EmbeddingMatchesCpu) {
    FP_SKIP_WITHOUT_GPU();
    const DType dt = GetParam();
    Rng rng(test_seed());
    const int64_t vocab = 1000;
    int i = 0;
    for (int64_t tokens : ROWS)
        for (int64_t hidden : {int64_t(40), int64_t(64), int64_t(896)})
            for (DType out_dt : {dt, DType::F32, DType::BF16}) {
                const Placement placement = ALL_PLACEMENTS[i++ % 4];
                SCOPED_TRACE(::testing::Message() << tokens << "x" << hidden << " -> " << short_name(out_dt) << " "
                                                  << placement_name(placement));
                auto table = make(dt, {vocab, hidden}, placement);
                auto out = make(out_dt, {tokens, hidden}, ALL_PLACEMENTS[(i + 1) % 4]);
                HostTensor cpu(out_dt, {tokens, hidden});
                table->fill_normal(rng);
                std::vector<int64_t> ids(static_cast<size_t>(tokens));
                for (auto& id : ids) id = rng.below(vocab);
                ids.back() = vocab - 1;
                embedding(cpu.view, table->view, IndexView(ids.data(), tokens));
                GpuTensor gt(*table), gout(*out);
                GpuIndices<int64_t> gi(ids);
                embedding(gout.view, gt.view, gi.view);
                gout.download(*out);
                expect_matches_cpu(*out, cpu, 0.0, EXACT);
            }
}

TEST_P(GpuOps, EmbeddingBadIdsGiveNanRows) {
    FP_SKIP_WITHOUT_GPU();
    const DType dt = GetParam();
    Rng rng(test_seed());
    HostTensor table(dt, {10, 64}), out(dt, {4, 64});
    table.fill_normal(rng);
    const std::vector<int32_t> ids = {3, 10, -2, 9};
    GpuTensor gt(table), gout(out);
    GpuIndices<int32_t> gi(ids);
    embedding(gout.view, gt.view, gi.view);
    gout.download(out);
    for (int64_t c = 0; c < 64; ++c) {
        EXPECT_EQ(out.get(c), table.get(3 * 64 + c));
        EXPECT_TRUE(std::isnan(out.get(64 + c)) && std::isnan(out.get(128 + c))) << "ids 10 and -2 are outside [0, 10)";
        EXPECT_EQ(out.get(192 + c), table.get(9 * 64 + c));
    }
}

// ---------------------------------------------------------------------------------------------- argmax

// argmax_case.h's cases (planted ties, a -inf row, NaN and +inf rows, padded rows, up to Qwen's
// 152064-entry vocabulary): exactly the CPU's ids.
TEST_P(GpuOps, ArgmaxMatchesCpu) {
    FP_SKIP_WITHOUT_GPU();
    Rng rng(test_seed());
    expect_cases_on_gpu(argmax_cases(GetParam()), rng);
}

// ---------------------------------------------------------------------------------------------- matmul

struct MatmulCase {
    int64_t tokens, in, n_out;
    bool bias;
    Placement placement;
};

// impl BLAS: the GEMM (vendor or portable, whichever is set). GEMV: the GEMV. AUTO: the GEMV for one
// eligible token (16-byte rows), else the GEMM; the kernel name says which ran.
void run_matmul(DType dt, DType out_dt, DType bias_dt, const MatmulCase& m, Rng& rng,
                MatmulImpl impl = MatmulImpl::BLAS) {
    SCOPED_TRACE(::testing::Message() << short_name(dt) << "->" << short_name(out_dt) << " " << m.tokens << "x" << m.in
                                      << "->" << m.n_out << (m.bias ? " +bias " : " ") << placement_name(m.placement)
                                      << " " << gpu::blas::backend_name(gpu::blas::backend()) << " "
                                      << matmul_impl_name(impl));
    auto x = make(dt, {m.tokens, m.in}, m.placement);
    auto w = make(dt, {m.n_out, m.in}, m.placement == Placement::SHIFTED ? Placement::PADDED : m.placement);
    auto out = make(out_dt, {m.tokens, m.n_out}, m.placement);
    HostTensor b(bias_dt, {m.n_out});
    x->fill_normal(rng);
    w->fill_normal(rng, 0.05);
    b.fill_normal(rng);
    GpuTensor gx(*x), gw(*w), gout(*out), gb(b);
    const bool gemv = impl == MatmulImpl::GEMV ||
                      (impl == MatmulImpl::AUTO && m.tokens == 1 && gpu::gemv_ineligible_reason(gx.view, gw.view).empty());
    const std::string kernel = matmul(gout.view, gx.view, gw.view, m.bias ? &gb.view : nullptr, impl);
    EXPECT_EQ(kernel, gemv ? std::string("gpu.matmul.") + gpu::gemv_kernel_name(dt, m.tokens)
                           : std::string("gpu.matmul.") + gpu::blas::gemm_name(dt));
    gout.download(*out);
    const double unit = out_dt == DType::F32 ? 0x1.0p-23 : out_dt == DType::F16 ? 0x1.0p-11 : 0x1.0p-8;
    int64_t bad = 0;
    for (int64_t t = 0; t < m.tokens; ++t)
        for (int64_t n = 0; n < m.n_out; ++n) {
            double ref = m.bias ? b.get(n) : 0.0, mag = std::fabs(ref);
            for (int64_t k = 0; k < m.in; ++k) {
                const double p = x->get(t * m.in + k) * w->get(n * m.in + k);
                ref += p;
                mag += std::fabs(p);
            }
            const double got = out->get(t * m.n_out + n);
            const double tol = unit * std::fabs(ref) + 1e-5 * mag + 1e-30;
            if (!(std::fabs(got - ref) <= tol) && bad++ == 0)
                ADD_FAILURE() << "out[" << t << ", " << n << "] = " << got << ", float64 reference " << ref
                              << ", tolerance " << tol;
        }
    EXPECT_EQ(bad, 0) << "elements out of tolerance";
    EXPECT_TRUE(out->padding_intact());
}

// With a bias, GPU and CPU compute round(fp32 sum + bias): the same bits wherever the two fp32 sums
// agree, which for short sums of bf16 products (k = 64, exact in fp32 up to the summation order) is
// nearly everywhere. Counts the elements that differ, per GEMM backend; more than a few percent
// means a second rounding somewhere (cuBLAS's beta = 1 path did that: matmul.cu).
TEST_P(GpuOps, MatmulBiasMatchesCpuBits) {
    FP_SKIP_WITHOUT_GPU();
    const DType dt = GetParam();
    Rng rng(test_seed());
    for_each_gemm_backend([&](gpu::blas::Backend backend) {
        for (auto [tokens, in, n_out] : {std::tuple<int64_t, int64_t, int64_t>{24, 64, 64}, {24, 64, 32}, {1, 64, 64}}) {
            HostTensor x(dt, {tokens, in}), w(dt, {n_out, in}), b(dt, {n_out}), cpu(dt, {tokens, n_out});
            x.fill_normal(rng);
            w.fill_normal(rng, 0.05);
            b.fill_normal(rng, 0.1);
            matmul(cpu.view, x.view, w.view, &b.view);
            HostTensor got(dt, {tokens, n_out});
            GpuTensor gx(x), gw(w), gb(b), gout(got);
            matmul(gout.view, gx.view, gw.view, &gb.view);
            gout.download(got);
            int64_t differ = 0;
            for (int64_t i = 0; i < tokens * n_out; ++i) differ += got.get(i) != cpu.get(i);
            std::printf("[ measured ] %s %s GEMM %lldx%lld->%lld + bias: %lld of %lld elements differ from the CPU\n",
                        short_name(dt), gpu::blas::backend_name(backend), (long long)tokens, (long long)in,
                        (long long)n_out, (long long)differ, (long long)(tokens * n_out));
            // fp32 outs differ in the fp32 sum's order (cuBLAS's, the CPU's), which is legitimate.
            if (dt != DType::F32) {
                EXPECT_LE(differ, tokens * n_out / 20 + 1) << gpu::blas::backend_name(backend);
            }
        }
    });
}

// Where the build has cuBLASLt (CUDA with cuBLAS), a 16-bit bias runs in the GEMM's epilogue: it must
// take Qwen's qkv-like shapes (odd token counts, a row length no tile divides) and give the CPU's
// round(Σ + bias) bits, as MatmulBiasMatchesCpuBits asks of every path. Elsewhere it says it can't.
TEST_P(GpuOps, MatmulBiasEpilogue) {
    FP_SKIP_WITHOUT_GPU();
    const DType dt = GetParam();
    if (dt == DType::F32) GTEST_SKIP() << "the bias epilogue takes 16-bit inputs";
    if (!gpu::blas::bias_epilogue_available()) GTEST_SKIP() << "no cuBLASLt in this build (or another GEMM chosen)";
    Rng rng(test_seed());
    for (auto [tokens, in, n_out] : {std::tuple<int64_t, int64_t, int64_t>{7, 64, 72}, {97, 128, 200}, {1, 64, 8}}) {
        SCOPED_TRACE(std::to_string(tokens) + "x" + std::to_string(in) + "->" + std::to_string(n_out));
        HostTensor x(dt, {tokens, in}), w(dt, {n_out, in}), b(dt, {n_out}), cpu(dt, {tokens, n_out});
        x.fill_normal(rng);
        w.fill_normal(rng, 0.05);
        b.fill_normal(rng, 0.1);
        matmul(cpu.view, x.view, w.view, &b.view);
        HostTensor got(dt, {tokens, n_out});  // poisoned (NaN)
        GpuTensor gx(x), gw(w), gb(b), gout(got);
        ASSERT_TRUE(gpu::blas::gemm_bias(gout.view.data, n_out, dt, tokens, n_out, in, {gx.view.data, in, 0, false},
                                         {gw.view.data, in, 0, true}, gb.view.data, nullptr));
        gout.download(got);
        int64_t differ = 0;
        for (int64_t i = 0; i < tokens * n_out; ++i) differ += !(got.get(i) == cpu.get(i));
        EXPECT_LE(differ, tokens * n_out / 20 + 1) << "a second rounding, or NaN left in out";
    }
}

// The decode GEMVs against float64, with the GEMM's tolerance (one rounding plus fp32 accumulation):
// every token count to 8, then 9-32 on the matrix-core GEMV where it serves (partial token tiles,
// one more tile, the largest batch), odd output sizes, long rows (Qwen2.5-7B's down_proj has in =
// 18944), with and without bias, fp32 and 16-bit outs. Padded and shifted rows are not eligible
// and must fall back to the GEMM (the kernel name is checked).
TEST_P(GpuOps, MatmulGemvMatchesFloat64) {
    FP_SKIP_WITHOUT_GPU();
    const DType dt = GetParam();
    if (dt == DType::F32) GTEST_SKIP() << "the GEMV takes fp16/bf16 inputs (fp32 runs the GEMM)";
    Rng rng(test_seed());
    int i = 0;
    std::vector<int64_t> token_counts;
    for (int64_t tokens = 1; tokens <= GEMV_MAX_TOKENS; ++tokens) token_counts.push_back(tokens);
    if (gpu::gemv_tc_serves(dt)) token_counts.insert(token_counts.end(), {9, 16, 17, 25, gpu::GEMV_TC_MAX_TOKENS});
    for (int64_t tokens : token_counts)
        for (auto [in, n_out] : {std::pair<int64_t, int64_t>{40, 97}, {64, 1}, {896, 136}, {18944, 9}}) {
            // Contiguous through the GEMV (asked for), then one of the other placements through AUTO,
            // which must fall back to the GEMM.
            const DType out_dt = i % 3 == 0 ? DType::F32 : dt, bias_dt = i % 3 == 0 ? DType::BF16 : dt;
            run_matmul(dt, out_dt, bias_dt, {tokens, in, n_out, i % 2 == 0, Placement::CONTIGUOUS}, rng,
                       MatmulImpl::GEMV);
            run_matmul(dt, out_dt, bias_dt, {tokens, in, n_out, i % 2 == 0, ALL_PLACEMENTS[1 + i % 3]}, rng,
                       MatmulImpl::AUTO);
            ++i;
        }
}

TEST_P(GpuOps, MatmulMatchesFloat64) {
    FP_SKIP_WITHOUT_GPU();
    const DType dt = GetParam();
    Rng rng(test_seed());
    for_each_gemm_backend([&](gpu::blas::Backend) {
        int i = 0;
        for (int64_t tokens : ROWS)
            for (auto [in, n_out] : {std::pair<int64_t, int64_t>{40, 97}, {64, 7}, {896, 136}}) {
                const Placement placement = ALL_PLACEMENTS[i++ % 4];
                run_matmul(dt, dt, dt, {tokens, in, n_out, i % 2 == 0, placement}, rng);
            }
        // fp32 out of 16-bit inputs with a bias of another dtype; an empty sum (in = 0) is the bias.
        run_matmul(dt, DType::F32, DType::BF16, {7, 64, 97, true, Placement::CONTIGUOUS}, rng);
        run_matmul(dt, dt, dt, {3, 0, 5, true, Placement::CONTIGUOUS}, rng);
    });
}

// ---------------------------------------------------------------------------------------------- shared cases

// Every op's shared cases (tests/ops/<op>_case.h), the same the CPU test and the bench run, against
// their float64 references with their tolerances; the tests above add the GPU's placements and the CPU op.
TEST_P(GpuOps, SharedCasesMatchFloat64) {
    FP_SKIP_WITHOUT_GPU();
    const DType dt = GetParam();
    Rng rng(test_seed());
    for (auto* cases : {&rms_norm_cases, &rope_cases, &swiglu_cases, &add_cases, &embedding_cases, &matmul_cases})
        expect_cases_on_gpu(cases(dt), rng);
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuOps, ::testing::Values(DType::F32, DType::F16, DType::BF16), dtype_param_name);

// ---------------------------------------------------------------------------------------------- bad input

// Views that claim to be on a GPU but are never dereferenced: each call fails validation first, so
// these run without a GPU too.
struct FakeGpu {
    std::vector<float> mem = std::vector<float>(4096, 0.0f);
    TensorView view(DType dt, std::initializer_list<int64_t> shape, Device d = Device::gpu()) {
        return TensorView(mem.data(), dt, shape, d);
    }
};

TEST(GpuOpErrors, ShapesAndDevices) {
    FakeGpu a, b, c, d;
    const TensorView x = a.view(DType::BF16, {3, 8}), w = b.view(DType::BF16, {8}), out = c.view(DType::BF16, {3, 8});
    const TensorView cpu_out = c.view(DType::BF16, {3, 8}, Device::cpu());
    EXPECT_THAT(error_of([&] { rms_norm(out, x, b.view(DType::BF16, {7}), 1e-6f); }),
                HasSubstr("rms_norm: weight must be [dim] = [8]"));
    EXPECT_THAT(error_of([&] { rms_norm(cpu_out, x, w, 1e-6f); }),
                HasSubstr("rms_norm: all tensors must be on one device, got gpu:0 and cpu"));
    EXPECT_THAT(error_of([&] { add_rms_norm(out, d.view(DType::BF16, {3, 8}), x, b.view(DType::BF16, {3, 9}), w, 1e-6f); }),
                HasSubstr("add_rms_norm: residual must have the shape of x"));
    EXPECT_THAT(error_of([&] { add_rms_norm(out, d.view(DType::BF16, {3, 8}, Device::gpu(1)), x, x, w, 1e-6f); }),
                HasSubstr("add_rms_norm: all tensors must be on one device, got gpu:0 and gpu:1"));
    EXPECT_THAT(error_of([&] { swiglu(out, x, b.view(DType::BF16, {3, 7})); }),
                HasSubstr("swiglu: up must have the shape of gate"));
    EXPECT_THAT(error_of([&] { add(cpu_out, x, x); }), HasSubstr("add: all tensors must be on one device"));

    const TensorView q = a.view(DType::BF16, {3, 2, 8});
    const std::vector<int64_t> pos = {0, 1, 2};
    EXPECT_THAT(error_of([&] { rope(q, q, IndexView(pos.data(), 3), {}); }),
                HasSubstr("rope: positions must be on gpu:0, got cpu"));
    EXPECT_THAT(error_of([&] { rope(q, q, IndexView(pos.data(), 2, Device::gpu()), {}); }),
                HasSubstr("rope: positions must have one entry per token (3"));
    EXPECT_THAT(error_of([&] { rope(c.view(DType::BF16, {3, 2, 8}, Device::cpu()), q, IndexView(pos.data(), 3), {}); }),
                HasSubstr("rope: all tensors must be on one device"));

    const TensorView table = a.view(DType::BF16, {10, 8});
    const std::vector<int32_t> ids = {1, 2, 3};
    EXPECT_THAT(error_of([&] { embedding(out, table, IndexView(ids.data(), 3)); }),
                HasSubstr("embedding: ids must be on gpu:0, got cpu"));
    EXPECT_THAT(error_of([&] { embedding(c.view(DType::BF16, {3, 9}), table, IndexView(ids.data(), 3, Device::gpu())); }),
                HasSubstr("embedding: out must be [tokens, hidden] = [3, 8]"));
    EXPECT_THAT(error_of([&] { embedding(cpu_out, table, IndexView(ids.data(), 3, Device::gpu())); }),
                HasSubstr("embedding: all tensors must be on one device"));

    const TensorView mw = b.view(DType::BF16, {5, 8}), mo = c.view(DType::BF16, {3, 5});
    EXPECT_THAT(error_of([&] { matmul(mo, x, b.view(DType::BF16, {5, 7})); }),
                HasSubstr("matmul: weight must be [out, in] with in = x's last dimension (8)"));
    EXPECT_THAT(error_of([&] { matmul(c.view(DType::BF16, {3, 5}, Device::cpu()), x, mw); }),
                HasSubstr("matmul: all tensors must be on one device"));
}

// The GPU-only limits, which are checked after the device (so they need one).
TEST(GpuOpErrors, GpuLimits) {
    FP_SKIP_WITHOUT_GPU();
    Buffer m(1 << 16, Device::gpu());
    auto view = [&](DType dt, std::initializer_list<int64_t> shape) { return TensorView(m.data(), dt, shape, Device::gpu()); };
    Buffer m2(1 << 16, Device::gpu());
    const TensorView x = view(DType::BF16, {3, 8}), w(m2.data(), DType::BF16, {5, 8}, Device::gpu());
    Buffer m3(1 << 16, Device::gpu());
    const TensorView out(m3.data(), DType::BF16, {3, 5}, Device::gpu()), out16(m3.data(), DType::F16, {3, 5}, Device::gpu());
    const TensorView w32(m2.data(), DType::F32, {5, 8}, Device::gpu());
    EXPECT_THAT(error_of([&] { matmul(out, x, w32); }), HasSubstr("matmul on GPU: x and weight must share one dtype"));
    EXPECT_THAT(error_of([&] { matmul(out16, x, w); }), HasSubstr("matmul on GPU: out must be bf16 (x's dtype) or fp32"));
    Buffer m4(64, Device::gpu());
    const TensorView bias32(m4.data(), DType::F32, {5}, Device::gpu());
    EXPECT_THAT(error_of([&] { matmul(out, x, w, &bias32); }), HasSubstr("matmul on GPU: bias must have out's dtype"));
    const TensorView x6 = view(DType::BF16, {3, 6}), w6(m2.data(), DType::BF16, {5, 6}, Device::gpu());
    EXPECT_THAT(error_of([&] { matmul(out, x6, w6, nullptr, MatmulImpl::GEMV); }),
                HasSubstr("matmul on GPU: impl gemv can't take this product: in (6) must be a positive multiple of 8"));
    EXPECT_THAT(error_of([&] { rms_norm(x, view(DType::BF16, {3, 8}), w, 1e-6f); }),
                HasSubstr("rms_norm: weight must have 1 dimensions"));
    EXPECT_THAT(error_of([&] { rms_norm(view(DType::BF16, {1, 8}), view(DType::BF16, {1, 8}), TensorView(m2.data(), DType::BF16, {8}, Device::gpu(gpu_device_count())), 1e-6f); }),
                HasSubstr("all tensors must be on one device"));
    Buffer big(2 * 1026 * 2, Device::gpu());
    const TensorView wide(big.data(), DType::BF16, {1, 1, 2048}, Device::gpu());
    Buffer p(8, Device::gpu());
    EXPECT_THAT(error_of([&] { rope(wide, wide, IndexView(static_cast<const int32_t*>(p.data()), 1, Device::gpu()), {}); }),
                HasSubstr("rope on GPU supports head_dim up to 1024, got 2048"));
    const TensorView other(m.data(), DType::BF16, {3, 8}, Device::gpu(gpu_device_count()));
    EXPECT_THAT(error_of([&] { add(other, other, other); }), HasSubstr("does not exist"));
}

}  // namespace
}  // namespace flashport::test
