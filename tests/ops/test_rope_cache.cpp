// rope_qk_cache_write and paged_cache_write on the CPU: both ops' shared cases (cache_write_case.h,
// which the GPU test and the bench run too) against their float64 references; the fused op against
// the three ops it fuses (rope on q, rope on k, paged_cache_write), bit for bit, over
// rope_cache_case.h's grid; and its bad input, which must give the fused ops' own errors (named after
// the fused op) before anything is written.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "common/error_text.h"
#include "flashport/error.h"
#include "flashport/paged_cache.h"
#include "ops/cache_write_case.h"
#include "ops/rope_cache_case.h"

using ::testing::HasSubstr;

namespace flashport::test {
namespace {

class RopeCacheCpu : public ::testing::TestWithParam<DType> {};

TEST_P(RopeCacheCpu, SharedCases) {
    Rng rng(test_seed());
    expect_cases_on_host(paged_cache_cases(GetParam()), rng);
    expect_cases_on_host(rope_cache_cases(GetParam()), rng);
}

TEST_P(RopeCacheCpu, MatchesRopeRopeCacheWrite) {
    Rng rng(test_seed());
    for (const RopeCacheCase& c : rope_cache_grid(GetParam())) {
        SCOPED_TRACE(c.name());
        RopeCacheInputs in(c, rng);
        auto q = clone(*in.q), k = clone(*in.k), v = clone(*in.v);
        auto kc = clone(*in.k_cache), vc = clone(*in.v_cache);
        const IndexView pos = in.position_view(c.wide), slots = in.slot_view(c.wide);
        // The unfused ops on the originals, the fused op on the clones.
        rope(in.q->view, in.q->view, pos, in.rope);
        rope(in.k->view, in.k->view, pos, in.rope);
        paged_cache_write(in.k_cache->view, in.v_cache->view, in.k->view, in.v->view, slots);
        rope_qk_cache_write(q->view, k->view, v->view, pos, in.rope, kc->view, vc->view, slots);
        EXPECT_TRUE(same_bytes(*q, *in.q)) << "q";
        EXPECT_TRUE(same_bytes(*k, *in.k)) << "k";
        EXPECT_TRUE(same_bytes(*v, *in.v)) << "v";
        EXPECT_TRUE(same_bytes(*kc, *in.k_cache)) << "k_cache";
        EXPECT_TRUE(same_bytes(*vc, *in.v_cache)) << "v_cache";
        EXPECT_TRUE(q->padding_intact() && k->padding_intact() && kc->padding_intact() && vc->padding_intact());
    }
}

// The grid's caches start as NaN, so a sanity check that the op wrote anything at all: every token
// with a slot has its rows there, and they are not NaN.
TEST_P(RopeCacheCpu, WritesEverySlottedToken) {
    Rng rng(test_seed());
    const RopeCacheCase c{7, 2, 2, 64, 16, GetParam()};
    RopeCacheInputs in(c, rng);
    rope_qk_cache_write(in.q->view, in.k->view, in.v->view, in.position_view(false), in.rope, in.k_cache->view,
                        in.v_cache->view, in.slot_view(false));
    for (int64_t t = 0; t < c.tokens; ++t) {
        const int64_t s = in.slots[size_t(t)];
        ASSERT_GE(s, 0);
        for (int64_t h = 0; h < c.n_kv_heads; ++h)
            for (int64_t d = 0; d < c.head_dim; ++d) {
                const double kc = load_as_float(in.k_cache->view.at(s / 16, s % 16, h, d), c.dtype);
                EXPECT_EQ(kc, load_as_float(in.k->view.at(t, h, d), c.dtype));
                EXPECT_EQ(load_as_float(in.v_cache->view.at(s / 16, s % 16, h, d), c.dtype),
                          load_as_float(in.v->view.at(t, h, d), c.dtype));
                EXPECT_FALSE(std::isnan(kc));
            }
    }
}

INSTANTIATE_TEST_SUITE_P(Ops, RopeCacheCpu, ::testing::Values(DType::F32, DType::F16, DType::BF16),
                         [](const ::testing::TestParamInfo<DType>& i) { return std::string(short_name(i.param)); });

// ---------------------------------------------------------------------------------------------- bad input

// A small valid fp32 request: q [3, 4, 8], k, v [3, 2, 8], caches [2, 16, 2, 8] (32 slots).
struct Request {
    std::vector<float> qb = std::vector<float>(3 * 4 * 8, 0.25f), kb = std::vector<float>(3 * 2 * 8, 0.5f), vb = kb,
                       kcb = std::vector<float>(2 * 16 * 2 * 8, 0.0f), vcb = kcb;
    TensorView q{qb.data(), DType::F32, {3, 4, 8}}, k{kb.data(), DType::F32, {3, 2, 8}},
        v{vb.data(), DType::F32, {3, 2, 8}};
    TensorView kc{kcb.data(), DType::F32, {2, 16, 2, 8}}, vc{vcb.data(), DType::F32, {2, 16, 2, 8}};
    std::vector<int64_t> pos = {0, 1, 2};
    std::vector<int32_t> slots = {3, 17, 31};
    RopeParams rope{10000.0, 0};

    void fused() { rope_qk_cache_write(q, k, v, IndexView(pos), rope, kc, vc, IndexView(slots)); }
    // rope, rope, paged_cache_write on the same request.
    void unfused() {
        flashport::rope(q, q, IndexView(pos), rope);
        flashport::rope(k, k, IndexView(pos), rope);
        paged_cache_write(kc, vc, k, v, IndexView(slots));
    }
    bool untouched() const {
        auto all = [](const std::vector<float>& b, float x) {
            return std::all_of(b.begin(), b.end(), [x](float y) { return y == x; });
        };
        return all(qb, 0.25f) && all(kb, 0.5f) && all(vb, 0.5f) && all(kcb, 0.0f) && all(vcb, 0.0f);
    }
};

// Every way a request breaks: the fused op's message is the unfused op's, with the fused op's name
// in place of the unfused one's (`unfused_op`), and nothing is written.
void expect_same_error(const std::function<void(Request&)>& breaker, const std::string& unfused_op,
                       const std::string& want) {
    Request fused_req, unfused_req;
    breaker(fused_req);
    breaker(unfused_req);
    const std::string fused = error_of([&] { fused_req.fused(); });
    std::string unfused = error_of([&] { unfused_req.unfused(); });
    EXPECT_THAT(unfused, HasSubstr(want)) << "the unfused ops";
    ASSERT_EQ(unfused.rfind(unfused_op, 0), 0u) << unfused;
    unfused.replace(0, unfused_op.size(), "rope_qk_cache_write");
    EXPECT_EQ(fused, unfused);
    EXPECT_TRUE(fused_req.untouched()) << "the fused op wrote before failing: " << fused;
}

TEST(RopeCacheErrors, ValidRequestRuns) {
    Request r;
    EXPECT_EQ(error_of([&] { r.fused(); }), "(no error was thrown)");
}

TEST(RopeCacheErrors, CacheWriteErrorsAreTheCacheWrites) {
    expect_same_error([](Request& r) { r.slots[2] = 32; }, "paged_cache_write",
                      "slots[2] = 32 is past the cache's 32 slots");
    expect_same_error([](Request& r) { r.slots.pop_back(); }, "paged_cache_write",
                      "slots must hold one entry per token (3), got 2");
    expect_same_error(
        [](Request& r) {
            r.k.dtype = r.v.dtype = DType::BF16;
            r.q.dtype = DType::BF16;
        },
        "paged_cache_write", "k, v and the caches must share one dtype");
    expect_same_error([](Request& r) { r.vc.dtype = DType::F16; }, "paged_cache_write", "must share one dtype");
    expect_same_error(
        [](Request& r) {
            r.v = TensorView(r.vb.data(), DType::F32, {3, 1, 16});
        },
        "paged_cache_write", "v must be [tokens, n_kv_heads, head_dim] (like k)");
    expect_same_error(
        [](Request& r) {
            r.vc = TensorView(r.vcb.data(), DType::F32, {2, 8, 2, 16});
        },
        "paged_cache_write", "v_cache must be [num_blocks, block_size, n_kv_heads, head_dim]");
    expect_same_error(
        [](Request& r) {
            r.kc = TensorView(r.kcb.data(), DType::F32, {2, 16, 8});
        },
        "paged_cache_write", "k_cache must have 4 dimensions");
}

TEST(RopeCacheErrors, RopeErrorsAreRopes) {
    expect_same_error([](Request& r) { r.pos.pop_back(); }, "rope", "positions must have one entry per token (3");
    expect_same_error([](Request& r) { r.pos[2] = int64_t(1) << 24; }, "rope",
                      "position 16777216 at index 2 is outside [0, 2^24)");
    expect_same_error([](Request& r) { r.pos[1] = -1; }, "rope", "position -1 at index 1");
    expect_same_error([](Request& r) { r.rope.theta = 0.5; }, "rope", "theta must be finite and > 1");
}

// What only the fused op can get wrong (q against k), and rope's checks that name the tensor.
TEST(RopeCacheErrors, QAgainstK) {
    auto expect = [](const std::function<void(Request&)>& breaker, const std::string& want) {
        Request r;
        breaker(r);
        EXPECT_THAT(error_of([&] { r.fused(); }), HasSubstr(want));
        EXPECT_TRUE(r.untouched());
    };
    expect(
        [](Request& r) {
            r.q = TensorView(r.qb.data(), DType::F32, {3, 2, 16});
        },
        "rope_qk_cache_write: q must be [tokens, n_heads, head_dim] (k's tokens and head_dim) = [3, 2, 8]");
    expect(
        [](Request& r) {
            r.q = TensorView(r.qb.data(), DType::F32, {2, 4, 8});
        },
        "rope_qk_cache_write: q must be [tokens, n_heads, head_dim] (k's tokens and head_dim) = [3, 4, 8]");
    expect(
        [](Request& r) {
            r.q = TensorView(r.qb.data(), DType::F32, {3, 32});
        },
        "rope_qk_cache_write: q must have 3 dimensions");
    expect([](Request& r) { r.q.dtype = DType::BF16; }, "rope_qk_cache_write: q must have k's dtype (fp32)");
    expect([](Request& r) { r.v = r.k; }, "rope_qk_cache_write: q, k and v must be distinct tensors");
    // rope's own message, naming q where rope names x.
    expect([](Request& r) { r.rope.head_dim = 3; },
           "rope_qk_cache_write: params.head_dim (3) must divide q's last dimension (8)");
    expect([](Request& r) { r.q.data = nullptr; }, "rope_qk_cache_write: q has no data");
    expect([](Request& r) { r.q.device = Device::gpu(); }, "rope_qk_cache_write: all tensors must be on one device");
    // An odd head_dim: the cache write takes it, rope does not.
    expect(
        [](Request& r) {
            r.q = TensorView(r.qb.data(), DType::F32, {3, 4, 7});
            r.k = TensorView(r.kb.data(), DType::F32, {3, 2, 7});
            r.v = TensorView(r.vb.data(), DType::F32, {3, 2, 7});
            r.kc = TensorView(r.kcb.data(), DType::F32, {2, 16, 2, 7});
            r.vc = TensorView(r.vcb.data(), DType::F32, {2, 16, 2, 7});
        },
        "rope_qk_cache_write: head_dim must be even");
}

TEST(RopeCacheErrors, Devices) {
    Request r;
    r.q.device = r.k.device = r.v.device = r.kc.device = r.vc.device = Device::gpu();
    // The slots are still on the CPU: the cache write's check names them.
    EXPECT_THAT(error_of([&] { r.fused(); }), HasSubstr("rope_qk_cache_write: slots are on cpu, the caches on gpu:0"));
    const IndexView gpu_slots(r.slots.data(), 3, Device::gpu());
    EXPECT_THAT(error_of([&] { rope_qk_cache_write(r.q, r.k, r.v, IndexView(r.pos), r.rope, r.kc, r.vc, gpu_slots); }),
#ifdef FLASHPORT_GPU
                HasSubstr("rope_qk_cache_write: positions must be on gpu:0, got cpu"));
#else
                HasSubstr(
                    "rope_qk_cache_write on gpu:0 needs a GPU build; configure with --preset cuda or --preset hip"));
#endif
}

// No tokens: valid, and nothing happens.
TEST(RopeCacheErrors, NoTokens) {
    Request r;
    r.q.shape[0] = r.k.shape[0] = r.v.shape[0] = 0;
    r.pos.clear();
    r.slots.clear();
    EXPECT_EQ(error_of([&] { r.fused(); }), "(no error was thrown)");
    EXPECT_TRUE(r.untouched());
}

}  // namespace
}  // namespace flashport::test
