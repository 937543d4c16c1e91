// The batching engine and its KV cache: incremental decoding equals recomputing from scratch,
// sequences batched together equal each run alone (joining and finishing at different steps),
// chunked prefill equals one pass, cache blocks are reused after release, and bad requests fail
// clearly.
//
// "Equal" is within fp32 summation-order noise, 1e-4 of the logit scale (measured up to 1.2e-5), with identical argmax:
// the same logits come out of different kernels (a one-token decode step uses the GEMV path and the paged attention
// call, a prefill the BLAS path and flash attention), so bits may differ.
#include "model_test_util.h"

#include <algorithm>
#include <functional>
#include <limits>

#include "engine/generate.h"
#include "engine/kv_cache.h"
#include "flashport/error.h"
#include "flashport/sample.h"

namespace flashport::engine::test {
namespace {

constexpr double kSameTolerance = 1e-4;  // relative to the logit scale, as the fp32 reference tests

// Logits of every position of `ids`, computed in one pass on a fresh engine.
std::vector<float> recompute(const Model& model, const std::vector<int32_t>& ids) {
    Engine engine(model);
    return all_logits(engine, ids);
}

void expect_same_logits(std::span<const float> a, std::span<const float> b, const std::string& what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    EXPECT_LE(max_abs_diff(a, b) / max_abs(b), kSameTolerance) << what;
    const size_t vocab = 512;
    for (size_t r = 0; r < a.size() / vocab; ++r)
        EXPECT_EQ(argmax(a.subspan(r * vocab, vocab)), argmax(b.subspan(r * vocab, vocab))) << what << " row " << r;
}

std::vector<int32_t> ids_from(int32_t seed, size_t n) {
    std::vector<int32_t> ids(n);
    for (size_t i = 0; i < n; ++i) ids[i] = int32_t((seed * 131 + int32_t(i) * 37 + int32_t(i * i)) % 500);
    return ids;
}

class EngineEquivalence : public ::testing::TestWithParam<const char*> {};

TEST_P(EngineEquivalence, PrefillThenDecodeEqualsFullRecompute) {
    const Model model = load_model(GetParam(), DType::F32);
    const References refs = load_references(GetParam());
    Engine engine(model);
    std::vector<std::vector<float>> steps;
    const std::vector<int32_t> gen = greedy(engine, refs.prompt, 40, &steps);

    std::vector<int32_t> all = refs.prompt;
    all.insert(all.end(), gen.begin(), gen.end() - 1);
    const std::vector<float> full = recompute(model, all);
    for (size_t s = 0; s < steps.size(); ++s) {
        const size_t pos = refs.prompt.size() - 1 + s;
        expect_same_logits(steps[s], std::span<const float>(full).subspan(pos * 512, 512),
                           "decode step " + std::to_string(s));
    }
}

TEST_P(EngineEquivalence, ChunkedPrefillEqualsOnePass) {
    const Model model = load_model(GetParam(), DType::F32);
    const std::vector<int32_t> ids = ids_from(3, 100);
    const std::vector<float> one = recompute(model, ids);
    for (int64_t chunk : {1, 7, 16, 33}) {
        EngineOptions o;
        o.max_step_tokens = chunk;
        Engine engine(model, o);
        expect_same_logits(all_logits(engine, ids), one, "chunk " + std::to_string(chunk));
    }
}

// Three sequences of different lengths decode together; one finishes early, a fourth joins midway
// (its prefill shares a step with the others' decode), and each sequence's logits at every step
// equal those of the sequence run alone.
TEST_P(EngineEquivalence, BatchOfDifferentLengthsEqualsEachAlone) {
    const Model model = load_model(GetParam(), DType::F32);
    struct Plan {
        std::vector<int32_t> prompt;
        int join_step, steps;
    };
    const std::vector<Plan> plans = {
        {ids_from(1, 24), 0, 20}, {ids_from(2, 5), 0, 6}, {ids_from(3, 40), 0, 20}, {ids_from(4, 17), 4, 12}};

    // Alone: greedy on a fresh engine, recording each step's logits.
    std::vector<std::vector<std::vector<float>>> alone(plans.size());
    std::vector<std::vector<int32_t>> alone_ids(plans.size());
    for (size_t i = 0; i < plans.size(); ++i) {
        Engine engine(model);
        alone_ids[i] = greedy(engine, plans[i].prompt, plans[i].steps, &alone[i]);
    }

    Engine engine(model);
    std::vector<SeqId> ids(plans.size(), -1);
    std::vector<int> done(plans.size(), 0);
    for (int step = 0; step < 30; ++step) {
        for (size_t i = 0; i < plans.size(); ++i)
            if (plans[i].join_step == step) ids[i] = engine.add_sequence(plans[i].prompt);
        for (const SeqLogits& r : engine.step()) {
            const size_t i = size_t(std::find(ids.begin(), ids.end(), r.seq) - ids.begin());
            ASSERT_LT(i, plans.size());
            const int k = done[i]++;
            expect_same_logits(r.last(), alone[i][size_t(k)],
                               "sequence " + std::to_string(i) + " step " + std::to_string(k));
            const int32_t next = argmax(r.last());
            if (done[i] == plans[i].steps) {
                engine.release(r.seq);
            } else {
                engine.append(r.seq, next);
            }
        }
    }
    for (size_t i = 0; i < plans.size(); ++i) EXPECT_EQ(done[i], plans[i].steps) << "sequence " << i;
    EXPECT_EQ(engine.live(), 0u);
    EXPECT_EQ(engine.cache().used_blocks(), 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EngineEquivalence, ::testing::Values("qwen2-tiny-f32", "qwen3-tiny-f32"),
                         [](const auto& param_info) { return test_name(param_info.param); });

// A scratch slot keeps its address while requests fit and moves only when one outgrows it; bytes()
// counts what is held. (The decode graphs recorded over the slots rely on the first; they are
// exercised on a GPU in tests/gpu/test_engine_gpu.cpp.)
TEST(ForwardScratch, SlotsKeepTheirAddressUntilTheyGrow) {
    ForwardScratch scratch;
    void* a = scratch.get(3, 100, Device::cpu());
    EXPECT_EQ(scratch.get(3, 64, Device::cpu()), a);
    EXPECT_EQ(scratch.get(3, 100, Device::cpu()), a);
    void* b = scratch.get(3, 4096, Device::cpu());
    EXPECT_NE(b, nullptr);
    EXPECT_EQ(scratch.get(3, 200, Device::cpu()), b);
    scratch.get(0, 10, Device::cpu());
    EXPECT_EQ(scratch.bytes(), 4096u + 10u);
    EXPECT_EQ(scratch.graph_replays(), 0);
}

// step(GREEDY) gives each finished sequence the first maximum of its last logit row, as the sampler
// takes it from step(LOGITS), with no logits for ordinary sequences and all of them for an
// all_logits one; bf16 (16-bit logits rounded before the argmax) and fp32, three sequences of
// different lengths decoding together.
TEST(EngineGreedy, GreedyStepEqualsArgmaxOfLogits) {
    for (DType dt : {DType::F32, DType::BF16}) {
        const Model model = load_model("qwen2-tiny-f32", dt);
        Engine by_logits(model), on_device(model);
        std::vector<SeqId> a, b;
        for (int32_t seed : {1, 2, 3}) {
            a.push_back(by_logits.add_sequence(ids_from(seed, size_t(10 + 7 * seed))));
            b.push_back(on_device.add_sequence(ids_from(seed, size_t(10 + 7 * seed))));
        }
        const SeqId scored = on_device.add_sequence(ids_from(9, 12), true);
        for (int step = 0; step < 12; ++step) {
            const std::vector<SeqLogits> want = by_logits.step(), got = on_device.step(StepOutput::GREEDY);
            ASSERT_EQ(got.size(), want.size() + (step == 0 ? 1 : 0)) << "step " << step;
            for (const SeqLogits& g : got) {
                if (g.seq == scored) {  // the all_logits sequence: every row's logits, and the last row's argmax
                    EXPECT_EQ(g.logits.size(), size_t(12 * 512));
                    EXPECT_EQ(g.token, argmax(g.last()));
                    on_device.release(scored);
                    continue;
                }
                const size_t i = size_t(std::find(b.begin(), b.end(), g.seq) - b.begin());
                ASSERT_LT(i, b.size());
                const auto w = std::find_if(want.begin(), want.end(), [&](const SeqLogits& x) { return x.seq == a[i]; });
                ASSERT_NE(w, want.end());
                const int32_t token = argmax(w->last());
                EXPECT_EQ(g.token, token) << dtype_name(dt) << " step " << step << " sequence " << i;
                EXPECT_TRUE(g.logits.empty()) << "GREEDY brings no logits for an ordinary sequence";
                by_logits.append(a[i], token);
                on_device.append(b[i], g.token);
            }
        }
    }
}

// StepOutput::SAMPLED draws each sequence's token where the model runs, under its set_sampling
// settings; on the CPU that is flashport::sample on the step's own logits. So a sequence stepped
// with LOGITS and sampled here by the op, with the same settings, a seen set built from its context
// and its next position as the counter, picks the same tokens. Three sequences decode together:
// greedy, temperature with a repetition penalty, and top-k / top-p / min-p with a penalty; one of
// them is truncated midway, which must take the forgotten tokens out of its seen set.
TEST(EngineSampled, SampledStepEqualsTheSampleOpOnItsLogits) {
    const Model model = load_model("qwen2-tiny-f32", DType::BF16);
    const int64_t vocab = model.config().vocab_size, words = (vocab + 31) / 32;
    SamplingParams settings[3];
    settings[0].do_sample = false;
    settings[1].temperature = 0.8f;
    settings[1].repetition_penalty = 1.5f;
    settings[1].seed = 7;
    settings[2].temperature = 1.2f;
    settings[2].top_k = 40;
    settings[2].top_p = 0.9f;
    settings[2].min_p = 0.02f;
    settings[2].repetition_penalty = 1.2f;
    settings[2].seed = 11;
    Engine by_logits(model), on_device(model);
    std::vector<SeqId> a, b;
    for (int i = 0; i < 3; ++i) {
        a.push_back(by_logits.add_sequence(ids_from(i + 1, size_t(9 + 5 * i))));
        b.push_back(on_device.add_sequence(ids_from(i + 1, size_t(9 + 5 * i))));
        on_device.set_sampling(b[size_t(i)], settings[i]);
    }
    int64_t sampled_differently = 0;  // tokens that are not the argmax: the draw is really sampling
    for (int step = 0; step < 16; ++step) {
        const std::vector<SeqLogits> want = by_logits.step(), got = on_device.step(StepOutput::SAMPLED);
        ASSERT_EQ(got.size(), want.size()) << "step " << step;
        for (const SeqLogits& g : got) {
            const size_t i = size_t(std::find(b.begin(), b.end(), g.seq) - b.begin());
            ASSERT_LT(i, b.size());
            const auto w = std::find_if(want.begin(), want.end(), [&](const SeqLogits& x) { return x.seq == a[i]; });
            ASSERT_NE(w, want.end());
            std::vector<uint32_t> seen(size_t(words), 0);
            for (int32_t id : by_logits.tokens(a[i])) seen[size_t(id) / 32] |= uint32_t(1) << (id % 32);
            const SamplingParams& sp = settings[i];
            SampleParams p;
            p.temperature = sp.greedy() ? 0.0f : sp.temperature;
            p.top_k = int32_t(sp.top_k);
            p.top_p = sp.top_p;
            p.min_p = sp.min_p;
            p.repetition_penalty = sp.repetition_penalty;
            p.seen_row = sp.repetition_penalty != 1.0f ? 0 : -1;
            p.seed = sp.seed;
            p.counter = w->position + 1;
            int32_t token = -1;
            const TensorView row(const_cast<float*>(w->last().data()), DType::F32, {1, vocab});
            sample(&token, row, &p, SeenSets{seen.data(), 1, words, Device::cpu()}, nullptr, 0);
            EXPECT_EQ(g.token, token) << "step " << step << " sequence " << i;
            EXPECT_TRUE(g.logits.empty()) << "SAMPLED brings no logits for an ordinary sequence";
            sampled_differently += token != argmax(w->last());
            by_logits.append(a[i], token);
            on_device.append(b[i], g.token);
        }
        if (step == 8) {  // forget sequence 1's last 3 tokens (one pending, two cached), then go on
            const int64_t keep = int64_t(by_logits.tokens(a[1]).size()) - 3;
            by_logits.truncate(a[1], keep);
            on_device.truncate(b[1], keep);
            by_logits.append(a[1], 5);
            on_device.append(b[1], 5);
        }
    }
    EXPECT_GT(sampled_differently, 3);
}

// Blocks freed by one sequence are reused by the next without growing the pool, and the stale
// K/V left in them does not leak into the new sequence's results.
TEST(EngineCache, BlocksAreReusedAfterRelease) {
    const Model model = load_model("qwen3-tiny-f32");
    const std::vector<int32_t> a = ids_from(5, 60), b = ids_from(6, 45);
    Engine engine(model);
    all_logits(engine, a);  // 60 tokens: 4 blocks of 16, then released
    const int64_t pool = engine.cache().num_blocks();
    EXPECT_EQ(pool, 4);
    EXPECT_EQ(engine.cache().free_blocks(), pool);
    const std::vector<float> reused = all_logits(engine, b);
    EXPECT_EQ(engine.cache().num_blocks(), pool) << "the pool grew although freed blocks were available";
    expect_same_logits(reused, recompute(model, b), "sequence in reused blocks");
}

TEST(EngineCache, SessionReusesTheCachedPrefix) {
    const Model model = load_model("qwen2-tiny-f32");
    Engine engine(model);
    GenerateOptions o;
    o.sampling.do_sample = false;
    o.stop.max_new_tokens = 8;
    Session session(engine, nullptr);
    const std::vector<int32_t> p1 = ids_from(7, 30);
    const GenerateResult r1 = session.generate(p1, o);
    EXPECT_EQ(r1.stats.cached_tokens, 0);
    // The next turn: the first prompt, what was generated, and more.
    std::vector<int32_t> p2 = p1;
    p2.insert(p2.end(), r1.generated_ids.begin(), r1.generated_ids.end());
    const std::vector<int32_t> more = ids_from(8, 5);
    p2.insert(p2.end(), more.begin(), more.end());
    const GenerateResult r2 = session.generate(p2, o);
    // Everything but the last generated token (sampled, never fed back) was cached.
    EXPECT_EQ(r2.stats.cached_tokens, int64_t(p1.size() + r1.generated_ids.size() - 1));
    Engine fresh(model);
    EXPECT_EQ(generate(fresh, nullptr, p2, o).generated_ids, r2.generated_ids);
    // A prompt that diverges early truncates the cache and still gives the fresh result.
    std::vector<int32_t> p3 = p2;
    p3[3] = (p3[3] + 1) % 500;
    const GenerateResult r3 = session.generate(p3, o);
    EXPECT_EQ(r3.stats.cached_tokens, 3);
    Engine fresh3(model);
    EXPECT_EQ(generate(fresh3, nullptr, p3, o).generated_ids, r3.generated_ids);
}

TEST(KvCache, BookkeepingGrowthAndLimit) {
    KvCacheOptions o;
    o.block_size = 16;
    o.max_blocks = 6;
    KvCache cache(2, 2, 4, DType::F32, o);
    BlockList a, b;
    cache.reserve(a, 20);  // 2 blocks
    EXPECT_EQ(a.blocks, (std::vector<int32_t>{0, 1}));
    // Token 17 of a, layer 1, survives the pool's growth.
    std::vector<float> k(8, 3.5f), v(8, -1.25f);
    a.length = 20;
    const std::vector<int32_t> slot = cache.slots(a, 17, 1);
    cache.write(1, IndexView(slot), TensorView(k.data(), DType::F32, {1, 2, 4}), TensorView(v.data(), DType::F32, {1, 2, 4}));
    cache.reserve(b, 64);  // 4 more: the pool grows to 6
    EXPECT_EQ(cache.num_blocks(), 6);
    EXPECT_EQ(static_cast<const float*>(cache.k(1).at(a.blocks[1], 1))[5], 3.5f);
    EXPECT_EQ(static_cast<const float*>(cache.v(1).at(a.blocks[1], 1))[7], -1.25f);
    BlockList c;
    EXPECT_THROW(
        {
            try {
                cache.reserve(c, 1);
            } catch (const Error& e) {
                EXPECT_NE(std::string(e.what()).find("KV cache full"), std::string::npos) << e.what();
                throw;
            }
        },
        Error);
    cache.truncate(b, 17);  // keeps 2 blocks, frees 2
    EXPECT_EQ(cache.free_blocks(), 2);
    cache.release(a);
    EXPECT_EQ(cache.free_blocks(), 4);
    cache.reserve(c, 1);
    EXPECT_EQ(c.blocks, (std::vector<int32_t>{0}));  // the most recently freed block: a's first
}

// A pool that starts with initial_blocks holds them before any reservation and still grows past them.
TEST(KvCache, InitialBlocksThenGrowth) {
    KvCacheOptions o;
    o.block_size = 16;
    o.initial_blocks = 3;
    KvCache cache(2, 2, 4, DType::F32, o);
    EXPECT_EQ(cache.num_blocks(), 3);
    BlockList a;
    cache.reserve(a, 48);  // 3 blocks: no growth
    EXPECT_EQ(cache.num_blocks(), 3);
    cache.reserve(a, 49);  // a fourth: the pool doubles
    EXPECT_EQ(cache.num_blocks(), 6);
    o.initial_blocks = -1;
    EXPECT_THROW(KvCache(2, 2, 4, DType::F32, o), Error);
}

void expect_error(const std::function<void()>& f, const std::string& needle) {
    try {
        f();
        ADD_FAILURE() << "no error; expected one containing '" << needle << "'";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
}

TEST(EngineErrors, BadRequestsAreClear) {
    const Model model = load_model("qwen2-tiny-f32");
    Engine engine(model);
    expect_error([&] { engine.add_sequence(std::vector<int32_t>{}); }, "prompt is empty");
    expect_error(
        [&] {
            engine.add_sequence(std::vector<int32_t>{1, 512});
        },
        "token id 512 (at index 1) is outside the vocabulary [0, 512)");
    expect_error([&] { engine.add_sequence(std::vector<int32_t>{-3}); }, "token id -3");
    expect_error([&] { engine.add_sequence(ids_from(1, 257)); },
                 "the sequence would be 257 tokens, longer than the model's context (max_position_embeddings = 256");
    const SeqId s = engine.add_sequence(ids_from(1, 250));
    engine.step();
    expect_error([&] { engine.append(s, ids_from(2, 7)); }, "longer than the model's context");
    engine.release(s);
    expect_error([&] { engine.release(s); }, "no sequence");
    EngineOptions small;
    small.max_cache_tokens = 32;
    Engine tight(model, small);
    EXPECT_EQ(tight.cache().num_blocks(), 2) << "a sized pool is allocated up front";
    EXPECT_EQ(tight.cache().capacity_tokens(), 32);
    tight.add_sequence(ids_from(1, 40));
    expect_error([&] { tight.step(); }, "KV cache full");
    // generate checks the whole request against the pool before any work.
    Engine sized(model, small);
    GenerateOptions g;
    g.stop.max_new_tokens = 30;
    expect_error([&] { generate(sized, nullptr, ids_from(1, 5), g); },
                 "the request needs up to 35 tokens of KV cache (5 prompt + 30 new), the cache holds 32");
}

// Issue 11: a pool no machine could hold is refused when the engine is made, with the figures; sizes
// near INT64_MAX are errors, not overflows.
TEST(EngineErrors, PoolsThatCannotFitAreRefusedWithTheFigures) {
    const Model model = load_model("qwen2-tiny-f32");
    EngineOptions huge;
    huge.max_cache_tokens = int64_t(1) << 40;
    expect_error([&] { Engine e(model, huge); },
                 "a KV cache of 1099511627776 tokens (68719476736 blocks of 16, 512 "
                 "bytes per token) needs 524288.00 GiB");
    huge.max_cache_tokens = std::numeric_limits<int64_t>::max();
    expect_error([&] { Engine e(model, huge); }, "Engine: max_cache_tokens: 9223372036854775807 + 15 overflows int64");
    EngineOptions small;
    small.max_cache_tokens = 64;
    Engine sized(model, small);
    GenerateOptions g;
    g.stop.max_new_tokens = std::numeric_limits<int64_t>::max();  // clamped to the context, never summed raw
    expect_error([&] { generate(sized, nullptr, ids_from(1, 5), g); }, "the request needs up to 256 tokens");
    EXPECT_EQ(max_prompt_tokens(sized, g), 0);
    g.stop.max_new_tokens = 8;
    EXPECT_EQ(max_prompt_tokens(sized, g), 56) << "the pool less the reply";
    EXPECT_EQ(max_prompt_tokens(Engine(model), g), 256) << "a growing pool: the context";
}

}  // namespace
}  // namespace flashport::engine::test
