// The polled driver memory peak (see driver_memory.h).
#include "driver_memory.h"

#include <cstdio>
#include <cstdlib>

#include "flashport/memory.h"

#include "flashport/device.h"
#include "flashport/error.h"

namespace flashport::app {

DriverMemoryWatch::DriverMemoryWatch(Device device, bool poll) : device_(device) {
    if (device_.is_cpu()) return;
    before_ = sample();
    peak_ = before_;
    if (const char* path = std::getenv("FLASHPORT_DRIVER_TRACE"); poll && path && *path) {
        trace_ = std::fopen(path, "w");
        if (!trace_)
            std::fprintf(stderr, "flashport: cannot open FLASHPORT_DRIVER_TRACE file '%s'; no timeline\n", path);
    }
    if (poll) thread_ = std::thread([this] { this->poll(); });
}

DriverMemoryWatch::~DriverMemoryWatch() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (trace_) std::fclose(trace_);
}

size_t DriverMemoryWatch::sample() const {
    return gpu_driver_used_bytes(device_.index);
}

void DriverMemoryWatch::raise_peak(size_t used) const {
    size_t seen = peak_.load();
    while (used > seen && !peak_.compare_exchange_weak(seen, used)) {
    }
}

void DriverMemoryWatch::poll() {
    // A failing query (the device lost mid-run) ends the polling, not the command: the main thread
    // meets the same error on its next GPU call and reports it there.
    const auto start = std::chrono::steady_clock::now();
    int64_t logged_used = -1, logged_live = -1;
    constexpr int64_t STEP = int64_t(1) << 20;
    try {
        while (!stop_) {
            const size_t used = sample();
            raise_peak(used);
            if (trace_) {
                const int64_t d = int64_t(used) - int64_t(before_), live = memory_stats(device_).live_bytes;
                if (logged_used < 0 || std::abs(d - logged_used) >= STEP || std::abs(live - logged_live) >= STEP) {
                    const auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start);
                    std::fprintf(trace_, "%.1f %lld %lld\n", ms.count(), (long long)d, (long long)live);
                    logged_used = d;
                    logged_live = live;
                }
            }
            std::this_thread::sleep_for(INTERVAL);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "flashport: driver memory polling stopped: %s\n", e.what());
    }
}

int64_t DriverMemoryWatch::peak_delta() const {
    if (device_.is_cpu()) return 0;
    return int64_t(peak_.load()) - int64_t(before_);
}

int64_t DriverMemoryWatch::now_delta() const {
    if (device_.is_cpu()) return 0;
    const size_t now = sample();
    raise_peak(now);  // a reading taken here counts for the peak too
    return int64_t(now) - int64_t(before_);
}

void DriverMemoryWatch::reset_peak() {
    if (device_.is_cpu()) return;
    peak_ = sample();
}

}  // namespace flashport::app
