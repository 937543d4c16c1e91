// The engine on the GPU (weights uploaded once, device KV cache, the GPU ops and attention kernels)
// against transformers' references for the tiny fixture folders, with the CPU engine's tolerances
// (tests/model/test_model_reference.cpp), plus batched decode against one sequence at a time. The
// tiny models have head dims 16 and 32, which the flash and paged-prefill kernels serve.
// Every test skips with "no GPU present" where there is none.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <span>
#include <vector>

#include "backends/gpu/dependent_launch.h"
#include "gpu_test_util.h"
#include "model_test_util.h"

namespace flashport::engine::test {
namespace {

const ReferenceCase GPU_CASES[] = {
    {"qwen2-tiny-bf16", DType::BF16, "bf16run"},
    {"qwen3-tiny-bf16", DType::BF16, "bf16run"},
    {"qwen3-tiny-bf16-sharded", DType::BF16, "bf16run"},
};

class EngineGpu : public ::testing::TestWithParam<ReferenceCase> {};
TEST_P(EngineGpu, LogitsAtEveryPosition) {
    FP_SKIP_WITHOUT_GPU();
    check_reference_logits(GetParam(), Device::gpu());
}
TEST_P(EngineGpu, GreedyContinuation) {
    FP_SKIP_WITHOUT_GPU();
    check_reference_greedy(GetParam(), Device::gpu());
}
INSTANTIATE_TEST_SUITE_P(Fixtures, EngineGpu, ::testing::ValuesIn(GPU_CASES),
                         [](const auto& param_info) { return reference_case_name(param_info.param); });

// The same bf16 model on the GPU and on the CPU engine, position by position. Both round at the same
// points (the GPU ops mirror the CPU kernels' rounding), so position 0, where attention mixes nothing,
// differs only where an fp32 sum in another order (cuBLAS vs the CPU GEMM) rounds to a neighbouring
// bf16 value; later positions add the attention kernels' differences (the GPU flash kernel rounds P to
// bf16 before P·V, the CPU one keeps it fp32). Bound: transformers' own bf16 error, as above. The
// per-position figures say where a discrepancy enters.
TEST_P(EngineGpu, MatchesCpuEnginePerPosition) {
    FP_SKIP_WITHOUT_GPU();
    const ReferenceCase& c = GetParam();
    const References refs = load_references(c.folder);
    const Model gpu_model = load_model(c.folder, c.compute, Device::gpu());
    const Model cpu_model = load_model(c.folder, c.compute, Device::cpu());
    Engine cpu_engine(cpu_model);
    const std::vector<float> cpu = all_logits(cpu_engine, refs.prompt);
    const size_t vocab = cpu.size() / refs.prompt.size();
    const double scale = max_abs(cpu);
    // Both GEMMs: the vendor BLAS and the portable kernel (a difference that only one shows is the
    // GEMM's).
    flashport::test::for_each_gemm_backend([&](gpu::blas::Backend backend) {
        Engine gpu_engine(gpu_model);
        const std::vector<float> gpu = all_logits(gpu_engine, refs.prompt);
        ASSERT_EQ(gpu.size(), cpu.size());
        std::printf("[ measured ] %s %s gpu (%s GEMM) vs cpu engine, max|diff|/scale per position:", c.folder,
                    dtype_name(c.compute), gpu::blas::backend_name(backend));
        double worst = 0;
        for (size_t t = 0; t < refs.prompt.size(); ++t) {
            const double e = max_abs_diff(std::span<const float>(gpu).subspan(t * vocab, vocab),
                                          std::span<const float>(cpu).subspan(t * vocab, vocab)) /
                             scale;
            worst = std::max(worst, e);
            std::printf(" %.3g", e);
        }
        std::printf("\n");
        EXPECT_LE(worst, reference_tolerance(c, refs)) << gpu::blas::backend_name(backend) << " GEMM";
    });
}

// Three sequences decoded together in one step (one paged-attention call over the batch) give the
// tokens each gives alone.
TEST(EngineGpuBatch, BatchedDecodeMatchesSingle) {
    FP_SKIP_WITHOUT_GPU();
    const Model model = load_model("qwen3-tiny-bf16", DType::BF16, Device::gpu());
    const std::vector<std::vector<int32_t>> prompts = {{1, 2, 3, 4, 5}, {7, 8, 9}, {11, 12, 13, 14, 15, 16, 17, 18, 19}};
    constexpr int N = 24;
    std::vector<std::vector<int32_t>> alone;
    for (const auto& p : prompts) {
        Engine engine(model);
        alone.push_back(greedy(engine, p, N));
    }
    Engine engine(model);
    std::vector<SeqId> ids;
    for (const auto& p : prompts) ids.push_back(engine.add_sequence(p));
    std::vector<std::vector<int32_t>> together(prompts.size());
    while (together[0].size() < size_t(N)) {
        for (const SeqLogits& r : engine.step())
            for (size_t i = 0; i < ids.size(); ++i)
                if (r.seq == ids[i]) together[i].push_back(argmax(r.last()));
        for (size_t i = 0; i < ids.size(); ++i) engine.append(ids[i], together[i].back());
    }
    for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(together[i], alone[i]) << "sequence " << i;
}

// Batched greedy decoding through step(GREEDY), replayed from recorded graphs, with sequences leaving
// and joining between steps (as a server's do): every sequence's tokens equal its tokens decoded
// alone. Three prompts start together; the second leaves after 10 tokens, a fourth joins at step 15
// (its prefill is an eager step, then the batch of three decodes under a new graph key).
TEST(EngineGpuBatch, BatchedDecodeGraphsWithJoinAndLeave) {
    FP_SKIP_WITHOUT_GPU();
    FP_SKIP_WITHOUT_GRAPHS();
    const Model model = load_model("qwen2-tiny-bf16", DType::BF16, Device::gpu());
    const std::vector<std::vector<int32_t>> prompts = {
        {1, 2, 3, 4, 5}, {7, 8, 9}, {11, 12, 13, 14, 15, 16, 17, 18, 19}, {21, 22, 23, 24}};
    constexpr int N = 30;
    std::vector<std::vector<int32_t>> alone;
    for (const auto& p : prompts) {
        Engine engine(model);
        alone.push_back(greedy(engine, p, N));
    }
    Engine engine(model);
    std::map<SeqId, size_t> which;  // engine id -> prompt index
    std::vector<std::vector<int32_t>> got(prompts.size());
    for (size_t i = 0; i < 3; ++i) which[engine.add_sequence(prompts[i])] = i;
    for (int step = 0; step < 2 * N && !which.empty(); ++step) {
        if (step == 15) which[engine.add_sequence(prompts[3])] = 3;
        for (const SeqLogits& r : engine.step(StepOutput::GREEDY)) got[which.at(r.seq)].push_back(r.token);
        for (auto it = which.begin(); it != which.end();) {
            const size_t i = it->second;
            const size_t limit = i == 1 ? 10 : size_t(N);
            if (got[i].size() >= limit) {
                engine.release(it->first);
                it = which.erase(it);
            } else {
                engine.append(it->first, got[i].back());
                ++it;
            }
        }
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
        const size_t n = i == 1 ? 10 : size_t(N);
        ASSERT_EQ(got[i].size(), n) << "sequence " << i;
        EXPECT_EQ(got[i], std::vector<int32_t>(alone[i].begin(), alone[i].begin() + std::ptrdiff_t(n)))
            << "sequence " << i;
    }
    EXPECT_GE(engine.graph_replays(), 30);
    std::printf("[ measured ] batched decode with join and leave: %lld steps replayed from graphs\n",
                (long long)engine.graph_replays());
}

// Greedy decoding through step(GREEDY): the argmax stays on the device, and a single sequence's
// decode steps run from recorded graphs (when the engine's options allow them).
std::vector<int32_t> greedy_on_device(Engine& engine, const std::vector<int32_t>& prompt, int n) {
    const SeqId seq = engine.add_sequence(prompt);
    std::vector<int32_t> out;
    while (int(out.size()) < n) {
        const std::vector<SeqLogits> r = engine.step(StepOutput::GREEDY);
        EXPECT_EQ(r.size(), 1u);
        if (r.size() != 1) break;
        out.push_back(r[0].token);
        engine.append(seq, r[0].token);
    }
    engine.release(seq);
    return out;
}

// Greedy decoding replayed from recorded graphs (step(GREEDY), one sequence) gives the tokens of the
// eager steps that bring every logit to the host, over 70 tokens. With tables padded to 32 tokens
// (EngineOptions::graph_table_tokens) the step's shape changes every 32 tokens, so the graph is
// re-recorded twice on the way; at the default 1024 it is recorded once. The same kernels run either
// way, so the tokens are the same, not just close.
TEST(EngineGpuGraph, DecodeGraphMatchesEagerSteps) {
    FP_SKIP_WITHOUT_GPU();
    FP_SKIP_WITHOUT_GRAPHS();
    for (const char* folder : {"qwen2-tiny-bf16", "qwen3-tiny-bf16"}) {
        const Model model = load_model(folder, DType::BF16, Device::gpu());
        const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7};
        constexpr int N = 70;
        EngineOptions eager_options;
        eager_options.decode_graph = false;
        Engine eager(model, eager_options);
        const std::vector<int32_t> want = greedy(eager, prompt, N);
        EXPECT_EQ(eager.graph_replays(), 0);

        for (int64_t quantum : {int64_t(32), int64_t(1024)}) {
            EngineOptions options;
            options.graph_table_tokens = quantum;
            Engine graphed(model, options);
            const std::vector<int32_t> got = greedy_on_device(graphed, prompt, N);
            EXPECT_EQ(got, want) << folder << ", tables padded to " << quantum << " tokens";
            // 69 decode steps: each new shape's first step runs eagerly (the warm-up's decode step at
            // construction took that for the default width) and its second is recorded.
            EXPECT_GE(graphed.graph_replays(), quantum == 32 ? N - 1 - 6 : N - 2) << folder;
            std::printf("[ measured ] %s, tables padded to %lld tokens: %lld of %d decode steps replayed\n", folder,
                        (long long)quantum, (long long)graphed.graph_replays(), N - 1);
        }
    }
}

// Sampled decoding on the GPU (StepOutput::SAMPLED with Qwen2.5's settings, a repetition penalty
// included): a seed gives the same tokens eagerly and from graphs, and again in a fresh engine;
// another seed gives other tokens; temperature 0 gives the argmax's tokens.
TEST(EngineGpuSampled, SeededTokensFromGraphsEqualEagerOnes) {
    FP_SKIP_WITHOUT_GPU();
    FP_SKIP_WITHOUT_GRAPHS();
    const Model model = load_model("qwen2-tiny-bf16", DType::BF16, Device::gpu());
    const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    constexpr int N = 40;
    const auto run = [&](bool graphs, const SamplingParams& settings, int64_t* replays = nullptr) {
        EngineOptions options;
        options.decode_graph = graphs;
        Engine engine(model, options);
        const SeqId seq = engine.add_sequence(prompt);
        engine.set_sampling(seq, settings);
        std::vector<int32_t> out;
        while (int(out.size()) < N) {
            const std::vector<SeqLogits> r = engine.step(StepOutput::SAMPLED);
            EXPECT_EQ(r.size(), 1u);
            if (r.size() != 1) break;
            out.push_back(r[0].token);
            engine.append(seq, r[0].token);
        }
        if (replays) *replays = engine.graph_replays();
        return out;
    };
    SamplingParams qwen;
    qwen.temperature = 0.7f;
    qwen.top_k = 20;
    qwen.top_p = 0.8f;
    qwen.repetition_penalty = 1.05f;
    qwen.seed = 3;
    int64_t replays = 0;
    const std::vector<int32_t> graphed = run(true, qwen, &replays);
    EXPECT_EQ(run(false, qwen), graphed);
    EXPECT_EQ(run(true, qwen), graphed);
    EXPECT_GE(replays, N - 2);
    SamplingParams other = qwen;
    other.seed = 4;
    EXPECT_NE(run(true, other), graphed);
    SamplingParams cold = qwen;
    cold.temperature = 0.0f;
    cold.repetition_penalty = 1.0f;
    Engine greedy_engine(model);
    EXPECT_EQ(run(true, cold), greedy_on_device(greedy_engine, prompt, N));
    std::printf("[ measured ] sampled decode: %lld of %d steps replayed from graphs\n", (long long)replays, N - 1);
}

// Dependent launches (NVIDIA sm_90+: each decode kernel may start while the one before it finishes,
// and the GEMVs request model weights before waiting) change when kernels run, never what they
// compute: greedy tokens with them on equal those with them off, eagerly and from graphs.
TEST(EngineGpuGraph, DependentLaunchesKeepTheTokens) {
    FP_SKIP_WITHOUT_GPU();
    const Model model = load_model("qwen3-tiny-bf16", DType::BF16, Device::gpu());
    const std::vector<int32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6};
    constexpr int N = 40;
    const bool was = gpu::dependent_launches();
    std::vector<int32_t> tokens[2][2];  // [dependent launches][graphs]
    for (int pdl = 0; pdl < 2; ++pdl)
        for (int graphs = 0; graphs < 2; ++graphs) {
            gpu::set_dependent_launches(pdl == 1);
            EngineOptions options;
            options.decode_graph = graphs == 1;
            Engine engine(model, options);
            tokens[pdl][graphs] = greedy_on_device(engine, prompt, N);
        }
    gpu::set_dependent_launches(true);
    const bool available = gpu::dependent_launches();
    gpu::set_dependent_launches(was);
    for (int graphs = 0; graphs < 2; ++graphs) EXPECT_EQ(tokens[1][graphs], tokens[0][graphs]) << "graphs " << graphs;
    EXPECT_EQ(tokens[0][1], tokens[0][0]);
    std::printf("[ measured ] dependent launches %s on this GPU\n",
                available ? "in use" : "not available (plain launches)");
}

}  // namespace
}  // namespace flashport::engine::test
