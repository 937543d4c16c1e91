// Teacher-forced scoring against transformers: the perplexity of the reference prompt equals
// exp(mean NLL) computed here, independently, from the reference logits; the per-position top-1 ids
// equal the reference's argmax; windows are scored independently.
#include "engine/perplexity.h"
#include "model_test_util.h"

namespace flashport::engine::test {
namespace {

// −log softmax(row)[target] in float64, written out here rather than calling score_token.
double nll(std::span<const float> row, int32_t target) {
    double m = -1e300;
    for (float x : row) m = std::max(m, double(x));
    double sum = 0;
    for (float x : row) sum += std::exp(double(x) - m);
    return m + std::log(sum) - double(row[size_t(target)]);
}

class Perplexity : public ::testing::TestWithParam<const char*> {};

TEST_P(Perplexity, MatchesTheReferenceLogits) {
    const References refs = load_references(GetParam());
    const Reference& ref = refs.get("f32");
    const Model model = load_model(GetParam(), DType::F32);
    Engine engine(model);
    const PerplexityResult r = perplexity(engine, refs.prompt);

    const size_t n = refs.prompt.size();
    ASSERT_EQ(r.scored, int64_t(n - 1));
    double total = 0;
    for (size_t t = 0; t + 1 < n; ++t) {
        const double expected = nll(ref.row(int64_t(t)), refs.prompt[t + 1]);
        total += expected;
        EXPECT_NEAR(-double(r.target_logprobs[t]), expected, 1e-3) << "position " << t;
        EXPECT_EQ(r.targets[t], refs.prompt[t + 1]);
        EXPECT_EQ(r.top1_ids[t], argmax(ref.row(int64_t(t)))) << "position " << t;
    }
    const double expected_ppl = std::exp(total / double(n - 1));
    std::printf("[ measured ] %s: perplexity %.6f, from the reference logits %.6f (rel. diff %.2g)\n", GetParam(),
                r.perplexity, expected_ppl, std::fabs(r.perplexity / expected_ppl - 1));
    EXPECT_NEAR(r.perplexity / expected_ppl, 1.0, 1e-4);
    EXPECT_EQ(engine.live(), 0u);
}

// Windows of 10: positions 0-9, 10-19, 20-23 are three independent sequences, so 9 + 9 + 3 scored
// positions, each equal to scoring that window alone.
TEST_P(Perplexity, WindowsAreScoredIndependently) {
    const References refs = load_references(GetParam());
    const Model model = load_model(GetParam(), DType::F32);
    Engine engine(model);
    PerplexityOptions o;
    o.window = 10;
    const PerplexityResult r = perplexity(engine, refs.prompt, o);
    ASSERT_EQ(r.scored, 21);
    const std::vector<int32_t> third(refs.prompt.begin() + 20, refs.prompt.end());
    const PerplexityResult alone = perplexity(engine, third);
    ASSERT_EQ(alone.scored, 3);
    for (size_t i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(r.target_logprobs[18 + i], alone.target_logprobs[i]);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Perplexity, ::testing::Values("qwen2-tiny-f32", "qwen3-tiny-f32"),
                         [](const auto& param_info) { return test_name(param_info.param); });

}  // namespace
}  // namespace flashport::engine::test
