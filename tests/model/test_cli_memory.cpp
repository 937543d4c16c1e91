// The memory tools as a user runs them: `generate` and `bench engine` with --memory-plot write a figure
// with the run's phases and a panel per device, and `flashport memtrace` summarises the
// FLASHPORT_MEMTRACE log of a real generate run (peak, live set at the peak, no leaks).
#include <gmock/gmock.h>

#include "cli_test_util.h"

namespace flashport::engine::test {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

// The labels of the SVG's phase bands, in order.
std::vector<std::string> phase_titles(const std::string& svg) {
    std::vector<std::string> out;
    for (size_t at = svg.find("<title>"); at != std::string::npos; at = svg.find("<title>", at + 1)) {
        const size_t end = svg.find("</title>", at);
        out.push_back(svg.substr(at + 7, end - at - 7));
    }
    return out;
}

TEST(CliMemory, GenerateWritesATimelineWithItsPhases) {
    TempDir tmp;
    const fs::path plot = tmp.path() / "new-folder" / "generate.svg";  // the folder is made
    const CliRun r = flashport("generate " + model_arg("qwen3-tiny-f32") +
                               " --prompt-ids 1,2,3,4,5 --max-tokens 8 --ignore-eos --memory-plot " + plot.string());
    ASSERT_EQ(r.rc, 0) << r.err;
    const std::string svg = slurp(plot);
    ASSERT_THAT(svg, HasSubstr("<svg"));
    EXPECT_THAT(svg, HasSubstr("flashport generate: qwen3-tiny-f32, fp32 on cpu, prompt 5 tokens"));
    EXPECT_THAT(svg, HasSubstr(">cpu</text>"));  // the panel
    EXPECT_THAT(svg, HasSubstr("tracked by flashport&apos;s allocator (live)"));
    EXPECT_THAT(svg, HasSubstr("process resident set (RSS)"));
    EXPECT_EQ(phase_titles(svg), (std::vector<std::string>{"load", "engine", "prefill", "decode"}));
    EXPECT_THAT(svg, HasSubstr("<polyline"));
}

TEST(CliMemory, BenchEngineMarksEachBatchsPhases) {
    TempDir tmp;
    const fs::path plot = tmp.path() / "bench.svg";
    const CliRun r = flashport("bench engine " + model_arg("qwen2-tiny-f32") +
                               " --batch 1,2 --prompt-len 8 --new-tokens 4 --json --memory-plot " + plot.string());
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(phase_titles(slurp(plot)), (std::vector<std::string>{"load", "warm-up b1", "prefill b1", "decode b1",
                                                                   "warm-up b2", "prefill b2", "decode b2"}));
}

TEST(CliMemory, ABadPlotPathIsRefusedBeforeTheModelLoads) {
    const CliRun r = flashport("generate --model /nonexistent --prompt-ids 1 --memory-plot out.pdf");
    EXPECT_EQ(r.rc, 1);
    EXPECT_THAT(r.err, HasSubstr("error: plot file 'out.pdf' has an unsupported extension: use .svg or .png"));
}

TEST(CliMemory, MemtraceSummarisesARealRun) {
    TempDir tmp;
    const fs::path log = tmp.path() / "trace.log";
    const CliRun gen =
        flashport("generate " + model_arg("qwen2-tiny-f32") + " --prompt-ids 1,2,3 --max-tokens 4 --ignore-eos --json",
                  "", "FLASHPORT_MEMTRACE=" + log.string());
    ASSERT_EQ(gen.rc, 0) << gen.err;
    const int64_t generate_peak = nlohmann::json::parse(gen.out).at("figures").at("peak_memory_bytes").get<int64_t>();

    const CliRun r = flashport("memtrace " + log.string() + " --json");
    ASSERT_EQ(r.rc, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j.at("complete").get<bool>());
    EXPECT_EQ(j.at("inconsistencies"), 0);
    EXPECT_EQ(j.at("leak_count"), 0) << j.at("leaks").dump();
    ASSERT_EQ(j.at("devices").size(), 1u);
    const nlohmann::json& cpu = j.at("devices").at(0);
    EXPECT_EQ(cpu.at("device"), "cpu");
    EXPECT_EQ(cpu.at("allocations"), cpu.at("frees"));
    // The log covers the whole process, generate's figure the run after loading.
    EXPECT_GE(cpu.at("peak_bytes").get<int64_t>(), generate_peak);
    int64_t at_peak = 0;
    for (const nlohmann::json& site : cpu.at("live_at_peak")) {
        at_peak += site.at("bytes").get<int64_t>();
        EXPECT_THAT(site.at("site").get<std::string>(), ContainsRegex("^[^ ]+:[0-9]+ "));  // file:line function
        // flashport's own line, not the standard library's (an emplace_back would log construct_at).
        EXPECT_THAT(site.at("site").get<std::string>(), Not(HasSubstr("/usr/include/")));
    }
    EXPECT_EQ(at_peak, cpu.at("peak_bytes").get<int64_t>());

    const CliRun text = flashport("memtrace " + log.string() + " --top 3");
    ASSERT_EQ(text.rc, 0) << text.err;
    EXPECT_THAT(text.out, HasSubstr("complete (the process exited and wrote its leak report)"));
    EXPECT_THAT(text.out, HasSubstr("live at the peak, by call site:"));
    EXPECT_THAT(text.out, HasSubstr("leaks: 0 allocations"));

    const CliRun bad = flashport("memtrace " + (tmp.path() / "missing.log").string());
    EXPECT_EQ(bad.rc, 1);
    EXPECT_THAT(bad.err, HasSubstr("error: memtrace: cannot open"));
}

}  // namespace
}  // namespace flashport::engine::test
