// linear (flashport/linear.h) on the GPU: the GEMV (one fp16/bf16 token; a norm in its own launch
// first, or in the GEMV's prologue) and the composition (more tokens, fp32, ineligible views) against
// the float64 chain (tests/ops/linear_case.h, which states the tolerance) and against the CPU op, with
// NaN-poisoned outputs; then host-timed Qwen2.5-7B shapes against the plain ops (rms_norm, GEMV,
// add / swiglu) one after the other. With RoPE and
// the cache write after the product: the same bytes as linear and then rope_qk_cache_write.
//
// Against the CPU op (16-bit outputs): within twice the float64 check's tolerance (each side has its
// own rounding errors), and at least 60% identical where there are 100 elements or more. Not a
// number of ulps of out: the GPU sums squares and products in other orders than the CPU, so h and y
// can each flip a rounding, and where the residual or the sum cancels, one ulp of y is many of out
// (measured: up to 13 ulps of an fp16 out, 86% identical, 3584 → 512 with the norm).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>

#include "backends/gpu/ops_gpu.h"
#include "flashport/device.h"
#include "flashport/linear.h"
#include "flashport/memory.h"
#include "flashport/paged_cache.h"
#include "gpu_ops_util.h"
#include "gpu_test_util.h"
#include "ops/linear_case.h"
#include "ops/linear_rope_case.h"

namespace flashport::test {
namespace {

class LinearGpu : public ::testing::TestWithParam<DType> {};

// The name of a one-token 16-bit linear's kernel: a norm runs in its own launch before the GEMV
// unless the case folds it into the GEMV's prologue.
template <class Case>
std::string one_token_kernel(const Case& c) {
    return c.norm && !c.prologue ? "gpu.linear.rms_norm+gemv" : "gpu.linear.gemv";
}

// The cases as the engine runs them (a norm in its own launch), then each case with a norm again with
// the norm in the GEMV's prologue (LinearParams::norm_in_prologue): both one-token kernels.
template <class Case>
std::vector<Case> both_norm_kernels(std::vector<Case> cases) {
    const size_t n = cases.size();
    for (size_t i = 0; i < n; ++i)
        if (cases[i].norm) {
            Case c = cases[i];
            c.prologue = true;
            cases.push_back(c);
        }
    return cases;
}

struct GpuLinear {
    GpuTensor x, w, b, gamma, residual, out;
    explicit GpuLinear(const LinearInputs& in)
        : x(*in.x), w(*in.w), b(*in.b), gamma(*in.gamma), residual(*in.residual), out(*in.out) {}
};

// Runs the case on the GPU (out = residual's buffer when in_place) and checks it; returns the kernel.
std::string run_case(const LinearCase& c, DType dt, Rng& rng, bool in_place = false) {
    SCOPED_TRACE(c.name() + " " + short_name(dt) + (in_place ? " in place" : ""));
    LinearInputs in = make_linear_inputs(c, dt, rng);
    const std::vector<double> residual = values(*in.residual);
    GpuLinear g(in);
    const GpuTensor& gout = in_place ? g.residual : g.out;
    const LinearParams p = params_for(c, &g.b.view, &g.gamma.view, &g.residual.view);
    const size_t ws_bytes = linear_workspace_bytes(gout.view, g.x.view, g.w.view, p);
    Buffer ws(std::max<size_t>(ws_bytes, 1), Device::gpu());
    const std::string kernel = linear(gout.view, g.x.view, g.w.view, p, ws.data(), ws.size());
    HostTensor& host_out = in_place ? *in.residual : *in.out;
    gout.download(host_out);
    std::vector<double> tols;
    EXPECT_EQ(check_linear(c, in, host_out, residual, &tols), 0) << kernel;
    EXPECT_TRUE(host_out.padding_intact());

    // The CPU op on the same inputs, for 16-bit outputs (where rounding points show). An fp32 output
    // shows every difference in fp32 sum order (cuBLAS's, the CPU's), which the float64 check bounds.
    if (dt == DType::F32) return kernel;
    LinearInputs cpu = make_linear_inputs(c, dt, rng);  // fresh buffers, overwritten below
    for (auto [src, dst] : {std::pair{in.x.get(), cpu.x.get()}, {in.w.get(), cpu.w.get()}, {in.b.get(), cpu.b.get()},
                            {in.gamma.get(), cpu.gamma.get()}})
        dst->bytes = src->bytes;
    for (int64_t i = 0; i < cpu.residual->numel(); ++i) cpu.residual->set(i, residual[size_t(i)]);
    const LinearParams cp = params_for(c, &cpu.b->view, &cpu.gamma->view, &cpu.residual->view);
    Buffer cws(std::max<size_t>(linear_workspace_bytes(cpu.out->view, cpu.x->view, cpu.w->view, cp), 1));
    linear(cpu.out->view, cpu.x->view, cpu.w->view, cp, cws.data(), cws.size());
    int64_t exact = 0, bad = 0;
    for (int64_t i = 0; i < host_out.numel(); ++i) {
        const double on_gpu = host_out.get(i), on_cpu = cpu.out->get(i);
        exact += on_gpu == on_cpu;
        if (!(std::fabs(on_gpu - on_cpu) <= 2 * tols[size_t(i)]) && bad++ == 0)
            ADD_FAILURE() << "element " << i << ": GPU " << on_gpu << ", CPU " << on_cpu << ", allowed "
                          << 2 * tols[size_t(i)];
    }
    EXPECT_EQ(bad, 0) << "elements differ from the CPU op beyond tolerance";
    if (host_out.numel() >= 100) {
        EXPECT_GE(double(exact), 0.6 * double(host_out.numel()))
            << "only " << exact << " of " << host_out.numel() << " elements match the CPU op exactly";
    }
    return kernel;
}

// Each case of more than one token again with impl GEMV, where the GPU has the matrix-core GEMV for
// the dtype: AUTO composes them (cuBLAS), GEMV runs that kernel.
std::vector<LinearCase> with_matrix_core_gemv(std::vector<LinearCase> cases, DType dt) {
    if (dt == DType::F32 || !gpu::gemv_tc_serves(dt)) return cases;
    const size_t n = cases.size();
    for (size_t i = 0; i < n; ++i)
        if (cases[i].tokens > 1 && cases[i].tokens <= gpu::GEMV_TC_MAX_TOKENS) {
            LinearCase c = cases[i];
            c.impl = MatmulImpl::GEMV;
            cases.push_back(c);
        }
    return cases;
}

// The kernel linear names for a case: one 16-bit token is the GEMV (after the norm's launch, or with
// it inside); 2-32 16-bit tokens with impl GEMV the matrix-core GEMV (the norm in its own launch);
// anything else the composition.
std::string expected_kernel(const LinearCase& c, DType dt) {
    if (dt == DType::F32) return "gpu.linear.composed";
    if (c.tokens == 1) return one_token_kernel(c);
    if (c.impl == MatmulImpl::GEMV)
        return std::string(c.norm ? "gpu.linear.rms_norm+" : "gpu.linear.") + gpu::gemv_kernel_name(dt, c.tokens);
    return "gpu.linear.composed";
}

TEST_P(LinearGpu, MatchesFloat64AndCpu) {
    FP_SKIP_WITHOUT_GPU();
    const DType dt = GetParam();
    Rng rng(test_seed());
    int64_t matrix_core_cases = 0;
    for (const LinearCase& c : with_matrix_core_gemv(both_norm_kernels(linear_cases()), dt)) {
        const std::string kernel = run_case(c, dt, rng), want = expected_kernel(c, dt);
        if (want == "gpu.linear.composed") {  // the composition's parts follow in brackets
            EXPECT_EQ(kernel.rfind("gpu.linear.composed(", 0), 0u) << c.name() << ": " << kernel;
        } else {
            EXPECT_EQ(kernel, want) << c.name();
        }
        matrix_core_cases += kernel.find("gemv.m") != std::string::npos;
    }
    if (dt != DType::F32 && gpu::gemv_tc_serves(dt)) {
        EXPECT_GT(matrix_core_cases, 100);
    }
}

TEST_P(LinearGpu, ResidualInPlace) {
    FP_SKIP_WITHOUT_GPU();
    Rng rng(test_seed());
    for (int64_t tokens : {1, 5, 32}) run_case({tokens, 896, 136, true, true, true, false}, GetParam(), rng, true);
    // Without a bias (o_proj and down), more than one token: on cuBLAS the GEMM adds onto out (beta = 1),
    // no add launch, every dtype (fp32 too); elsewhere the add composes. Odd token counts, rows no tile
    // divides, a norm and none.
    const bool in_gemm = gpu::residual_in_gemm_available(GetParam());
    for (int64_t tokens : {2, 7, 97}) {
        for (bool norm : {false, true}) {
            const std::string kernel = run_case({tokens, 904, 137, norm, false, true, false}, GetParam(), rng, true);
            EXPECT_EQ(kernel.find(".accumulate)") != std::string::npos, in_gemm) << tokens << " tokens: " << kernel;
            EXPECT_EQ(kernel.find("+add") == std::string::npos, in_gemm) << kernel;
        }
    }
    if (GetParam() != DType::F32 && gpu::gemv_tc_serves(GetParam())) {  // the matrix-core GEMV, in place
        LinearCase c{32, 896, 136, true, true, true, false};
        c.impl = MatmulImpl::GEMV;
        EXPECT_EQ(run_case(c, GetParam(), rng, true), "gpu.linear.rms_norm+" + std::string(gpu::gemv_kernel_name(
                                                                                     GetParam(), 32)));
    }
}

// RoPE and the cache write after the product (tests/ops/linear_rope_case.h): the same bytes as linear
// and then rope_qk_cache_write on the GPU; one 16-bit token is the fused GEMV.
TEST_P(LinearGpu, RopeCacheIsTheComposition) {
    FP_SKIP_WITHOUT_GPU();
    const DType dt = GetParam();
    Rng rng(test_seed());
    for (const LinearRopeCase& c : both_norm_kernels(linear_rope_cases())) {
        const std::string kernel =
            expect_rope_cache_matches_composition<GpuTensor, GpuIndices>(c, dt, rng, Device::gpu());
        EXPECT_EQ(kernel == one_token_kernel(c), c.tokens == 1 && dt != DType::F32) << c.name() << ": " << kernel;
    }
}

// Bad metadata, as rope_qk_cache_write takes it on a GPU: positions -1 and 2^24 give NaN q and k rows
// (the NaN k row still cached), a slot past the cache skips the token's cache rows.
TEST_P(LinearGpu, RopeCacheBadPositionsAndSlots) {
    FP_SKIP_WITHOUT_GPU();
    const DType dt = GetParam();
    Rng rng(test_seed());
    for (int64_t bad : {int64_t(-1), int64_t(1) << 24})
        for (bool slot_past_the_cache : {false, true})
            for (bool prologue : {false, true}) {
                const LinearRopeCase c{1, 264, 2, 7, 128, true, true, bad < 0, prologue};
                expect_rope_cache_matches_composition<GpuTensor, GpuIndices>(
                    c, dt, rng, Device::gpu(), [&](LinearRopeInputs& in) {
                        in.positions[0] = bad;
                        if (slot_past_the_cache) in.slots[0] = in.k_cache->view.dim(0) * c.block_size;
                    });
            }
}

INSTANTIATE_TEST_SUITE_P(Gpu, LinearGpu, ::testing::Values(DType::F32, DType::F16, DType::BF16),
                         [](const ::testing::TestParamInfo<DType>& p) { return std::string(short_name(p.param)); });

// A norm weight that starts off a 16-byte boundary can't feed the fused kernel's vector loads: the op
// falls back to the composition, with the same result.
TEST(LinearGpuFallback, MisalignedNormWeight) {
    FP_SKIP_WITHOUT_GPU();
    Rng rng(test_seed());
    const LinearCase c{1, 64, 98, true, false, false, false};
    LinearInputs in = make_linear_inputs(c, DType::BF16, rng);
    GpuLinear g(in);
    HostTensor shifted(DType::BF16, {c.in + 1});
    for (int64_t i = 0; i < c.in; ++i) shifted.set(i + 1, in.gamma->get(i));
    GpuTensor gs(shifted);
    TensorView gamma = gs.view;
    gamma.data = static_cast<char*>(gamma.data) + 2;
    gamma.shape[0] = c.in;
    const LinearParams p = params_for(c, nullptr, &gamma, nullptr);
    Buffer ws(linear_workspace_bytes(g.out.view, g.x.view, g.w.view, p), Device::gpu());
    const std::string kernel = linear(g.out.view, g.x.view, g.w.view, p, ws.data(), ws.size());
    EXPECT_EQ(kernel.rfind("gpu.linear.composed(rms_norm+", 0), 0u) << kernel;
    g.out.download(*in.out);
    EXPECT_EQ(check_linear(c, in, *in.out, values(*in.residual)), 0);
}

// The median of 5 timed rounds after one warm-up round, in µs a call: `round` makes `calls` calls
// and waits for them; the GPU is idle when each round starts.
double median_round_us(const std::function<void()>& round, int calls) {
    std::vector<double> rounds;
    for (int r = 0; r < 6; ++r) {
        synchronize(Device::gpu());
        const auto start = std::chrono::steady_clock::now();
        round();
        if (r > 0)  // the first round warms up
            rounds.push_back(
                std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / calls);
    }
    std::sort(rounds.begin(), rounds.end());
    return rounds[rounds.size() / 2];
}

// Host-timed median of 5 rounds of 200 calls of f, after one warm-up round (µs a call).
double time_us(const std::function<void()>& f) {
    return median_round_us(
        [&] {
            for (int i = 0; i < 200; ++i) f();
            synchronize(Device::gpu());
        },
        200);
}

// Host-timed (median of 5 rounds of 200 calls): each Qwen2.5-7B decode projection as linear runs it
// against the plain ops it replaces (rms_norm, the GEMV, add / swiglu: up to three launches); with a
// norm, linear's default (the norm's launch, then the GEMV with its epilogue) against the norm in the
// GEMV's prologue (one launch). Not a pass/fail test: a perf figure for docs/perf.md.
TEST(LinearGpuPerf, ReportsTimes) {
    FP_SKIP_WITHOUT_GPU();
    FP_SKIP_ON_HIP_CPU("timings of the CPU emulation say nothing about a GPU");
    Rng rng(test_seed());
    const char* names[] = {"qkv (norm, bias)", "o_proj (residual)", "gate_up (norm, swiglu)", "down (residual)"};
    const std::vector<LinearCase> shapes = linear_qwen_cases();
    for (size_t k = 0; k < shapes.size(); ++k) {
        const LinearCase& c = shapes[k];
        LinearInputs in = make_linear_inputs(c, DType::BF16, rng);
        GpuLinear g(in);
        const LinearParams p = params_for(c, &g.b.view, &g.gamma.view, &g.residual.view);
        GpuTensor h(*in.x);
        HostTensor y_host(DType::BF16, {c.tokens, c.rows});
        GpuTensor y(y_host);
        Buffer ws(std::max<size_t>(linear_workspace_bytes(g.out.view, g.x.view, g.w.view, p), 1), Device::gpu());
        const double ours = time_us([&] { linear(g.out.view, g.x.view, g.w.view, p, ws.data(), ws.size()); });
        const double plain = time_us([&] {
            const TensorView& x = c.norm ? h.view : g.x.view;
            if (c.norm) rms_norm(h.view, g.x.view, g.gamma.view, 1e-6f);
            matmul(c.swiglu || c.residual ? y.view : g.out.view, x, g.w.view, c.bias ? &g.b.view : nullptr);
            if (c.residual) add(g.out.view, g.residual.view, y.view);
            if (c.swiglu) swiglu(g.out.view, y.view.narrowed(1, 0, c.cols()), y.view.narrowed(1, c.cols(), c.cols()));
        });
        LinearParams in_prologue = p;
        in_prologue.norm_in_prologue = true;
        const double prologue = !c.norm ? 0.0 : time_us([&] { linear(g.out.view, g.x.view, g.w.view, in_prologue); });
        const double mb = double(c.rows * c.in * 2) / 1e6;
        std::printf("[ measured ] linear %s, %lldx%lld bf16 (%.1f MB): %s %.2f us (%.0f GB/s), plain ops %.2f us",
                    names[k], (long long)c.rows, (long long)c.in, mb, c.norm ? "norm apart" : "fused", ours,
                    mb * 1e3 / ours, plain);
        if (c.norm) std::printf(", norm in the prologue %.2f us", prologue);
        std::printf("\n");
    }
}

// GPU time of one call of f(stream), as the engine's graphs see it: 50 calls captured in a graph,
// the median of 5 timed replays (after one warm-up) over 50. Host-timing single calls instead counts
// each launch's host cost, which for the BLAS's 3-4 launches exceeds a small product's GPU time.
double graph_time_us(const std::function<void(void*)>& f) {
    constexpr int CALLS = 50;
    const GpuStream stream(Device::gpu());
    f(stream.get());  // the BLAS's handle and workspace, before capture
    stream.synchronize();
    const GpuGraph graph = GpuGraph::capture(stream, [&] {
        for (int i = 0; i < CALLS; ++i) f(stream.get());
    });
    return median_round_us(
        [&] {
            graph.replay(stream);
            stream.synchronize();
        },
        CALLS);
}

// Graph-timed (graph_time_us): Qwen2.5-7B's four projections for batched decode (8, 16 and 32
// tokens) with impl GEMV (the norm's launch, then the matrix-core GEMV with its epilogue, where the
// GPU has one) against impl BLAS (the norm, the vendor GEMM and the add / SwiGLU launches). A perf
// figure for docs/perf.md, not a pass/fail test.
TEST(LinearGpuPerf, BatchReportsTimes) {
    FP_SKIP_WITHOUT_GPU();
    FP_SKIP_ON_HIP_CPU("timings of the CPU emulation say nothing about a GPU");
    if (!gpu::gemv_tc_serves(DType::BF16)) GTEST_SKIP() << "this GPU has no matrix-core GEMV for bf16";
    Rng rng(test_seed());
    const char* names[] = {"qkv", "o_proj", "gate_up", "down"};
    for (int64_t tokens : {8, 16, 32}) {
        const std::vector<LinearCase> shapes = linear_qwen_cases(tokens);
        for (size_t k = 0; k < shapes.size(); ++k) {
            const LinearCase& c = shapes[k];
            LinearInputs in = make_linear_inputs(c, DType::BF16, rng);
            GpuLinear g(in);
            LinearParams p = params_for(c, &g.b.view, &g.gamma.view, &g.residual.view);
            p.impl = MatmulImpl::GEMV;
            LinearParams blas = p;
            blas.impl = MatmulImpl::BLAS;
            Buffer ws(std::max<size_t>(linear_workspace_bytes(g.out.view, g.x.view, g.w.view, blas), 1), Device::gpu());
            std::string kernel, blas_kernel;
            const double ours = graph_time_us(
                [&](void* s) { kernel = linear(g.out.view, g.x.view, g.w.view, p, ws.data(), ws.size(), s); });
            const double vendor = graph_time_us(
                [&](void* s) { blas_kernel = linear(g.out.view, g.x.view, g.w.view, blas, ws.data(), ws.size(), s); });
            const double mb = double(c.rows * c.in * 2) / 1e6;
            std::printf("[ measured ] linear batch %lld %s, %lldx%lld bf16 (%.1f MB): %s %.2f us (%.0f GB/s), %s %.2f us "
                        "(%.0f GB/s), ratio %.2f\n",
                        (long long)tokens, names[k], (long long)c.rows, (long long)c.in, mb, kernel.c_str(), ours,
                        mb * 1e3 / ours, blas_kernel.c_str(), vendor, mb * 1e3 / vendor, vendor / ours);
        }
    }
}

// Host-timed as above: Qwen2.5-7B's qkv projection of one decode token with RoPE and the cache write
// in its epilogue, against the fused qkv GEMV followed by rope_qk_cache_write (the two launches it
// replaces). A perf figure for docs/perf.md, not a pass/fail test.
TEST(LinearGpuPerf, RopeCacheReportsTimes) {
    FP_SKIP_WITHOUT_GPU();
    FP_SKIP_ON_HIP_CPU("timings of the CPU emulation say nothing about a GPU");
    Rng rng(test_seed());
    const LinearRopeCase c{1, 3584, 4, 7, 128, true, true, false};
    const LinearRopeInputs in(c, DType::BF16, rng);
    const GpuTensor x(*in.x), w(*in.w), b(*in.b), gamma(*in.gamma), out(*in.out), kc(*in.k_cache), vc(*in.v_cache);
    const GpuIndices<int32_t> positions(in.positions32), slots(in.slots32);
    RopeCacheWrite rc;
    rc.n_heads = c.n_heads();
    rc.n_kv_heads = c.n_kv_heads;
    rc.rope = {c.theta, 0};
    rc.positions = positions.view;
    rc.slots = slots.view;
    rc.k_cache = kc.view;
    rc.v_cache = vc.view;
    LinearParams p;
    p.bias = &b.view;
    p.norm_weight = &gamma.view;
    p.constant_weight = true;
    const std::vector<TensorView> heads = qkv_heads(out.view, c);
    LinearParams fused = p;
    fused.rope_cache = &rc;
    Buffer ws(std::max(linear_workspace_bytes(out.view, x.view, w.view, p),
                       linear_workspace_bytes(out.view, x.view, w.view, fused)),
              Device::gpu());
    const double apart = time_us([&] {
        linear(out.view, x.view, w.view, p, ws.data(), ws.size());
        rope_qk_cache_write(heads[0], heads[1], heads[2], rc.positions, rc.rope, kc.view, vc.view, rc.slots);
    });
    const double together = time_us([&] { linear(out.view, x.view, w.view, fused, ws.data(), ws.size()); });
    std::printf(
        "[ measured ] linear qkv (norm, bias) %lldx%lld bf16 + RoPE and cache write: in the epilogue %.2f us, "
        "then rope_qk_cache_write %.2f us\n",
        (long long)c.rows(), (long long)c.in, together, apart);
}

}  // namespace
}  // namespace flashport::test
