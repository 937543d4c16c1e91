// The sampler and the stop conditions.
//
// Distribution tests draw N tokens with a fixed seed and compare the counts with the exact filtered
// distribution by Pearson's chi-square. With a fixed seed the test is deterministic; the threshold is
// the 99.9% quantile of chi-square with (kept - 1) degrees of freedom (Wilson-Hilferty), so a correct
// sampler passes for all but 1 seed in 1000 and a wrong set or wrong weights fail by a wide margin.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>
#include <vector>

#include "engine/sampler.h"
#include "flashport/error.h"

namespace flashport::engine {
namespace {

constexpr float NEG_INF = -std::numeric_limits<float>::infinity();

std::vector<float> test_logits(int n, uint64_t seed) {
    Rng rng(seed);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = float(4.0 * rng.uniform() - 2.0);  // a spread where no single token dominates
    return v;
}

// Chi-square quantile at p = 0.999 (z = 3.0902) by Wilson-Hilferty.
double chi2_999(int df) {
    const double z = 3.0902, a = 2.0 / (9.0 * df);
    return df * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

// Softmax of the expected (already filtered, -inf = excluded) scores.
std::vector<double> softmax(const std::vector<float>& s) {
    const float m = *std::max_element(s.begin(), s.end());
    std::vector<double> p(s.size());
    double z = 0.0;
    for (size_t i = 0; i < s.size(); ++i) z += p[i] = s[i] == NEG_INF ? 0.0 : std::exp(double(s[i]) - m);
    for (double& x : p) x /= z;
    return p;
}

// Draws n tokens and checks they come from `expected` (probabilities; 0 = must never appear).
void expect_distribution(Sampler& sampler, const std::vector<float>& logits, const std::vector<double>& expected,
                         int n = 40000) {
    std::vector<int> counts(logits.size(), 0);
    for (int i = 0; i < n; ++i) ++counts[size_t(sampler.sample(logits, {}))];
    double chi2 = 0.0;
    int kept = 0;
    for (size_t i = 0; i < logits.size(); ++i) {
        if (expected[i] == 0.0) {
            EXPECT_EQ(counts[i], 0) << "token " << i << " was filtered out but sampled";
            continue;
        }
        ++kept;
        const double e = expected[i] * n;
        chi2 += (counts[i] - e) * (counts[i] - e) / e;
    }
    if (kept > 1) {
        EXPECT_LT(chi2, chi2_999(kept - 1)) << "kept " << kept << " tokens";
    }
}

// The filters written out the way transformers' warpers are, on a plain vector.
std::vector<float> reference_filter(std::vector<float> s, const SamplingParams& p) {
    for (float& x : s) x /= p.temperature;
    if (p.top_k > 0 && size_t(p.top_k) < s.size()) {
        std::vector<float> sorted = s;
        std::sort(sorted.begin(), sorted.end(), std::greater<>());
        const float kth = sorted[size_t(p.top_k - 1)];
        for (float& x : s) if (x < kth) x = NEG_INF;
    }
    if (p.top_p < 1.0f) {  // ascending sort, cumulative softmax, remove cum <= 1 - top_p, keep the last
        std::vector<size_t> idx(s.size());
        std::iota(idx.begin(), idx.end(), 0);
        // Ties: the higher id first in ascending order, i.e. removed first (the sampler's documented
        // tie order; torch.sort's is unspecified).
        std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return s[a] < s[b] || (s[a] == s[b] && a > b); });
        const std::vector<double> prob = softmax(s);
        double cum = 0.0;
        std::vector<bool> remove(s.size(), false);
        for (size_t j = 0; j < idx.size(); ++j) {
            cum += prob[idx[j]];
            remove[idx[j]] = j + 1 < idx.size() && cum <= 1.0 - p.top_p;
        }
        for (size_t i = 0; i < s.size(); ++i) if (remove[i]) s[i] = NEG_INF;
    }
    if (p.min_p > 0.0f) {
        const std::vector<double> prob = softmax(s);
        const double top = *std::max_element(prob.begin(), prob.end());
        for (size_t i = 0; i < s.size(); ++i) if (prob[i] < p.min_p * top) s[i] = NEG_INF;
    }
    return s;
}

TEST(Sampler, GreedyIsFirstArgmax) {
    SamplingParams p;
    p.do_sample = false;
    Sampler s(p);
    for (uint64_t seed = 1; seed <= 20; ++seed) {
        const std::vector<float> l = test_logits(1001, seed);
        EXPECT_EQ(s.sample(l, {}), int32_t(std::max_element(l.begin(), l.end()) - l.begin()));
    }
    EXPECT_EQ(s.sample(std::vector<float>{1.0f, 3.0f, 3.0f, 2.0f}, {}), 1);  // ties: the first, as torch.argmax
    p.do_sample = true;
    p.temperature = 0.0f;  // temperature 0 is greedy too
    EXPECT_EQ(Sampler(p).sample(std::vector<float>{0.5f, -1.0f, 7.0f}, {}), 2);
}

TEST(Sampler, SeededDrawsReproduce) {
    SamplingParams p;
    p.seed = 1234;
    p.top_k = 50;
    p.temperature = 0.8f;
    const std::vector<float> l = test_logits(5000, 7);
    Sampler a(p), b(p);
    std::vector<int32_t> ta, tb;
    for (int i = 0; i < 200; ++i) ta.push_back(a.sample(l, {})), tb.push_back(b.sample(l, {}));
    EXPECT_EQ(ta, tb);
    p.seed = 1235;
    Sampler c(p);
    std::vector<int32_t> tc;
    for (int i = 0; i < 200; ++i) tc.push_back(c.sample(l, {}));
    EXPECT_NE(ta, tc);
    // The generator's stream is part of the contract (identical on every machine): pin its start.
    Rng rng(0);
    EXPECT_EQ(rng.next(), 0x99ec5f36cb75f2b4ull);
}

TEST(Sampler, TemperatureMatchesSoftmax) {
    const std::vector<float> l = test_logits(30, 3);
    for (float t : {0.5f, 1.0f, 1.7f}) {
        SamplingParams p;
        p.temperature = t;
        p.seed = 99;
        Sampler s(p);
        SCOPED_TRACE(t);
        expect_distribution(s, l, softmax(reference_filter(l, p)));
    }
}

TEST(Sampler, FiltersKeepExactlyTheReferenceSet) {
    struct F { int64_t k; float top_p, min_p, temp; };
    for (const F& f : {F{5, 1.0f, 0.0f, 1.0f}, F{0, 0.6f, 0.0f, 1.0f}, F{0, 1.0f, 0.3f, 1.0f}, F{12, 0.8f, 0.0f, 0.7f},
                       F{20, 0.8f, 0.05f, 0.7f}, F{0, 0.0f, 0.0f, 1.0f}, F{40, 1.0f, 0.0f, 1.0f}}) {
        SCOPED_TRACE(::testing::Message() << "k " << f.k << " top_p " << f.top_p << " min_p " << f.min_p);
        SamplingParams p;
        p.top_k = f.k;
        p.top_p = f.top_p;
        p.min_p = f.min_p;
        p.temperature = f.temp;
        p.seed = 5;
        const std::vector<float> l = test_logits(40, 11);
        const std::vector<float> ref = reference_filter(l, p);
        // process() gives transformers' processed scores: the same survivors with the same values.
        Sampler s(p);
        std::vector<float> got = l;
        s.process(got, {});
        for (size_t i = 0; i < l.size(); ++i) EXPECT_EQ(got[i], ref[i]) << "token " << i;
        expect_distribution(s, l, softmax(ref));
    }
}

TEST(Sampler, TopKKeepsTiesAndTopPLargeVocabulary) {
    SamplingParams p;
    p.top_k = 2;
    Sampler s(p);
    std::vector<float> l = {1.0f, 5.0f, 3.0f, 3.0f, 0.0f};
    s.process(l, {});
    EXPECT_EQ(l, (std::vector<float>{NEG_INF, 5.0f, 3.0f, 3.0f, NEG_INF}));  // scores < 3 removed only
    // top-p over a 151,936-token vocabulary (the growing sorted prefix path) against the reference.
    SamplingParams q;
    q.top_p = 0.9f;
    std::vector<float> big = test_logits(151936, 21);
    for (size_t i = 0; i < big.size(); ++i) big[i] *= 3.0f;
    const std::vector<float> ref = reference_filter(big, q);
    Sampler sq(q);
    std::vector<float> got = big;
    sq.process(got, {});
    EXPECT_EQ(got, ref);
}

TEST(Sampler, RepetitionPenaltyMath) {
    SamplingParams p;
    p.repetition_penalty = 1.25f;
    p.do_sample = false;
    Sampler s(p);
    std::vector<float> l = {2.0f, -2.0f, 0.0f, 1.0f, -0.5f};
    const std::vector<int32_t> context = {0, 1, 2, 1, 1, 0};  // repeats are penalised once
    s.process(l, context);
    EXPECT_EQ(l, (std::vector<float>{2.0f / 1.25f, -2.0f * 1.25f, 0.0f, 1.0f, -0.5f}));
    // Greedy applies it too: with 2.5, token 0 drops from 2.0 to 0.8, below token 3's 1.0.
    p.repetition_penalty = 2.5f;
    EXPECT_EQ(Sampler(p).sample(std::vector<float>{2.0f, -2.0f, 0.0f, 1.0f}, context), 3);
    EXPECT_THAT([&] { s.sample(std::vector<float>{1.0f, 2.0f}, std::vector<int32_t>{0, 7}); },
                ::testing::ThrowsMessage<Error>(::testing::HasSubstr("token id 7 at context position 1")));
}

TEST(Sampler, BadParametersAndLogits) {
    auto msg = [](SamplingParams p) {
        try {
            Sampler s(p);
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("(no error)");
    };
    SamplingParams p;
    p.temperature = -1.0f;
    EXPECT_THAT(msg(p), ::testing::HasSubstr("temperature must be finite and >= 0"));
    p = {};
    p.top_p = 1.5f;
    EXPECT_THAT(msg(p), ::testing::HasSubstr("top_p must be in [0, 1]"));
    p = {};
    p.min_p = -0.1f;
    EXPECT_THAT(msg(p), ::testing::HasSubstr("min_p must be in [0, 1]"));
    p = {};
    p.top_k = -3;
    EXPECT_THAT(msg(p), ::testing::HasSubstr("top_k must be >= 0"));
    p = {};
    p.repetition_penalty = 0.0f;
    EXPECT_THAT(msg(p), ::testing::HasSubstr("repetition_penalty must be finite and > 0"));
    Sampler s{SamplingParams{}};
    EXPECT_THAT([&] { s.sample(std::vector<float>{1.0f, NAN}, {}); },
                ::testing::ThrowsMessage<Error>(::testing::HasSubstr("the logit of token 1 is nan")));
    EXPECT_THAT([&] { s.sample(std::vector<float>{NEG_INF, NEG_INF}, {}); },
                ::testing::ThrowsMessage<Error>(::testing::HasSubstr("every logit is -inf")));
}

// ---------------------------------------------------------------------------------------------- stopping

// Feeds pieces one by one and returns everything emitted (plus the flush) and whether it stopped.
std::pair<std::string, bool> feed(StopMatcher& m, const std::vector<std::string>& pieces) {
    std::string out;
    for (const std::string& piece : pieces) {
        StopMatcher::Step s = m.push(piece);
        out += s.text;
        if (s.stopped) return {out, true};
    }
    return {out + m.flush(), false};
}

TEST(StopMatcher, StopStringsAcrossTokenBoundaries) {
    StopMatcher m({"</answer>", "\n\nUser:"});
    EXPECT_EQ(feed(m, {"The result", " is 4.", "</ans", "wer> trailing"}), std::make_pair(std::string("The result is 4."), true));
    StopMatcher m2({"\n\nUser:"});
    // A partial match that fails is released; nothing is lost or reordered.
    EXPECT_EQ(feed(m2, {"a\n", "\nUs", "e", "d it"}), std::make_pair(std::string("a\n\nUsed it"), false));
    StopMatcher m3({"STOP"});
    EXPECT_EQ(feed(m3, {"xS", "TO"}).first, "xSTO");  // generation ended without the stop: the tail is released
    StopMatcher m4({"ab", "b"});
    EXPECT_EQ(feed(m4, {"xa", "b"}), std::make_pair(std::string("x"), true));  // the earliest occurrence wins
}

TEST(StopMatcher, HoldsBackOnlyPossibleStarts) {
    StopMatcher m({"<|im_end|>", "###"});
    StopMatcher::Step s = m.push("hello <|im");
    EXPECT_EQ(s.text, "hello ");
    EXPECT_EQ(m.held(), 4u);
    s = m.push("_e");
    EXPECT_EQ(s.text, "");
    EXPECT_EQ(m.held(), 6u);
    EXPECT_EQ(m.hold_back("text ##"), 2u);
    EXPECT_EQ(m.hold_back("text #"), 1u);
    EXPECT_EQ(m.hold_back("text"), 0u);
    // Multi-byte text: the held tail is a prefix of a stop string, so it starts on a character boundary.
    StopMatcher u({"。\n"});
    s = u.push("你好。");
    EXPECT_EQ(s.text, "你好");
    EXPECT_EQ(u.flush(), "。");
}

TEST(Stopper, EosStopStringsMaxTokensAndIgnoreEos) {
    Stopper a({{151645, 151643}, {"\nEND"}, false, 0});
    EXPECT_EQ(a.on_token(1, "Hi\n").text, "Hi");
    Stopper::Step s = a.on_token(151645, "<|im_end|>");
    EXPECT_EQ(s.reason, StopReason::EOS);
    EXPECT_EQ(s.text, "\n");  // held back for "\nEND", released at EOS; the EOS text itself is not emitted
    EXPECT_EQ(a.on_token(2, "more").reason, StopReason::EOS);  // stays stopped

    Stopper b({{2}, {}, true, 3});  // ignore_eos: EOS is ordinary text, the limit ends it
    EXPECT_EQ(b.on_token(2, "a").reason, StopReason::NONE);
    EXPECT_EQ(b.on_token(2, "b").reason, StopReason::NONE);
    s = b.on_token(5, "c");
    EXPECT_EQ(s.reason, StopReason::MAX_TOKENS);
    EXPECT_EQ(b.generated(), 3);

    Stopper c({{}, {"ba"}, false, 0});
    EXPECT_EQ(c.on_token(1, "ab").text, "a");
    s = c.on_token(1, "a!");
    EXPECT_EQ(s.reason, StopReason::STOP_STRING);
    EXPECT_EQ(s.text, "");
    EXPECT_STREQ(stop_reason_name(s.reason), "stop_string");
}

}  // namespace
}  // namespace flashport::engine
