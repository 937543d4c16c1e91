// Bad input to the CLI, as issue 11's campaign tried it: each case is one "error: ..." line and a
// non-zero exit, before any work (no crash, no huge allocation, no silent exit 0); a chat survives a
// turn that overflows the context; output files get their folders made.
#include <cmath>

#include "cli_test_util.h"
#include "flashport/memory.h"

namespace flashport::engine::test {
namespace {

const std::string KJV = "--model " + std::string(FP_TINY_KJV_DIR);

TEST(CliBadInput, HugeShapesOverflowCheckedArithmetic) {
    expect_error_line(flashport("bench attention --iters 1 --batch 288230376151711745 --seq 1 --heads 1 --head-dim 64"),
                      "288230376151711745 x 64 overflows int64");
    expect_error_line(flashport("bench attention --iters 1 --batch 8589934592 --seq 2147483648"), "overflows int64");
}

TEST(CliBadInput, SizeFlagsAreRangeChecked) {
    const std::string gen = "generate " + KJV + " --prompt hi ";
    expect_error_line(flashport(gen + "--max-tokens 9223372036854775807"), "--max-tokens: must be an integer in [1, ");
    expect_error_line(flashport(gen + "--ctx 99999999999999999999"), "--ctx: must be an integer in [0, ");
    expect_error_line(flashport("bench engine " + KJV + " --prompt-len 9223372036854775807"),
                      "--prompt-len: must be an integer in [1, 2147483647]");
    for (const char* bad : {"1e300", "nan", "inf", "-1"})
        expect_error_line(flashport(gen + "--kv-memory " + bad), "--kv-memory: must be a finite number in [0, ");
    expect_error_line(flashport(gen + "--seed -1"), "--seed: must be an integer in [0, 18446744073709551615]");
    expect_error_line(flashport(gen + "--ctx 010x"), "got '010x'");
    expect_error_line(flashport("bench attention --sweep 64,0"), "--sweep: must be an integer in [1, ");
    expect_error_line(flashport("bench attention --iters 0"), "--iters: must be an integer in [1, 1000000]");
    expect_error_line(flashport("perplexity " + KJV + " --file x --window -2"), "--window: must be an integer");
}

TEST(CliBadInput, SamplingFlagsRejectNaNInfAndOutOfRange) {
    const std::string gen = "generate " + KJV + " --prompt hi ";
    for (const char* flag : {"--temperature", "--top-p", "--min-p", "--repetition-penalty"})
        for (const char* bad : {"nan", "inf", "-inf", "-0.5", "1e39"})
            expect_error_line(flashport(gen + flag + " " + bad), std::string(flag) + ": must be a finite number in ");
    expect_error_line(flashport(gen + "--top-p 1.01"), "--top-p: must be a finite number in [0, 1]");
    expect_error_line(flashport(gen + "--repetition-penalty 0"), "in (0, 100]");
    expect_error_line(flashport(gen + "--top-k -1"), "--top-k: must be an integer in [0, 2147483647]");
    expect_error_line(flashport("chat " + KJV + " --temperature nan", "hi\n"), "--temperature: must be a finite");
}

// An argument the command does not take is quoted, but cut: a 60 KB id list is one short line, not a screenful.
TEST(CliBadInput, AnUnexpectedHugeArgumentIsQuotedShort) {
    std::string ids = "5";
    for (int i = 0; i < 30000; ++i) ids += ",5";
    const CliRun r = flashport("perplexity " + KJV + " --prompt-ids " + ids);
    expect_error_line(r, "more bytes)");
    EXPECT_NE(r.err.find("not expected"), std::string::npos) << r.err.substr(0, 200);
    EXPECT_LT(r.err.size(), 500u);
}

// The edges of the ranges are accepted: max-tokens far past the context is clamped, not overflowed.
TEST(CliBadInput, RangeEdgesAreAccepted) {
    const CliRun r = flashport("generate " + KJV + " --prompt-ids 1,2 --max-tokens 2147483647 --seed " +
                               "18446744073709551615 --temperature 100 --top-p 1 --min-p 0 --ignore-eos --json");
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out).at("stop_reason"), "max_tokens");
}

TEST(CliBadInput, BenchAttentionValidatesThroughThePlannerFirst) {
    const CliRun gqa = flashport("bench attention --heads 3 --kv-heads 2");
    expect_error_line(gqa, "n_heads (3) must be a multiple of n_kv_heads (2)");
    const CliRun dim = flashport("bench attention --head-dim 100000");
    expect_error_line(dim, "head_dim 100000 is not supported on the CPU");
    EXPECT_EQ(dim.out.find("median ms"), std::string::npos) << "refused before the table: " << dim.out;
    expect_error_line(flashport("bench attention --iters 1 --batch 4096 --heads 4096 --seq 65536"),
                      "but only");  // fits int64, not memory: the figures, before allocating
}

// A naive run whose score matrix cannot fit is skipped. Asked for on its own it is a failure (exit
// 1); in a sweep it marks where naive stops fitting, which is the sweep's point.
TEST(CliBadInput, BenchAttentionExitsNonZeroWhenARequestedImplDidNotRun) {
    const double avail = double(available_memory(Device::cpu()));
    const auto seq = int64_t(std::ceil(std::sqrt(2.0 * avail / 4.0)));  // scores of 2x what is available
    const std::string base = "bench attention --iters 1 --batch 1 --heads 1 --head-dim 16 --dtype fp32 --impl naive";
    const CliRun alone = flashport(base + " --seq " + std::to_string(seq));
    EXPECT_EQ(alone.rc, 1) << alone.err;
    EXPECT_NE(alone.err.find("error: bench attention: 1 of 1 runs did not complete (naive at seq " +
                             std::to_string(seq) + ": skipped: the score matrix needs"),
              std::string::npos)
        << alone.err;
    const CliRun sweep = flashport(base + " --seq 64 --sweep 64," + std::to_string(seq));
    EXPECT_EQ(sweep.rc, 0) << sweep.err;
    EXPECT_NE(sweep.out.find("skipped"), std::string::npos) << sweep.out;
}

TEST(CliBadInput, KvPoolIsCheckedAgainstAvailableMemory) {
    expect_error_line(flashport("generate " + KJV + " --prompt hi --kv-memory 1e9"), "is available (MemAvailable)");
    expect_error_line(flashport("generate " + KJV + " --prompt hi --ctx 17179869184"),
                      "a KV cache of 17179869184 tokens");
    expect_error_line(flashport("bench engine " + KJV + " --batch 1,2147483647 --prompt-len 64 --new-tokens 16"),
                      "bench engine at batch 2147483647 (a KV cache of 171798691760 tokens) needs");
}

// Turns that got a reply: --stats prints one figures line per reply on stderr.
int replies(const CliRun& r) {
    int n = 0;
    for (size_t at = r.err.find("[prompt "); at != std::string::npos; at = r.err.find("[prompt ", at + 1)) ++n;
    return n;
}

// The turn that pushes the history past the context (256 tokens here) forgets the oldest exchanges,
// a message too long to fit alone is refused, and either way the conversation goes on.
TEST(CliBadInput, ChatSurvivesATurnThatOverflowsTheContext) {
    TempDir dir;
    make_text_model(dir.path());
    std::string input;
    for (int i = 0; i < 8; ++i)
        input += "tell me one more thing about the sea and the sky, turn " + std::to_string(i) + "\n";
    std::string huge;
    for (int i = 0; i < 200; ++i) huge += "waves ";
    input += huge + "\nand a short one\n";
    const std::string chat = "chat --model " + dir.path().string() + " --temperature 0 --max-tokens 8 --stats";
    const CliRun r = flashport(chat, input);
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.err.find("chat: the conversation outgrew the context"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("it was not sent"), std::string::npos) << r.err;
    EXPECT_EQ(replies(r), 9) << "a reply to every turn but the refused one: " << r.err;

    // A sized cache (--ctx) leaves room for the reply as well.
    const CliRun sized =
        flashport(chat + " --ctx 64", "hello there\nand again with a few more words\nand once more, longer still\n");
    ASSERT_EQ(sized.rc, 0) << sized.err;
    EXPECT_EQ(replies(sized), 3) << sized.err;
}

// README command 1 on a fresh clone: --plot and --json into folders that do not exist yet.
TEST(CliBadInput, OutputFilesGetTheirFolders) {
    TempDir dir;
    const fs::path plot = dir.path() / "out" / "deep" / "sweep.svg", json = dir.path() / "other" / "r.json";
    const CliRun r = flashport("bench attention --iters 1 --seq 64 --sweep 32,64 --plot " + plot.string() + " --json " +
                               json.string());
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_TRUE(fs::is_regular_file(plot));
    EXPECT_TRUE(fs::is_regular_file(json));
    std::ofstream(dir.path() / "file") << "x";
    expect_error_line(
        flashport("bench attention --iters 1 --seq 64 --json " + (dir.path() / "file" / "r.json").string()),
        "cannot create folder");
}

}  // namespace
}  // namespace flashport::engine::test
