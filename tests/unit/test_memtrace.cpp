// `flashport memtrace` (apps/flashport/memtrace.h) on logs written for the tests: the peak per device
// and what was live there, each call site's own peak, leaks from the report or from a log cut short,
// and a clear error naming the line for anything that is not a FLASHPORT_MEMTRACE log.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "flashport/error.h"
#include "flashport/memtrace.h"

namespace flashport::app {
namespace {

using ::testing::HasSubstr;

class Memtrace : public ::testing::Test {
protected:
    void TearDown() override { std::filesystem::remove(path_); }
    // Writes `text` as the log and summarises it.
    MemtraceSummary summarise(const std::string& text) {
        std::ofstream(path_, std::ios::binary) << text;
        return summarise_memtrace(path_);
    }
    std::string error_of(const std::string& text) {
        try {
            summarise(text);
        } catch (const Error& e) {
            const std::string what = e.what();
            EXPECT_EQ(what.find('\n'), std::string::npos) << "one line: " << what;
            return what;
        }
        ADD_FAILURE() << "no error for: " << text.substr(0, 200);
        return "";
    }
    std::string path_ =
        (std::filesystem::temp_directory_path() / ("flashport_memtrace_test_" + std::to_string(getpid()) + ".log"))
            .string();
};

const SiteBytes& find(const std::vector<SiteBytes>& v, const std::string& site) {
    for (const SiteBytes& s : v)
        if (s.site == site) return s;
    throw Error("no site " + site);
}

// The weights load (a.cpp), a prefill workspace comes and goes (b.cpp), the KV cache grows (c.cpp).
const char* const LOG =
    "alloc 0x10 1000 cpu a.cpp:1 load()\n"
    "alloc 0x20 2000 cpu a.cpp:1 load()\n"
    "alloc 0x30 5000 cpu b.cpp:7 void prefill(int, int)\n"
    "alloc 0x90 300 gpu:0 c.cpp:3 grow()\n"
    "free 0x30 5000 cpu\n"
    "alloc 0x40 600 cpu c.cpp:3 grow()\n"
    "alloc 0x50 600 cpu c.cpp:3 grow()\n"
    "free 0x90 300 gpu:0\n"
    "alloc 0x30 700 gpu:0 b.cpp:7 void prefill(int, int)\n"
    "free 0x10 1000 cpu\n"
    "leak-report 4 allocations, 3900 bytes still live\n"
    "leak 0x20 2000 cpu a.cpp:1 load()\n"
    "leak 0x40 600 cpu c.cpp:3 grow()\n"
    "leak 0x50 600 cpu c.cpp:3 grow()\n"
    "leak 0x30 700 gpu:0 b.cpp:7 void prefill(int, int)\n";

TEST_F(Memtrace, PeakLiveSetSitePeaksAndLeaks) {
    const MemtraceSummary s = summarise(LOG);
    EXPECT_EQ(s.lines, 15);
    EXPECT_TRUE(s.complete);
    EXPECT_EQ(s.inconsistencies, 0);
    ASSERT_EQ(s.devices.size(), 2u);
    const MemtraceDevice& cpu = s.devices[0];
    EXPECT_EQ(cpu.device, "cpu");
    EXPECT_EQ(cpu.allocations, 5);
    EXPECT_EQ(cpu.frees, 2);
    EXPECT_EQ(cpu.peak_bytes, 8000);  // line 3: the weights and the workspace
    EXPECT_EQ(cpu.peak_line, 3);
    ASSERT_EQ(cpu.at_peak.size(), 2u);
    EXPECT_EQ(cpu.at_peak[0].site, "b.cpp:7 void prefill(int, int)");  // largest first
    EXPECT_EQ(cpu.at_peak[0].bytes, 5000);
    EXPECT_EQ(cpu.at_peak[1].bytes, 3000);
    EXPECT_EQ(cpu.at_peak[1].count, 2);
    // The KV cache was not live at the peak, but has a peak of its own: both its blocks.
    EXPECT_EQ(find(cpu.site_peaks, "c.cpp:3 grow()").bytes, 1200);
    EXPECT_EQ(find(cpu.site_peaks, "c.cpp:3 grow()").count, 2);
    EXPECT_EQ(find(cpu.site_peaks, "a.cpp:1 load()").bytes, 3000);

    const MemtraceDevice& gpu = s.devices[1];
    EXPECT_EQ(gpu.device, "gpu:0");
    EXPECT_EQ(gpu.peak_bytes, 700);
    EXPECT_EQ(gpu.peak_line, 9);
    ASSERT_EQ(gpu.at_peak.size(), 1u);
    EXPECT_EQ(gpu.at_peak[0].site, "b.cpp:7 void prefill(int, int)");

    EXPECT_EQ(s.leak_count, 4);
    EXPECT_EQ(s.leak_bytes, 3900);
    ASSERT_EQ(s.leaks.size(), 3u);
    EXPECT_EQ(s.leaks[0].site, "cpu a.cpp:1 load()");
    EXPECT_EQ(s.leaks[1].site, "cpu c.cpp:3 grow()");
    EXPECT_EQ(s.leaks[1].count, 2);

    const std::string report = memtrace_report(s, "run.log", 1);
    EXPECT_THAT(report, HasSubstr("cpu: 5 allocations, 2 frees; peak 7.8 KiB live at line 3"));
    EXPECT_THAT(report, HasSubstr("... and 1 more call sites (2.9 KiB)"));
    EXPECT_THAT(report, HasSubstr("leaks: 4 allocations, 3.8 KiB"));
    const nlohmann::json j = memtrace_json(s);
    EXPECT_EQ(j.at("devices").at(1).at("live_at_peak").at(0).at("bytes"), 700);
    EXPECT_EQ(j.at("leaks").size(), 3u);
}

TEST_F(Memtrace, ALogCutShortReportsWhatIsLiveAtItsEnd) {
    const std::string log =
        "alloc 0x10 100 cpu a.cpp:1 f()\r\n"
        "alloc 0x20 50 cpu b.cpp:2 g()\r\n"
        "free 0x10 100 cpu\r\n"
        "alloc 0x30 7 cpu b.cpp:2 g()";  // no newline: the process died mid-write
    const MemtraceSummary s = summarise(log);
    EXPECT_FALSE(s.complete);
    EXPECT_EQ(s.leak_count, 2);
    EXPECT_EQ(s.leak_bytes, 57);
    ASSERT_EQ(s.leaks.size(), 1u);
    EXPECT_EQ(s.leaks[0].site, "cpu b.cpp:2 g()");
    EXPECT_EQ(s.leaks[0].count, 2);
    EXPECT_THAT(memtrace_report(s, "x", 10), HasSubstr("live at the end of the log: 2 allocations"));
}

TEST_F(Memtrace, EventsThatDoNotFitTheReplayAreCountedNotFatal) {
    const MemtraceSummary s = summarise(
        "free 0x99 10 cpu\n"
        "alloc 0x10 100 cpu a.cpp:1 f()\n"
        "alloc 0x10 30 cpu a.cpp:1 f()\n");
    EXPECT_EQ(s.inconsistencies, 2);
    EXPECT_EQ(s.devices.at(0).peak_bytes, 100);
    EXPECT_EQ(s.leak_bytes, 30);
    EXPECT_THAT(memtrace_report(s, "x", 10), HasSubstr("warning: 2 events do not fit the replay"));
}

TEST_F(Memtrace, AnEmptyLogHasNothingToReport) {
    const MemtraceSummary s = summarise("");
    EXPECT_EQ(s.lines, 0);
    EXPECT_TRUE(s.devices.empty());
    EXPECT_FALSE(s.complete);
}

TEST_F(Memtrace, MalformedLogsAreOneLineErrorsNamingTheLine) {
    EXPECT_THAT(error_of("alloc 0x1 10 cpu a:1 f()\nhello world\n"),
                HasSubstr("line 2 starts with 'hello', not alloc, free, leak or leak-report"));
    EXPECT_THAT(error_of("alloc 0x1 ten cpu a:1 f()\n"), HasSubstr("line 1: 'ten' is not a byte count"));
    EXPECT_THAT(error_of("alloc 0x1 -5 cpu a:1 f()\n"), HasSubstr("'-5' is not a byte count"));
    EXPECT_THAT(error_of("alloc 0x1 99999999999999999999 cpu a:1 f()\n"), HasSubstr("is not a byte count"));
    EXPECT_THAT(error_of("alloc 0x1 10 tpu:0 a:1 f()\n"), HasSubstr("'tpu:0' is not a device"));
    EXPECT_THAT(error_of("alloc 0x1 10 gpu:12345 a:1 f()\n"), HasSubstr("is not a device"));
    EXPECT_THAT(error_of("alloc 0x1 10 cpu\n"), HasSubstr("line 1: 'alloc' has no call site"));
    EXPECT_THAT(error_of("free 0x1\n"), HasSubstr("is not a byte count"));
    EXPECT_THAT(error_of("leak 0x1 10 cpu a:1 f()\n"), HasSubstr("line 1: a leak line before the leak report"));
    EXPECT_THAT(error_of("leak-report 0 allocations, 0 bytes still live\nalloc 0x1 1 cpu a:1 f()\n"),
                HasSubstr("line 2: an allocation event after the leak report"));
    EXPECT_THAT(error_of(std::string("\x01\xff\x7f junk\n")), HasSubstr("starts with '?"
                                                                        "?"
                                                                        "?'"));
    EXPECT_THAT(error_of("alloc 0x1 1 cpu " + std::string(70000, 'x') + "\n"),
                HasSubstr("line 1 of '" + path_ + "' is longer than 65536 bytes"));
    // Each allocation may be up to 2^62 - 1 bytes (what the allocator allows); three overflow the sum.
    const std::string big = std::to_string((int64_t(1) << 62) - 1);
    EXPECT_THAT(error_of("alloc 0x1 " + big + " cpu a:1 f()\nalloc 0x2 " + big + " cpu a:1 f()\nalloc 0x3 " + big +
                         " cpu a:1 f()\n"),
                HasSubstr("line 3: the live bytes overflow 64 bits"));
    EXPECT_THAT(error_of("alloc 0x1 " + std::to_string(int64_t(1) << 62) + " cpu a:1 f()\n"),
                HasSubstr("is not a byte count"));
    EXPECT_THROW(summarise_memtrace("/nonexistent/flashport.log"), Error);
}

}  // namespace
}  // namespace flashport::app
