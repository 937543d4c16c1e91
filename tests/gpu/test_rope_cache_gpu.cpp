// rope_qk_cache_write and paged_cache_write on the GPU: the shared cases (tests/ops/cache_write_case.h,
// which the CPU test and the bench run too) against their float64 references; then
// rope_qk_cache_write (backends/gpu/rope_cache.cu) over the CPU test's grid
// (tests/ops/rope_cache_case.h: tokens 1/7/97, head_dim 16/64/128, GQA 1/2/7, block size 16/32,
// shuffled slots with padding entries, strided rows, every dtype, int32 and int64 indices):
//   - against the unfused GPU ops (rope on q, rope on k, paged_cache_write): every byte of q, k, v and
//     both caches, padding and NaN-poisoned slots included;
//   - against the CPU op: q and k within rope's GPU tolerance (test_gpu_ops.cpp's header: 2 ulps,
//     >= 99.9% of 16-bit values identical, fp32 with the cos/sin slack), and the caches exactly what
//     the CPU's paged_cache_write makes of the GPU's rotated k (so slots, layout and the k row that
//     reaches the cache are checked bit for bit, and only RoPE's arithmetic has a tolerance);
//   - bad positions (NaN q and k rows, the NaN k row still cached) and bad slots (cache rows skipped),
//     as the unfused GPU ops treat them;
//   - graph capture (the op neither allocates nor synchronises).
// A timing test prints the fused and unfused times of Qwen2.5-7B's shapes ("[ measured ]"); it asserts
// nothing. The error tests run without a GPU: their checks fail before anything touches the device.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <span>
#include <tuple>
#include <vector>

#include "common/error_text.h"
#include "flashport/device.h"
#include "flashport/error.h"
#include "flashport/memory.h"
#include "flashport/paged_cache.h"
#include "gpu_ops_util.h"
#include "gpu_test_util.h"
#include "gpu_op_case.h"
#include "ops/cache_write_case.h"
#include "ops/rope_cache_case.h"

using ::testing::HasSubstr;

namespace flashport::test {
namespace {

// A case's inputs on the GPU, each tensor a fresh copy of the host's bytes.
struct GpuRopeCache {
    GpuTensor q, k, v, k_cache, v_cache;
    GpuIndices<int64_t> positions64, slots64;
    GpuIndices<int32_t> positions32, slots32;
    bool wide;

    GpuRopeCache(const RopeCacheInputs& in, bool wide_)
        : q(*in.q),
          k(*in.k),
          v(*in.v),
          k_cache(*in.k_cache),
          v_cache(*in.v_cache),
          positions64(in.positions),
          slots64(in.slots),
          positions32(in.positions32),
          slots32(in.slots32),
          wide(wide_) {}
    IndexView positions() const { return wide ? positions64.view : positions32.view; }
    IndexView slots() const { return wide ? slots64.view : slots32.view; }

    void run_unfused(const RopeParams& rope_params) {
        rope(q.view, q.view, positions(), rope_params);
        rope(k.view, k.view, positions(), rope_params);
        paged_cache_write(k_cache.view, v_cache.view, k.view, v.view, slots());
    }
    void run_fused(const RopeParams& rope_params, void* stream = nullptr) {
        rope_qk_cache_write(q.view, k.view, v.view, positions(), rope_params, k_cache.view, v_cache.view, slots(),
                            stream);
    }
};

// The GPU tensors downloaded into host copies of the inputs' shapes.
struct Downloaded {
    std::unique_ptr<HostTensor> q, k, v, k_cache, v_cache;
    Downloaded(const RopeCacheInputs& in, const GpuRopeCache& g)
        : q(clone(*in.q)), k(clone(*in.k)), v(clone(*in.v)), k_cache(clone(*in.k_cache)), v_cache(clone(*in.v_cache)) {
        g.q.download(*q);
        g.k.download(*k);
        g.v.download(*v);
        g.k_cache.download(*k_cache);
        g.v_cache.download(*v_cache);
    }
};

void expect_same_bytes(const Downloaded& a, const Downloaded& b, const char* what) {
    EXPECT_TRUE(same_bytes(*a.q, *b.q)) << "q: " << what;
    EXPECT_TRUE(same_bytes(*a.k, *b.k)) << "k: " << what;
    EXPECT_TRUE(same_bytes(*a.v, *b.v)) << "v: " << what;
    EXPECT_TRUE(same_bytes(*a.k_cache, *b.k_cache)) << "k_cache: " << what;
    EXPECT_TRUE(same_bytes(*a.v_cache, *b.v_cache)) << "v_cache: " << what;
}

class RopeCacheGpu : public ::testing::TestWithParam<DType> {};

TEST_P(RopeCacheGpu, SharedCases) {
    FP_SKIP_WITHOUT_GPU();
    Rng rng(test_seed());
    expect_cases_on_gpu(paged_cache_cases(GetParam()), rng);
    expect_cases_on_gpu(rope_cache_cases(GetParam()), rng);
}

TEST_P(RopeCacheGpu, MatchesUnfusedGpuAndCpu) {
    FP_SKIP_WITHOUT_GPU();
    const DType dt = GetParam();
    Rng rng(test_seed());
    for (const RopeCacheCase& c : rope_cache_grid(dt)) {
        SCOPED_TRACE(c.name());
        const RopeCacheInputs in(c, rng);
        GpuRopeCache unfused(in, c.wide), fused(in, c.wide);
        unfused.run_unfused(in.rope);
        fused.run_fused(in.rope);
        const Downloaded u(in, unfused), f(in, fused);
        expect_same_bytes(f, u, "the fused kernel against rope, rope, paged_cache_write on the GPU");

        // The CPU op on host copies.
        auto q_cpu = clone(*in.q), k_cpu = clone(*in.k), kc_cpu = clone(*in.k_cache), vc_cpu = clone(*in.v_cache);
        rope_qk_cache_write(q_cpu->view, k_cpu->view, in.v->view, in.position_view(c.wide), in.rope, kc_cpu->view,
                            vc_cpu->view, in.slot_view(c.wide));
        const std::vector<double> q_tol = rope_cos_sin_tol(*in.q, c.head_dim), k_tol = rope_cos_sin_tol(*in.k, c.head_dim);
        expect_matches_cpu(*f.q, *q_cpu, ulps_for(dt, 2.0), NEARLY, 0.0, &q_tol);
        expect_matches_cpu(*f.k, *k_cpu, ulps_for(dt, 2.0), NEARLY, 0.0, &k_tol);
        EXPECT_TRUE(same_bytes(*f.v, *in.v)) << "v changed";
        EXPECT_TRUE(same_bytes(*f.v_cache, *vc_cpu)) << "v_cache differs from the CPU op's";
        auto kc_expect = clone(*in.k_cache);
        paged_cache_write(kc_expect->view, clone(*in.v_cache)->view, f.k->view, in.v->view, in.slot_view(c.wide));
        EXPECT_TRUE(same_bytes(*f.k_cache, *kc_expect)) << "k_cache is not the GPU's rotated k in the named slots";
    }
}

// Positions outside [0, 2^24) and slots outside the cache live on the GPU, so they are not checked on
// the host: a bad position makes its token's q and k rows NaN (and that NaN k row is still written to
// a valid slot); a negative slot or one past the cache skips the token's cache rows. The caches start
// at zero here, so a skipped row and a NaN row are told apart.
TEST_P(RopeCacheGpu, BadPositionsAndSlots) {
    FP_SKIP_WITHOUT_GPU();
    const DType dt = GetParam();
    Rng rng(test_seed());
    for (bool wide : {false, true}) {
        SCOPED_TRACE(wide ? "int64 indices" : "int32 indices");
        const RopeCacheCase c{6, 2, 2, 64, 16, dt, wide};
        RopeCacheInputs in(c, rng);
        for (HostTensor* cache : {in.k_cache.get(), in.v_cache.get()})
            std::fill(cache->bytes.begin(), cache->bytes.end(), 0);
        const int64_t capacity = in.k_cache->view.shape[0] * 16;
        in.positions = {5, -1, int64_t(1) << 24, 9, 7, 3};
        in.slots = {4, 20, -1, capacity, wide ? int64_t(1) << 40 : int64_t(1) << 30, capacity - 1};
        in.positions32.assign(in.positions.begin(), in.positions.end());
        in.slots32.assign(in.slots.begin(), in.slots.end());
        const std::vector<bool> bad_position = {false, true, true, false, false, false};

        GpuRopeCache unfused(in, wide), fused(in, wide);
        unfused.run_unfused(in.rope);
        fused.run_fused(in.rope);
        const Downloaded u(in, unfused), f(in, fused);
        expect_same_bytes(f, u, "bad metadata: the fused kernel against the unfused GPU ops");

        // q and k: NaN rows for bad positions, the CPU's values (rope's tolerance) elsewhere.
        std::vector<int64_t> cpu_positions = in.positions;
        for (size_t t = 0; t < cpu_positions.size(); ++t)
            if (bad_position[t]) cpu_positions[t] = 0;
        auto q_cpu = clone(*in.q), k_cpu = clone(*in.k);
        rope(q_cpu->view, q_cpu->view, IndexView(std::span<const int64_t>(cpu_positions)), in.rope);
        rope(k_cpu->view, k_cpu->view, IndexView(std::span<const int64_t>(cpu_positions)), in.rope);
        for (const auto& [got, cpu, heads] :
             {std::tuple{f.q.get(), q_cpu.get(), c.n_heads()}, std::tuple{f.k.get(), k_cpu.get(), c.n_kv_heads}})
            for (int64_t e = 0; e < got->numel(); ++e) {
                const int64_t t = e / (heads * c.head_dim);
                if (bad_position[size_t(t)])
                    EXPECT_TRUE(std::isnan(got->get(e))) << "token " << t << " has a bad position";
                else
                    EXPECT_NEAR(got->get(e), cpu->get(e), 2.0 * ulp(dt, cpu->get(e)) + 1e-6) << "element " << e;
            }
        // The caches: the GPU's k rows and v rows in slots 4, 20 and capacity - 1 (tokens 0, 1, 5), zero
        // everywhere else.
        std::vector<int64_t> cpu_slots = in.slots;
        for (int64_t& s : cpu_slots)
            if (s >= capacity) s = -1;
        auto kc_expect = clone(*in.k_cache), vc_expect = clone(*in.v_cache);
        paged_cache_write(kc_expect->view, vc_expect->view, f.k->view, in.v->view,
                          IndexView(std::span<const int64_t>(cpu_slots)));
        EXPECT_TRUE(same_bytes(*f.k_cache, *kc_expect)) << "k_cache";
        EXPECT_TRUE(same_bytes(*f.v_cache, *vc_expect)) << "v_cache";
        for (int64_t h = 0; h < c.n_kv_heads; ++h)
            EXPECT_TRUE(std::isnan(load_as_float(f.k_cache->view.at(1, 4, h, 0), dt))) << "token 1's NaN k row";
    }
}

// The op neither allocates nor synchronises: captured in a graph and replayed once, it gives the
// bytes of a direct call.
TEST_P(RopeCacheGpu, CapturesInAGraph) {
    FP_SKIP_WITHOUT_GPU();
    FP_SKIP_WITHOUT_GRAPHS();
    Rng rng(test_seed());
    const RopeCacheCase c{7, 4, 7, 128, 16, GetParam(), true, 0, 1000000.0};
    const RopeCacheInputs in(c, rng);
    GpuRopeCache direct(in, c.wide), graphed(in, c.wide);
    direct.run_fused(in.rope);
    GpuStream stream(Device::gpu());
    const GpuGraph graph = GpuGraph::capture(stream, [&] { graphed.run_fused(in.rope, stream.get()); });
    graph.replay(stream);
    stream.synchronize();
    expect_same_bytes(Downloaded(in, graphed), Downloaded(in, direct), "graph replay against a direct call");
}

INSTANTIATE_TEST_SUITE_P(Gpu, RopeCacheGpu, ::testing::Values(DType::F32, DType::F16, DType::BF16),
                         [](const ::testing::TestParamInfo<DType>& i) { return std::string(short_name(i.param)); });

// Fused against unfused on Qwen2.5-7B's attention shapes (28 q heads, 4 KV heads, head_dim 128, bf16),
// host-timed over many calls on one stream: what a decode step (1 token per sequence, batch 1 and 8)
// and a prefill chunk pay per layer. Informational: prints, asserts nothing.
TEST(RopeCacheGpuPerf, ReportsTimes) {
    FP_SKIP_WITHOUT_GPU();
    FP_SKIP_ON_HIP_CPU("timings of the CPU emulation say nothing about a GPU");
    Rng rng(test_seed());
    for (int64_t tokens : {1, 8, 512}) {
        const RopeCacheCase c{tokens, 4, 7, 128, 16, DType::BF16, false, 0, 1000000.0};
        const RopeCacheInputs in(c, rng);
        GpuRopeCache g(in, false);
        auto time_us = [&](const std::function<void()>& f) {
            for (int i = 0; i < 20; ++i) f();
            synchronize(Device::gpu());
            constexpr int N = 500;
            const auto start = std::chrono::steady_clock::now();
            for (int i = 0; i < N; ++i) f();
            synchronize(Device::gpu());
            return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / N;
        };
        const double unfused = time_us([&] { g.run_unfused(in.rope); });
        const double fused = time_us([&] { g.run_fused(in.rope); });
        std::printf(
            "[ measured ] rope_qk_cache_write, %lld tokens, 28/4 heads, d128 bf16: fused %.2f us, unfused "
            "(rope, rope, paged_cache_write) %.2f us per call\n",
            (long long)tokens, fused, unfused);
    }
}

// ---------------------------------------------------------------------------------------------- bad input

// Views that claim to be on a GPU but are never dereferenced: each call fails validation first, so
// these run without a GPU too.
TEST(RopeCacheGpuErrors, DevicesOfIndices) {
    std::vector<float> mem(4096);
    const Device gpu = Device::gpu();
    const TensorView q(mem.data(), DType::BF16, {3, 4, 8}, gpu), k(mem.data() + 1024, DType::BF16, {3, 2, 8}, gpu),
        v(mem.data() + 2048, DType::BF16, {3, 2, 8}, gpu), cache(mem.data() + 3072, DType::BF16, {2, 16, 2, 8}, gpu);
    const std::vector<int32_t> pos = {0, 1, 2}, slots = {0, 1, 2};
    const IndexView gpu_pos(pos.data(), 3, gpu), gpu_slots(slots.data(), 3, gpu);
    EXPECT_THAT(error_of([&] { rope_qk_cache_write(q, k, v, IndexView(pos.data(), 3), {}, cache, cache, gpu_slots); }),
                HasSubstr("rope_qk_cache_write: positions must be on gpu:0, got cpu"));
    EXPECT_THAT(error_of([&] { rope_qk_cache_write(q, k, v, gpu_pos, {}, cache, cache, IndexView(slots.data(), 3)); }),
                HasSubstr("rope_qk_cache_write: slots are on cpu, the caches on gpu:0"));
    const TensorView q1(mem.data(), DType::BF16, {3, 4, 8}, Device::gpu(1));
    EXPECT_THAT(error_of([&] { rope_qk_cache_write(q1, k, v, gpu_pos, {}, cache, cache, gpu_slots); }),
                HasSubstr("rope_qk_cache_write: all tensors must be on one device, got gpu:0 and gpu:1"));
    EXPECT_THAT(
        error_of([&] { rope_qk_cache_write(q, k, v, IndexView(pos.data(), 2, gpu), {}, cache, cache, gpu_slots); }),
        HasSubstr("rope_qk_cache_write: positions must have one entry per token (3"));
}

// The GPU-only limit (checked after the device, so it needs one): inv_freq travels in the kernel's
// arguments, which bounds head_dim, as for rope.
TEST(RopeCacheGpuErrors, HeadDimLimit) {
    FP_SKIP_WITHOUT_GPU();
    Buffer q(2 * 2048 * 2, Device::gpu()), k(2048 * 2, Device::gpu()), v(2048 * 2, Device::gpu()),
        kc(16 * 2048 * 2, Device::gpu()), vc(16 * 2048 * 2, Device::gpu()), idx(64, Device::gpu());
    const Device gpu = Device::gpu();
    const TensorView qv(q.data(), DType::BF16, {1, 2, 2048}, gpu), kv(k.data(), DType::BF16, {1, 1, 2048}, gpu),
        vv(v.data(), DType::BF16, {1, 1, 2048}, gpu);
    const TensorView kcv(kc.data(), DType::BF16, {1, 16, 1, 2048}, gpu),
        vcv(vc.data(), DType::BF16, {1, 16, 1, 2048}, gpu);
    const IndexView ix(static_cast<const int32_t*>(idx.data()), 1, gpu);
    EXPECT_THAT(error_of([&] { rope_qk_cache_write(qv, kv, vv, ix, {}, kcv, vcv, ix); }),
                HasSubstr("rope_qk_cache_write on GPU supports head_dim up to 1024, got 2048"));
}

}  // namespace
}  // namespace flashport::test
