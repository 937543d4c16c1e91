// NaN and Inf weights: the load-time scan (ModelOptions::check_weights) names the first bad tensor
// and index, and with the scan off the engine refuses non-finite logits rather than sampling from
// them. Regression tests for issue 11's "NaN weights are hidden".
#include <cmath>
#include <limits>

#include "cli_test_util.h"
#include "common/error_text.h"
#include "engine/generate.h"
#include "engine/perplexity.h"
#include "poison_util.h"

namespace flashport::engine::test {
namespace {

constexpr float NaN = std::numeric_limits<float>::quiet_NaN();
constexpr float INF = std::numeric_limits<float>::infinity();

using flashport::test::error_of;

Model load_unchecked(const fs::path& dir) {
    ModelOptions o;
    o.check_weights = false;
    return Model::load(dir, o);
}

TEST(CheckWeights, NamesTheFirstNonFiniteTensorAndIndex) {
    TempDir dir;
    make_poisoned_model(dir.path(), "model.layers.0.self_attn.q_proj.weight", NaN);
    const std::string msg = error_of([&] { (void)Model::load(dir.path()); });
    EXPECT_NE(msg.find("tensor 'model.layers.0.self_attn.q_proj.weight'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("holds NaN at index [0, 0]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--no-check-weights"), std::string::npos) << msg;

    TempDir inf;
    make_poisoned_model(inf.path(), "model.layers.1.mlp.down_proj.weight", -INF);
    EXPECT_NE(error_of([&] { (void)Model::load(inf.path()); }).find("holds -inf at index [0, 0]"), std::string::npos);
    EXPECT_NO_THROW((void)load_unchecked(inf.path())) << "the scan is optional";
}

// With the scan off, the final norm's NaN reaches every logit whatever the attention kernel does.
TEST(CheckWeights, NonFiniteLogitsAreAnErrorNamingThePosition) {
    TempDir dir;
    make_poisoned_model(dir.path(), "model.norm.weight", NaN);
    const Model model = load_unchecked(dir.path());
    for (const StepOutput output : {StepOutput::LOGITS, StepOutput::GREEDY}) {
        Engine engine(model);
        const SeqId seq = engine.add_sequence(std::vector<int32_t>{1, 2, 3});
        const std::string msg = error_of([&] { engine.step(output); });
        EXPECT_NE(msg.find("NaN"), std::string::npos) << msg;
        EXPECT_NE(msg.find(" for sequence " + std::to_string(seq) + " at position 2"), std::string::npos) << msg;
    }
    Engine engine(model);
    GenerateOptions sample;
    sample.stop.max_new_tokens = 4;
    EXPECT_NE(error_of([&] {
                  generate(engine, nullptr, std::vector<int32_t>{1, 2}, sample);
              }).find("NaN logit"),
              std::string::npos);
    EXPECT_NE(error_of([&] {
                  perplexity(engine, std::vector<int32_t>{1, 2, 3, 4}, {});
              }).find("NaN logit"),
              std::string::npos);
}

TEST(CheckWeights, GenerateRefusesAPoisonedModel) {
    TempDir dir;
    make_poisoned_model(dir.path(), "model.layers.0.self_attn.q_proj.weight", NaN);
    expect_error_line(flashport("generate --model " + dir.path().string() + " --prompt-ids 1,2"),
                      "tensor 'model.layers.0.self_attn.q_proj.weight'");
    // The model: a NaN q_proj makes every attention score NaN, and with the scan off that must
    // reach the logits (the attention kernels keep an all-NaN row NaN, as PyTorch does), not pass as
    // a masked row and generate plausible text.
    expect_error_line(flashport("generate --model " + dir.path().string() + " --prompt-ids 1,2 --no-check-weights"),
                      "NaN logit");
    TempDir norm;
    make_poisoned_model(norm.path(), "model.norm.weight", NaN);
    expect_error_line(flashport("generate --model " + norm.path().string() + " --prompt-ids 1,2 --no-check-weights"),
                      "NaN logit (token 0) for sequence 0 at position 1");
}

}  // namespace
}  // namespace flashport::engine::test
