// sample and mark_seen (flashport/sample.h) on GPU views against the CPU op, on sample_case.h's
// cases: vocab 1 to 151936 (both the shared-memory path, <= 1024 candidates, and the segment path),
// rows 1, 3 and 64 (64 > the settings' count, so blocks loop over rows), fp32/bf16/fp16, every setting
// with fresh seeds and counters, ids poisoned before each run. A GPU token must equal the CPU's
// unless classify_sample() finds u or a filter boundary within SAMPLE_NEAR_TOL (1e-5 of the mass) in
// float64; such near-boundary rows are counted and must stay under 1% of the rows. Also: the
// frequencies of many counters against the kept distribution (chi-square), bad rows and bad
// settings (SAMPLE_BAD_ROW / SAMPLE_BAD_PARAMS), mark_seen against the CPU's bits, a graph of
// mark_seen + sample replayed with new settings in device memory, and (informational) the time of one
// call on Qwen's 152064-token vocabulary.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <limits>
#include <vector>

#include "flashport/device.h"
#include "flashport/memory.h"
#include "flashport/sample.h"
#include "gpu_ops_util.h"
#include "gpu_test_util.h"
#include "ops/sample_case.h"

namespace flashport::test {
namespace {

template <typename T>
Buffer to_gpu(const std::vector<T>& v) {
    Buffer b(std::max<size_t>(1, v.size() * sizeof(T)), Device::gpu());
    copy_bytes(b.data(), Device::gpu(), v.data(), Device::cpu(), v.size() * sizeof(T));
    return b;
}

// The op on a GPU copy of d; ids poisoned first.
std::vector<int32_t> sample_on_gpu(const SampleData& d) {
    const int64_t rows = d.rows();
    GpuTensor x(*d.x);
    Buffer params = to_gpu(d.params), seen = to_gpu(d.seen), ids = to_gpu(std::vector<int32_t>(size_t(rows), -7));
    Buffer ws(std::max<size_t>(1, sample_workspace_bytes(x.view)), Device::gpu());
    const SeenSets sets{static_cast<uint32_t*>(seen.data()), rows, d.words, Device::gpu()};
    sample(static_cast<int32_t*>(ids.data()), x.view, static_cast<const SampleParams*>(params.data()), sets, ws.data(),
           ws.size());
    std::vector<int32_t> out(static_cast<size_t>(rows));
    synchronize(Device::gpu());
    copy_bytes(out.data(), Device::cpu(), ids.data(), Device::gpu(), out.size() * sizeof(int32_t));
    return out;
}

TEST(SampleGpu, MatchesCpu) {
    FP_SKIP_WITHOUT_GPU();
    Rng rng(777);
    int64_t checked = 0, near = 0, sampled = 0;
    for (DType dt : {DType::F32, DType::BF16, DType::F16})
        for (int64_t vocab : {1, 7, 97, 1023, 1025, 151936})
            for (int64_t rows : {1, 3, 64}) {
                if (vocab == 151936 && rows == 64 && on_hip_cpu())
                    continue;  // minutes under emulation; 1 and 3 rows run
                const auto settings = sample_settings(vocab);
                // Rows rotate through (setting, shape) pairs: all 51 of them in 51 rows, twice where short.
                const size_t all = (3 * settings.size() + size_t(rows) - 1) / size_t(rows);
                const size_t rounds = vocab == 151936 ? all : 2 * all;
                for (size_t round = 0; round < rounds; ++round) {
                    SampleData d = make_sample_data(rng, dt, rows, vocab, round * size_t(rows), settings);
                    std::vector<int32_t> want(size_t(rows), -7);
                    sample(want.data(), d.x->view, d.params.data(), d.seen_sets(), nullptr, 0);
                    const std::vector<int32_t> got = sample_on_gpu(d);
                    for (int64_t r = 0; r < rows; ++r, ++checked) {
                        sampled += d.params[size_t(r)].temperature != 0.0f;
                        const SampleMatch m = classify_sample(d, r, got[size_t(r)], want[size_t(r)]);
                        near += m == SampleMatch::NEAR;
                        EXPECT_NE(m, SampleMatch::WRONG)
                            << dtype_name(dt) << " vocab " << vocab << " rows " << rows << " row " << r << " "
                            << d.setting[size_t(r)] << ": gpu " << got[size_t(r)] << ", cpu " << want[size_t(r)];
                    }
                }
            }
    std::printf("sample: %lld rows (%lld sampled, the rest greedy) checked, %lld near-boundary differences\n",
                (long long)checked, (long long)sampled, (long long)near);
    EXPECT_LE(near * 100, sampled);
}

// The multi-block path of small batches (src/backends/gpu/sample_chunks.cuh: rows <= 32 cut into
// chunks of >= 512 ids, candidates per chunk for 0 < top_k <= 64) at its boundaries: batch 1 and 8,
// vocab below one chunk (300), not a multiple of the chunk (5001: chunks of 501, the last 492) and
// Qwen's; rows mixing greedy, top-k (1, 20, 64 = the chunks' limit, 65 past it) and top_k 0; logits
// whose top scores sit at chunk edges (ids c · 501 - 1 and c · 501), tie at the k-th score across
// chunks (few distinct values), or are all equal over a chunk (its candidates overflow: the row falls
// back to the full path). Each row must give the CPU's token (or a near-boundary one, as MatchesCpu).
TEST(SampleGpu, MultiBlockBoundaries) {
    FP_SKIP_WITHOUT_GPU();
    Rng rng(4242);
    const float inf = std::numeric_limits<float>::infinity();
    struct Kind {
        const char* name;
        float t;
        int32_t k;
        float top_p;
    };
    const std::vector<Kind> kinds = {{"greedy", 0, 0, 1},       {"top_k1", 1, 1, 1},      {"qwen", 0.7f, 20, 0.8f},
                                     {"top_k64", 1, 64, 0.95f}, {"top_k65", 1, 65, 0.9f}, {"top_k0_p0.95", 1, 0, 0.95f},
                                     {"top_k20", 1, 20, 1}};
    int64_t checked = 0, near = 0;
    for (int64_t vocab : {int64_t(300), int64_t(5001), int64_t(152064)})
        for (int64_t rows : {1, 8})
            for (int shape = 0; shape < 4; ++shape)
                for (size_t round = 0; round < (rows == 1 ? kinds.size() : 1); ++round) {
                    if (vocab == 152064 && (shape > 1 || round > 2)) continue;  // emulation time
                    SampleData d(DType::BF16, rows, vocab);
                    d.words = (vocab + 31) / 32;
                    d.seen.assign(size_t(rows * d.words), 0);
                    d.context.resize(size_t(rows));
                    for (int64_t r = 0; r < rows; ++r) {
                        for (int64_t i = 0; i < vocab; ++i) {
                            double v = shape == 0   ? 2.0 * rng.normal()                     // spread
                                       : shape == 1 ? std::round(2 * rng.normal()) / 2       // ties at the k-th
                                       : shape == 2 ? (i < 1200 ? 1.0 : 0.5 * rng.normal())  // equal chunks
                                                    : -2.0 + 0.1 * rng.normal();             // edges below
                            if (shape != 2 && rng.uniform() < 0.02) v = -inf;
                            d.x->set(r * vocab + i, v);
                        }
                        if (shape == 3)  // the top scores at the chunks' edges (chunk 501 for vocab 5001)
                            for (int64_t c = 1; c * 501 < vocab; ++c) {
                                d.x->set(r * vocab + c * 501 - 1, 3.0 + 0.01 * double(c));
                                d.x->set(r * vocab + c * 501, 3.0 + 0.01 * double(c));
                            }
                        const Kind& k = kinds[(size_t(r) + round) % kinds.size()];
                        SampleParams p;
                        p.temperature = k.t;
                        p.top_k = k.k;
                        p.top_p = k.top_p;
                        p.seed = rng.next();
                        p.counter = int64_t(rng.below(1 << 20));
                        if (r % 2 == 1) {  // a penalty on every other row
                            p.repetition_penalty = 1.05f;
                            p.seen_row = int32_t(r);
                            for (int64_t i = 0; i < vocab; i += 7) {
                                d.seen[size_t(r * d.words + i / 32)] |= uint32_t(1) << (i % 32);
                                d.context[size_t(r)].push_back(int32_t(i));
                            }
                        }
                        d.params.push_back(p);
                        d.setting.push_back(k.name);
                    }
                    std::vector<int32_t> want(size_t(rows), -7);
                    sample(want.data(), d.x->view, d.params.data(), d.seen_sets(), nullptr, 0);
                    const std::vector<int32_t> got = sample_on_gpu(d);
                    for (int64_t r = 0; r < rows; ++r, ++checked) {
                        const SampleMatch m = classify_sample(d, r, got[size_t(r)], want[size_t(r)]);
                        near += m == SampleMatch::NEAR;
                        EXPECT_NE(m, SampleMatch::WRONG)
                            << "vocab " << vocab << " rows " << rows << " shape " << shape << " row " << r << " "
                            << d.setting[size_t(r)] << ": gpu " << got[size_t(r)] << ", cpu " << want[size_t(r)];
                    }
                }
    std::printf("sample multi-block: %lld rows checked, %lld near-boundary differences\n", (long long)checked,
                (long long)near);
    EXPECT_LE(near * 50, checked);
}

TEST(SampleGpu, Distribution) {
    FP_SKIP_WITHOUT_GPU();
    // As the CPU test: 8 tokens, top-k 6, top-p 0.9, min-p 0.05 at temperature 0.8, 4000 counters (bf16 logits).
    const std::vector<float> logits = {1.0f, 2.5f, 0.3f, 2.0f, -1.0f, 1.7f, 0.9f, 2.2f};
    constexpr int N = 4000;
    SampleData d(DType::BF16, N, 8);
    d.words = 1;
    d.seen.assign(N, 0);
    SampleParams p;
    p.temperature = 0.8f;
    p.top_k = 6;
    p.top_p = 0.9f;
    p.min_p = 0.05f;
    p.seed = 5;
    for (int i = 0; i < N; ++i) {
        for (int j = 0; j < 8; ++j) d.x->set(int64_t(i) * 8 + j, logits[size_t(j)]);
        p.counter = 1000 + i;
        d.params.push_back(p);
    }
    const std::vector<int32_t> ids = sample_on_gpu(d);
    std::vector<float> kept = d.row(0);
    std::vector<int32_t> c;
    for (float& s : kept) s /= p.temperature;
    cpu::filter_candidates(kept, {1.0f, p.top_k, p.top_p, p.min_p}, c);
    std::vector<float> masked(8, -std::numeric_limits<float>::infinity());
    for (int32_t id : c) masked[size_t(id)] = kept[size_t(id)];
    expect_frequencies(ids, masked, N);
}

TEST(SampleGpu, BadRowsAndSettings) {
    FP_SKIP_WITHOUT_GPU();
    const float inf = std::numeric_limits<float>::infinity();
    SampleData d(DType::F32, 6, 4);
    const std::vector<float> x = {
        1, 2, std::nanf(""), 4, 1, inf, 3, 4, -inf, -inf, -inf, -inf, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3};
    for (size_t i = 0; i < x.size(); ++i) d.x->set(int64_t(i), x[i]);
    d.words = 1;
    d.seen.assign(6, 0);
    d.params.resize(6);
    d.params[1].temperature = 0.0f;
    d.params[3].top_p = 2.0f;        // out of range: the device says so through the id
    d.params[4].seen_row = 6;        // past the seen sets' rows
    d.params[5].temperature = 0.0f;  // greedy: the first maximum
    const std::vector<int32_t> ids = sample_on_gpu(d);
    EXPECT_EQ(ids, (std::vector<int32_t>{SAMPLE_BAD_ROW, SAMPLE_BAD_ROW, SAMPLE_BAD_ROW, SAMPLE_BAD_PARAMS,
                                         SAMPLE_BAD_PARAMS, 3}));
}

TEST(SampleGpu, MarkSeen) {
    FP_SKIP_WITHOUT_GPU();
    const int64_t rows = 3, words = 5;
    const std::vector<int32_t> ids = {0, 33, 159, 5, 5, 64, 160, -1, 7};
    const std::vector<int32_t> slots = {0, 0, 2, -1, 1, 1, 1, 2, 3};  // 160, -1 and slot 3 are skipped
    Buffer seen = to_gpu(std::vector<uint32_t>(rows * words, 0)), gi = to_gpu(ids), gs = to_gpu(slots);
    mark_seen({static_cast<uint32_t*>(seen.data()), rows, words, Device::gpu()},
              IndexView(static_cast<const int32_t*>(gi.data()), int64_t(ids.size()), Device::gpu()),
              static_cast<const int32_t*>(gs.data()));
    std::vector<uint32_t> got(rows * words);
    synchronize(Device::gpu());
    copy_bytes(got.data(), Device::cpu(), seen.data(), Device::gpu(), got.size() * sizeof(uint32_t));
    EXPECT_EQ(got, (std::vector<uint32_t>{1, 2, 0, 0, 0, 32, 0, 1, 0, 0, 0, 0, 0, 0, 0x80000000u}));
}

// One step as the engine would record it: mark the step's tokens seen, then sample. The graph is
// replayed after the settings (counters, temperature) change in device memory, and must give what
// direct calls give with those settings.
TEST(SampleGpu, CapturesInAGraph) {
    FP_SKIP_WITHOUT_GPU();
    FP_SKIP_WITHOUT_GRAPHS();
    Rng rng(31);
    const int64_t rows = 4, vocab = 152064;
    SampleData d = make_sample_data(rng, DType::BF16, rows, vocab, 13, sample_settings(vocab));  // qwen, ...
    GpuTensor x(*d.x);
    Buffer params = to_gpu(d.params), seen = to_gpu(std::vector<uint32_t>(d.seen.size(), 0));
    Buffer ids = to_gpu(std::vector<int32_t>(rows, -7)), step_ids = to_gpu(std::vector<int32_t>{5, 77, 151000, 3});
    Buffer slots = to_gpu(std::vector<int32_t>{0, 1, 2, 3});
    Buffer ws(std::max<size_t>(1, sample_workspace_bytes(x.view)), Device::gpu());
    const SeenSets sets{static_cast<uint32_t*>(seen.data()), rows, d.words, Device::gpu()};
    auto step = [&](void* stream) {
        mark_seen(sets, IndexView(static_cast<const int32_t*>(step_ids.data()), rows, Device::gpu()),
                  static_cast<const int32_t*>(slots.data()), stream);
        sample(static_cast<int32_t*>(ids.data()), x.view, static_cast<const SampleParams*>(params.data()), sets,
               ws.data(), ws.size(), stream);
    };
    auto download = [&] {
        std::vector<int32_t> out(static_cast<size_t>(rows));
        synchronize(Device::gpu());
        copy_bytes(out.data(), Device::cpu(), ids.data(), Device::gpu(), out.size() * sizeof(int32_t));
        return out;
    };
    GpuStream stream(Device::gpu());
    const GpuGraph graph = GpuGraph::capture(stream, [&] { step(stream.get()); });
    for (int replay = 0; replay < 3; ++replay) {
        for (SampleParams& p : d.params) {
            p.counter += 1;
            p.temperature = replay == 2 ? 0.0f : p.temperature;
        }
        copy_bytes(params.data(), Device::gpu(), d.params.data(), Device::cpu(),
                   d.params.size() * sizeof(SampleParams));
        graph.replay(stream);
        stream.synchronize();
        const std::vector<int32_t> graphed = download();
        step(nullptr);
        EXPECT_EQ(graphed, download()) << "replay " << replay;
    }
}

// Microseconds per call (host clock over 200 back-to-back calls) at batch 1, 8 and 64 on Qwen's
// vocabulary (bf16 logits of std 2): greedy, Qwen's defaults (temperature 0.7, top_k 20, top_p 0.8,
// penalty 1.05) and top_k 0 with top_p 0.95, on the same logits and on near-uniform ones (~all tokens
// candidates). Batches 1 and 8 take the multi-block path (sample_chunks.cuh), 64 one block per row.
// Informational: prints, asserts nothing.
TEST(SampleGpuPerf, ReportsTimes) {
    FP_SKIP_WITHOUT_GPU();
    FP_SKIP_ON_HIP_CPU("timings of the CPU emulation say nothing about a GPU");
    const int64_t vocab = 152064;
    struct Setting {
        const char* name;
        SampleParams p;
        double std;
    };
    SampleParams greedy, qwen, flat;
    greedy.temperature = 0.0f;
    qwen.temperature = 0.7f;
    qwen.top_k = 20;
    qwen.top_p = 0.8f;
    qwen.repetition_penalty = 1.05f;
    flat.top_p = 0.95f;
    for (const Setting& s : {Setting{"greedy", greedy, 2.0}, Setting{"qwen", qwen, 2.0}, Setting{"p0.95", flat, 2.0},
                             Setting{"flat_p0.95", flat, 0.01}})
        for (int64_t rows : {1, 8, 64}) {
            Rng rng(7);
            HostTensor h(DType::BF16, {rows, vocab});
            h.fill_normal(rng, s.std);
            std::vector<SampleParams> ps(static_cast<size_t>(rows), s.p);
            for (int64_t r = 0; r < rows; ++r)
                ps[size_t(r)].seen_row = s.p.repetition_penalty != 1.0f ? int32_t(r) : -1;
            const int64_t words = (vocab + 31) / 32;
            std::vector<uint32_t> bits(static_cast<size_t>(rows * words));
            for (uint32_t& w : bits) w = uint32_t(rng.next()) & uint32_t(rng.next()) & uint32_t(rng.next());
            GpuTensor x(h);
            Buffer params = to_gpu(ps), seen = to_gpu(bits), ids = to_gpu(std::vector<int32_t>(size_t(rows)));
            Buffer ws(std::max<size_t>(1, sample_workspace_bytes(x.view)), Device::gpu());
            const SeenSets sets{static_cast<uint32_t*>(seen.data()), rows, words, Device::gpu()};
            auto call = [&] {
                sample(static_cast<int32_t*>(ids.data()), x.view, static_cast<const SampleParams*>(params.data()), sets,
                       ws.data(), ws.size());
            };
            for (int i = 0; i < 10; ++i) call();
            synchronize(Device::gpu());
            constexpr int N = 200;
            const auto start = std::chrono::steady_clock::now();
            for (int i = 0; i < N; ++i) call();
            synchronize(Device::gpu());
            const double us =
                std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / N;
            std::printf("sample %-10s batch %2lld vocab %lld bf16: %8.1f us per call\n", s.name, (long long)rows,
                        (long long)vocab, us);
        }
}

}  // namespace
}  // namespace flashport::test
