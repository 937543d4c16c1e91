// The memory timeline behind --memory-plot (apps/flashport/memory_timeline.h): the envelope keeps every
// peak exactly while staying bounded, the recorder sees every allocation (on any thread) with its phase,
// and the figure has a panel per device, its series and the phases as labelled bands.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "flashport/error.h"
#include "flashport/memory.h"
#include "flashport/memory_timeline.h"

namespace flashport::app {
namespace {

int64_t envelope_max(const Envelope& e) {
    int64_t m = INT64_MIN;
    for (const Envelope::Bucket& b : e.buckets()) m = std::max(m, b.max);
    return m;
}

TEST(Envelope, KeepsEveryPeakWithinItsCapAsTheRunGrows) {
    Envelope e(1e-3, 64);
    // 100 s of a saw tooth at 10 kHz, with one spike of 1e9 at t = 37.12345 s.
    for (int64_t i = 0; i < 1000000; ++i) {
        const double t = double(i) * 1e-4;
        e.add(t, i % 1000);
        if (i == 371234) e.add(t + 1e-5, 1000000000);
    }
    EXPECT_LE(e.buckets().size(), 64u);
    EXPECT_EQ(envelope_max(e), 1000000000);
    // The width doubled from 1 ms until 100 s fit in 64 buckets: 2^11 ms = 2.048 s.
    EXPECT_DOUBLE_EQ(e.width_s(), 2.048);
    // The spike sits in the bucket that covers its time.
    const auto spike = std::find_if(e.buckets().begin(), e.buckets().end(),
                                    [](const Envelope::Bucket& b) { return b.max == 1000000000; });
    ASSERT_NE(spike, e.buckets().end());
    EXPECT_EQ(spike->index, int64_t(37.12346 / e.width_s()));
    // Each bucket's last value is the saw tooth's value at the end of its interval, not the spike.
    EXPECT_LT(e.buckets().back().last, 1000);
}

TEST(Envelope, LateArrivalsJoinTheNewestBucket) {
    Envelope e(1.0, 8);
    e.add(5.5, 10);
    e.add(2.0, 30);  // an allocation on another thread, reported after a later one
    e.add(-1.0, 5);  // before the start: clamped to it, still joins the newest bucket
    ASSERT_EQ(e.buckets().size(), 1u);
    EXPECT_EQ(e.buckets()[0].index, 5);
    EXPECT_EQ(e.buckets()[0].max, 30);
    EXPECT_EQ(e.buckets()[0].last, 5);
    std::vector<double> t, v;
    e.points(t, v, 0.5);
    EXPECT_EQ(t, (std::vector<double>{5, 6}));
    EXPECT_EQ(v, (std::vector<double>{15, 2.5}));
}

// Buckets with no event between them: the value held, so the points step at the next bucket instead
// of sloping from the last value to the next peak.
TEST(Envelope, HoldsTheValueAcrossAGap) {
    Envelope e(1.0, 8);
    e.add(0.5, 4);
    e.add(5.5, 10);
    std::vector<double> t, v;
    e.points(t, v, 1.0);
    EXPECT_EQ(t, (std::vector<double>{0, 1, 5, 5, 6}));
    EXPECT_EQ(v, (std::vector<double>{4, 4, 4, 10, 10}));
}

TEST(Envelope, RejectsAZeroWidthOrCap) {
    EXPECT_THROW(Envelope(0, 8), Error);
    EXPECT_THROW(Envelope(1e-3, 1), Error);
}

const PlotSeries& series(const PlotPanel& p, const std::string& prefix) {
    for (const PlotSeries& s : p.series)
        if (s.name.rfind(prefix, 0) == 0) return s;
    throw Error("no series starting with '" + prefix + "'");
}

TEST(MemoryTimeline, RecordsEachAllocationsPeakAndThePhases) {
    const double base_mib = double(memory_stats(Device::cpu()).live_bytes) / (1 << 20);
    MemoryTimeline timeline({Device::cpu()});
    timeline.phase("load");
    { Buffer big(24 << 20); }  // freed at once: only the exact tracking sees it
    timeline.phase("decode");
    Buffer small(3 << 20);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a few RSS samples
    std::vector<PlotPanel> panels = timeline.panels();           // ends the recording
    const Buffer after(5 << 20);                                 // not recorded

    ASSERT_EQ(panels.size(), 1u);
    const PlotPanel& p = panels[0];
    EXPECT_EQ(p.title, "cpu");
    EXPECT_EQ(p.y_label, "memory (MiB)");
    EXPECT_FALSE(p.log_x || p.log_y);
    const PlotSeries& tracked = series(p, "tracked");
    EXPECT_FALSE(tracked.markers);
    EXPECT_NEAR(*std::max_element(tracked.y.begin(), tracked.y.end()), base_mib + 24, 1e-9);
    EXPECT_NEAR(tracked.y.back(), base_mib + 3, 1e-9);  // the figure at the end, `after` excluded
    const PlotSeries& rss = series(p, "process resident set");
    ASSERT_FALSE(rss.y.empty());
    EXPECT_GT(*std::max_element(rss.y.begin(), rss.y.end()), 1.0);  // a process holds more than 1 MiB

    ASSERT_EQ(p.spans.size(), 2u);
    EXPECT_EQ(p.spans[0].label, "load");
    EXPECT_EQ(p.spans[1].label, "decode");
    EXPECT_LE(p.spans[0].x0, p.spans[0].x1);
    EXPECT_EQ(p.spans[0].x1, p.spans[1].x0);
    EXPECT_GE(p.spans[1].x1 - p.spans[1].x0, 0.015);

    const std::string svg = render_svg("t", panels);
    EXPECT_NE(svg.find("<title>load</title>"), std::string::npos);
    EXPECT_NE(svg.find("<title>decode</title>"), std::string::npos);
    EXPECT_NE(svg.find("tracked by flashport"), std::string::npos);
    EXPECT_EQ(svg.find("<circle"), std::string::npos) << "a timeline has no per-point markers";
}

TEST(MemoryTimeline, SeesAllocationsOnEveryThreadAndOneRecordsAtATime) {
    const int64_t base = memory_stats(Device::cpu()).live_bytes;
    MemoryTimeline timeline({Device::cpu()});
    EXPECT_THROW(MemoryTimeline({Device::cpu()}), Error);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([] {
            for (int i = 0; i < 2000; ++i) Buffer b(size_t(1024 * (1 + i % 7)));
        });
    for (std::thread& t : threads) t.join();
    const std::vector<PlotPanel> panels = timeline.panels();
    const PlotSeries& tracked = series(panels.at(0), "tracked");
    const double top = *std::max_element(tracked.y.begin(), tracked.y.end()) * (1 << 20);
    EXPECT_GE(top, double(base + 7 * 1024));      // at least one 7 KiB buffer was live
    EXPECT_LE(top, double(base + 4 * 7 * 1024));  // never more than one per thread
    EXPECT_NEAR(tracked.y.back() * (1 << 20), double(base), 1e-3);
    // Finished: another timeline may record now.
    MemoryTimeline next({Device::cpu()});
    next.finish();
}

TEST(MemoryTimeline, WriteRefusesAnUnknownExtension) {
    MemoryTimeline timeline({Device::cpu()});
    EXPECT_THROW(timeline.write("/tmp/flashport_timeline.txt", "t"), Error);
    EXPECT_THROW(check_plot_path("plot.svg.bak"), Error);
    EXPECT_NO_THROW(check_plot_path("out/Plot.SVG"));
}

}  // namespace
}  // namespace flashport::app
