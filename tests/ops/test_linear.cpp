// linear (flashport/linear.h) on the CPU: every fusion against the float64 chain (linear_case.h), the
// same bits as the plain ops run one after the other, a residual that is out itself, RoPE and the cache
// write after the product (linear_rope_case.h), and bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "common/error_text.h"
#include "flashport/error.h"
#include "flashport/linear.h"
#include "flashport/memory.h"
#include "ops/linear_case.h"
#include "ops/linear_rope_case.h"

using ::testing::HasSubstr;

namespace flashport::test {
namespace {

class Linear : public ::testing::TestWithParam<DType> {};

TEST_P(Linear, MatchesFloat64AndThePlainOps) {
    const DType dt = GetParam();
    Rng rng(test_seed());
    for (const LinearCase& c : linear_cases()) {
        SCOPED_TRACE(c.name());
        LinearInputs in = make_linear_inputs(c, dt, rng);
        const std::vector<double> residual = values(*in.residual);
        const LinearParams p = params_for(c, &in.b->view, &in.gamma->view, &in.residual->view);
        const size_t ws_bytes = linear_workspace_bytes(in.out->view, in.x->view, in.w->view, p);
        EXPECT_EQ(ws_bytes > 0, c.norm || c.residual || c.swiglu) << "the workspace holds h and y, when needed";
        Buffer ws(std::max<size_t>(ws_bytes, 1));
        const std::string kernel = linear(in.out->view, in.x->view, in.w->view, p, ws.data(), ws.size());
        EXPECT_EQ(kernel.rfind("cpu.linear.composed(", 0), 0u) << kernel;
        EXPECT_EQ(kernel.find("(rms_norm+") != std::string::npos, c.norm) << kernel;
        EXPECT_EQ(check_linear(c, in, *in.out, residual), 0) << short_name(dt);

        // The plain ops, one after the other: the same bits.
        HostTensor h(dt, {c.tokens, c.in}), y(dt, {c.tokens, c.rows}), want(dt, {c.tokens, c.cols()});
        const TensorView& x = c.norm ? h.view : in.x->view;
        if (c.norm) rms_norm(h.view, in.x->view, in.gamma->view, 1e-6f);
        const TensorView* bias = c.bias ? &in.b->view : nullptr;
        if (c.swiglu) {
            matmul(y.view, x, in.w->view, bias);
            swiglu(want.view, y.view.narrowed(1, 0, c.cols()), y.view.narrowed(1, c.cols(), c.cols()));
        } else if (c.residual) {
            matmul(want.view, x, in.w->view, bias);
            HostTensor r(dt, {c.tokens, c.cols()});
            for (int64_t i = 0; i < r.numel(); ++i) r.set(i, residual[size_t(i)]);
            add(want.view, r.view, want.view);
        } else {
            matmul(want.view, x, in.w->view, bias);
        }
        int64_t differ = 0;
        for (int64_t i = 0; i < want.numel(); ++i) differ += !(want.get(i) == in.out->get(i));
        EXPECT_EQ(differ, 0) << "elements differ from the plain ops";
    }
}

// x = x + o_proj(attn): the residual is out itself (the decoder layer's in-place update).
TEST_P(Linear, ResidualInPlace) {
    const DType dt = GetParam();
    Rng rng(test_seed());
    const LinearCase c{3, 64, 40, false, true, true, false};
    LinearInputs in = make_linear_inputs(c, dt, rng);
    const std::vector<double> residual = values(*in.residual);
    const LinearParams p = params_for(c, &in.b->view, &in.gamma->view, &in.residual->view);
    Buffer ws(linear_workspace_bytes(in.residual->view, in.x->view, in.w->view, p));
    linear(in.residual->view, in.x->view, in.w->view, p, ws.data(), ws.size());
    EXPECT_EQ(check_linear(c, in, *in.residual, residual), 0);
}

TEST_P(Linear, RopeCacheIsTheComposition) {
    const DType dt = GetParam();
    Rng rng(test_seed());
    for (const LinearRopeCase& c : linear_rope_cases()) {
        const std::string kernel =
            expect_rope_cache_matches_composition<HostCopy, HostIndices>(c, dt, rng, Device::cpu());
        EXPECT_THAT(kernel, HasSubstr("+rope_qk_cache_write)"));
    }
}

INSTANTIATE_TEST_SUITE_P(Cpu, Linear, ::testing::Values(DType::F32, DType::F16, DType::BF16),
                         [](const ::testing::TestParamInfo<DType>& p) { return std::string(short_name(p.param)); });

TEST(LinearErrors, ShapesFusionsAndWorkspace) {
    HostTensor x(DType::BF16, {2, 16}), w(DType::BF16, {6, 16}), out(DType::BF16, {2, 6}), half(DType::BF16, {2, 3});
    HostTensor gamma(DType::BF16, {16}), bad_gamma(DType::BF16, {8}), bias(DType::BF16, {5});
    HostTensor odd(DType::BF16, {5, 16}), odd_out(DType::BF16, {2, 2});
    LinearParams plain;
    const auto message = [](const std::function<void()>& f) { return error_of(f); };
    EXPECT_THAT(message([&] { linear(half.view, x.view, w.view, plain); }), HasSubstr("out must be [tokens, rows]"));
    LinearParams sw;
    sw.swiglu = true;
    EXPECT_THAT(message([&] { linear(out.view, x.view, w.view, sw); }), HasSubstr("out must be [tokens, rows / 2]"));
    EXPECT_THAT(message([&] { linear(odd_out.view, x.view, odd.view, sw); }), HasSubstr("even number of rows"));
    LinearParams both = sw;
    both.residual = &half.view;
    EXPECT_THAT(message([&] { linear(half.view, x.view, w.view, both); }), HasSubstr("swiglu and a residual"));
    LinearParams norm;
    norm.norm_weight = &bad_gamma.view;
    EXPECT_THAT(message([&] { linear(out.view, x.view, w.view, norm); }), HasSubstr("norm_weight must be [in]"));
    LinearParams b;
    b.bias = &bias.view;
    EXPECT_THAT(message([&] { linear(out.view, x.view, w.view, b); }), HasSubstr("bias must be [rows]"));
    LinearParams res;
    res.residual = &half.view;
    EXPECT_THAT(message([&] { linear(out.view, x.view, w.view, res); }), HasSubstr("residual must have the shape of out"));
    HostTensor square(DType::BF16, {16, 16});
    EXPECT_THAT(message([&] { linear(x.view, x.view, square.view, plain); }), HasSubstr("out must not alias x"));
    // The composition needs h: none given, or too small.
    norm.norm_weight = &gamma.view;
    EXPECT_THAT(message([&] { linear(out.view, x.view, w.view, norm); }), HasSubstr("linear_workspace_bytes"));
    Buffer small(8);
    EXPECT_THAT(message([&] { linear(out.view, x.view, w.view, norm, small.data(), small.size()); }),
                HasSubstr("the workspace holds 8 bytes"));
    EXPECT_EQ(linear_workspace_bytes(out.view, x.view, w.view, plain), 0u);
}

// rope_cache's rules, each before anything is written: out stays poisoned.
TEST(LinearErrors, RopeCache) {
    const LinearRopeCase c{2, 16, 1, 2, 8, false, false, false};  // 2 q heads, 1 kv head, head_dim 8: 32 rows
    Rng rng(test_seed());
    LinearRopeInputs in(c, DType::BF16, rng);
    std::vector<int32_t> positions = in.positions32, slots = in.slots32;
    RopeCacheWrite rc;
    rc.n_heads = c.n_heads();
    rc.n_kv_heads = c.n_kv_heads;
    rc.positions = IndexView(std::span<const int32_t>(positions));
    rc.slots = IndexView(std::span<const int32_t>(slots));
    rc.k_cache = in.k_cache->view;
    rc.v_cache = in.v_cache->view;
    LinearParams p;
    p.rope_cache = &rc;
    const auto message = [&](const LinearParams& params, const TensorView& out) {
        return error_of([&] { linear(out, in.x->view, in.w->view, params); });
    };
    LinearParams sw = p;
    sw.swiglu = true;
    HostTensor half(DType::BF16, {2, 16});
    EXPECT_THAT(message(sw, half.view), HasSubstr("rope_cache can't be combined with swiglu"));
    LinearParams res = p;
    res.residual = &in.out->view;
    EXPECT_THAT(message(res, in.out->view), HasSubstr("rope_cache can't be combined with swiglu or a residual"));
    RopeCacheWrite wrong_heads = rc;
    wrong_heads.n_heads = 3;
    p.rope_cache = &wrong_heads;
    EXPECT_THAT(message(p, in.out->view), HasSubstr("(n_heads + 2 · n_kv_heads) · head_dim"));
    RopeCacheWrite flat_cache = rc;
    flat_cache.k_cache.ndim = 3;  // [blocks, block_size, n_kv_heads]
    p.rope_cache = &flat_cache;
    EXPECT_THAT(message(p, in.out->view), HasSubstr("k_cache must be [num_blocks, block_size, n_kv_heads, head_dim]"));
    RopeCacheWrite huge = rc;
    huge.n_heads = int64_t(1) << 62;
    p.rope_cache = &huge;
    EXPECT_THAT(message(p, in.out->view), HasSubstr("(n_heads + 2 · n_kv_heads) · head_dim"));
    // The positions' and slots' values are checked on the host before the product is written.
    positions[1] = -1;
    p.rope_cache = &rc;
    EXPECT_THAT(message(p, in.out->view), HasSubstr("linear (rope_cache)"));
    positions[1] = 0;
    slots[0] = int32_t(in.k_cache->view.dim(0) * c.block_size);
    EXPECT_THAT(message(p, in.out->view), HasSubstr("linear (rope_cache)"));
    for (int64_t i = 0; i < in.out->numel(); ++i) ASSERT_TRUE(std::isnan(in.out->get(i))) << "out was written";
}

}  // namespace
}  // namespace flashport::test
