// The memory timeline behind --memory-plot; see memory_timeline.h.
#include "flashport/memory_timeline.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <optional>
#include <thread>

#include "flashport/device.h"
#include "flashport/error.h"
#include "flashport/memory.h"

namespace flashport::app {

Envelope::Envelope(double width_s, size_t max_buckets) : width_s_(width_s), max_buckets_(max_buckets) {
    FP_CHECK(width_s > 0 && max_buckets >= 2, "Envelope: the bucket width must be > 0 and the cap >= 2");
}

void Envelope::add(double t_s, int64_t value) {
    int64_t index = int64_t(std::floor(std::max(t_s, 0.0) / width_s_));
    if (!buckets_.empty() && index <= buckets_.back().index) {  // this bucket, or a late arrival
        Bucket& b = buckets_.back();
        b.max = std::max(b.max, value);
        b.last = value;
        return;
    }
    buckets_.push_back({index, value, value});
    while (buckets_.size() > max_buckets_) coarsen();
}

// Buckets 2k and 2k+1 become bucket k of twice the width; the later one's last value stays last.
void Envelope::coarsen() {
    width_s_ *= 2;
    std::vector<Bucket> merged;
    merged.reserve(buckets_.size() / 2 + 1);
    for (const Bucket& b : buckets_) {
        const int64_t index = b.index / 2;
        if (!merged.empty() && merged.back().index == index) {
            merged.back().max = std::max(merged.back().max, b.max);
            merged.back().last = b.last;
        } else {
            merged.push_back({index, b.max, b.last});
        }
    }
    buckets_ = std::move(merged);
}

void Envelope::points(std::vector<double>& t_s, std::vector<double>& values, double scale) const {
    for (size_t i = 0; i < buckets_.size(); ++i) {
        const Bucket& b = buckets_[i];
        // Nothing changed between two buckets apart: the value held, so the line steps, not slopes.
        if (i > 0 && buckets_[i - 1].index + 1 < b.index) {
            t_s.push_back(double(b.index) * width_s_);
            values.push_back(double(buckets_[i - 1].last) * scale);
        }
        t_s.push_back(double(b.index) * width_s_);
        values.push_back(double(b.max) * scale);
        t_s.push_back(double(b.index + 1) * width_s_);
        values.push_back(double(b.last) * scale);
    }
}

namespace {

using Clock = std::chrono::steady_clock;

// The process's resident set: /proc/self/statm's second field, in pages. -1 where unreadable.
int64_t resident_bytes() {
    FILE* f = std::fopen("/proc/self/statm", "r");
    if (!f) return -1;
    long long size = 0, resident = 0;
    const int got = std::fscanf(f, "%lld %lld", &size, &resident);
    std::fclose(f);
    return got == 2 ? resident * int64_t(sysconf(_SC_PAGESIZE)) : -1;
}

struct DeviceRecord {
    Device device;
    Envelope tracked, system;
    int64_t system_base = -1;  // the driver's used bytes at the first reading (GPUs)
    bool polled = false;       // one of the timeline's devices: its system figure is sampled
};

// The recording's state. It lives for the whole process, never destroyed, so an allocation on another
// thread that reaches the observer as a timeline ends still finds it; `on` says whether it records.
struct Recorder {
    std::mutex mutex;
    std::condition_variable wake;  // ends the poller's sleep at stop
    bool on = false;
    Clock::time_point start;
    std::vector<DeviceRecord> devices;
    std::vector<TimelinePhase> phases;
    std::thread poller;

    double now_s() const { return std::chrono::duration<double>(Clock::now() - start).count(); }

    DeviceRecord& record(Device device) {
        for (DeviceRecord& r : devices)
            if (r.device == device) return r;
        devices.push_back({device, Envelope(), Envelope(), -1, false});
        return devices.back();
    }

    // The CPU's resident set, or the change in a GPU's driver-used bytes since its first reading. A
    // failing GPU query stops that series, not the run.
    static std::optional<int64_t> system_figure(DeviceRecord& r) {
        if (r.device.is_cpu()) {
            const int64_t rss = resident_bytes();
            return rss >= 0 ? std::optional<int64_t>(rss) : std::nullopt;
        }
        try {
            const int64_t used = int64_t(gpu_driver_used_bytes(r.device.index));
            if (r.system_base < 0) r.system_base = used;
            return used - r.system_base;
        } catch (const std::exception& e) {
            std::fprintf(stderr, "flashport: memory timeline: %s; the driver's figure stops here\n", e.what());
            r.polled = false;
            return std::nullopt;
        }
    }

    // Samples the polled devices' system figures until stopped.
    void poll() {
        constexpr auto INTERVAL = std::chrono::milliseconds(5);
        std::unique_lock lock(mutex);
        while (on) {
            for (DeviceRecord& r : devices)
                if (r.polled)
                    if (const std::optional<int64_t> value = system_figure(r)) r.system.add(now_s(), *value);
            wake.wait_for(lock, INTERVAL, [this] { return !on; });
        }
    }
};

Recorder& recorder() {
    static Recorder* r = new Recorder();  // never destroyed: see Recorder
    return *r;
}

void observe(Device device, int64_t live_bytes) {
    Recorder& r = recorder();
    std::lock_guard lock(r.mutex);
    if (r.on) r.record(device).tracked.add(r.now_s(), live_bytes);
}

}  // namespace

MemoryTimeline::MemoryTimeline(std::vector<Device> devices) : devices_(std::move(devices)) {
    Recorder& r = recorder();
    {
        std::lock_guard lock(r.mutex);
        FP_CHECK(!r.on && !r.poller.joinable(), "a memory timeline is already recording in this process");
        r.on = true;
        r.start = Clock::now();
        r.devices.clear();
        r.phases.clear();
        for (Device d : devices_) {
            DeviceRecord& rec = r.record(d);
            rec.polled = true;
            rec.tracked.add(0, memory_stats(d).live_bytes);
        }
    }
    set_live_bytes_observer(observe);
    r.poller = std::thread([&r] { r.poll(); });
}

MemoryTimeline::~MemoryTimeline() {
    finish();
}

void MemoryTimeline::phase(const std::string& name) {
    Recorder& r = recorder();
    std::lock_guard lock(r.mutex);
    if (!r.on) return;
    const double t = r.now_s();
    if (!r.phases.empty() && r.phases.back().t1_s < 0) r.phases.back().t1_s = t;
    r.phases.push_back({name, t, -1});
}

void MemoryTimeline::finish() {
    if (finished_) return;
    finished_ = true;
    Recorder& r = recorder();
    set_live_bytes_observer(nullptr);
    {
        std::lock_guard lock(r.mutex);
        const double t = r.now_s();
        if (!r.phases.empty() && r.phases.back().t1_s < 0) r.phases.back().t1_s = t;
        // The figures at the end, so every line reaches the right edge.
        for (DeviceRecord& rec : r.devices) rec.tracked.add(t, memory_stats(rec.device).live_bytes);
        r.on = false;
    }
    r.wake.notify_all();
    if (r.poller.joinable()) r.poller.join();
}

std::vector<TimelinePhase> MemoryTimeline::phases() const {
    Recorder& r = recorder();
    std::lock_guard lock(r.mutex);
    return r.phases;
}

std::vector<PlotPanel> MemoryTimeline::panels() {
    finish();
    Recorder& r = recorder();
    std::lock_guard lock(r.mutex);
    std::vector<PlotPanel> panels;
    for (const DeviceRecord& rec : r.devices) {
        int64_t top = 0;
        for (const Envelope* e : {&rec.tracked, &rec.system})
            for (const Envelope::Bucket& b : e->buckets()) top = std::max(top, b.max);
        const bool gib = top >= (int64_t(2) << 30);
        const double scale = 1.0 / double(int64_t(1) << (gib ? 30 : 20));
        PlotPanel p;
        p.title = rec.device.name();
        p.x_label = "time since start (s)";
        p.y_label = gib ? "memory (GiB)" : "memory (MiB)";
        p.log_x = p.log_y = false;
        PlotSeries tracked{"tracked by flashport's allocator (live)", {}, {}, false};
        rec.tracked.points(tracked.x, tracked.y, scale);
        p.series.push_back(std::move(tracked));
        if (!rec.system.buckets().empty()) {
            PlotSeries system{
                rec.device.is_cpu() ? "process resident set (RSS)" : "driver: used, change since start", {}, {}, false};
            rec.system.points(system.x, system.y, scale);
            p.series.push_back(std::move(system));
        }
        for (const TimelinePhase& ph : r.phases) p.spans.push_back({ph.name, ph.t0_s, ph.t1_s});
        panels.push_back(std::move(p));
    }
    return panels;
}

void MemoryTimeline::write(const std::string& path, const std::string& title) {
    write_plot(path, title, panels());
}

}  // namespace flashport::app
