// The tracked allocator: exact per-device counters, plus the optional FLASHPORT_MEMTRACE log.
#include "flashport/memory.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <unordered_map>

#include "core/device_backend.h"
#include "flashport/error.h"

namespace flashport {
namespace {

constexpr int MAX_GPUS = 16;

struct Counters {
    std::atomic<int64_t> live{0}, peak{0}, count{0};

    // Both return the live bytes just after the change.
    int64_t sub(int64_t bytes) { return live.fetch_sub(bytes) - bytes; }
    int64_t add(int64_t bytes) {
        const int64_t now = live.fetch_add(bytes) + bytes;
        count.fetch_add(1);
        int64_t p = peak.load();
        while (now > p && !peak.compare_exchange_weak(p, now)) {
        }
        return now;
    }
};

Counters& counters(Device device) {
    static Counters cpu;
    static Counters gpu[MAX_GPUS];
    if (device.is_cpu()) return cpu;
    FP_CHECK(device.index >= 0 && device.index < MAX_GPUS, "GPU index ", device.index, " out of range (at most ",
             MAX_GPUS, " devices)");
    return gpu[device.index];
}

struct Allocation {
    size_t bytes;
    std::string site;
};

// Present only while FLASHPORT_MEMTRACE is set: the log file and every live allocation's site.
class Trace {
public:
    static Trace* get() {
        static Trace* trace = open();
        return trace;
    }
    void on_alloc(void* p, size_t bytes, Device device, const SourceLocation& site) {
        std::lock_guard lock(mutex_);
        std::string where = std::string(site.file_name()) + ":" + std::to_string(site.line()) + " " +
                            site.function_name();
        std::fprintf(file_, "alloc %p %zu %s %s\n", p, bytes, device.name().c_str(), where.c_str());
        live_[p] = {bytes, device.name() + " " + where};
    }
    void on_free(void* p, Device device) {
        std::lock_guard lock(mutex_);
        auto it = live_.find(p);
        std::fprintf(file_, "free %p %zu %s\n", p, it == live_.end() ? size_t(0) : it->second.bytes,
                     device.name().c_str());
        if (it != live_.end()) live_.erase(it);
    }
    ~Trace() {
        std::lock_guard lock(mutex_);
        size_t total = 0;
        for (auto& [p, a] : live_) total += a.bytes;
        std::fprintf(file_, "leak-report %zu allocations, %zu bytes still live\n", live_.size(), total);
        for (auto& [p, a] : live_) std::fprintf(file_, "leak %p %zu %s\n", p, a.bytes, a.site.c_str());
        std::fclose(file_);
    }

private:
    static Trace* open() {
        const char* path = std::getenv("FLASHPORT_MEMTRACE");
        if (!path || !*path) return nullptr;
        FILE* f = std::fopen(path, "w");
        if (!f) {
            std::fprintf(stderr, "flashport: cannot open FLASHPORT_MEMTRACE file '%s'; tracing is off\n", path);
            return nullptr;
        }
        static Trace trace(f);  // destroyed at exit, which writes the leak report
        return &trace;
    }
    explicit Trace(FILE* f) : file_(f) {}
    std::mutex mutex_;
    FILE* file_;
    std::unordered_map<void*, Allocation> live_;
};

std::atomic<LiveBytesObserver> live_bytes_observer{nullptr};

}  // namespace

LiveBytesObserver set_live_bytes_observer(LiveBytesObserver observer) {
    return live_bytes_observer.exchange(observer);
}

MemoryStats memory_stats(Device device) {
    Counters& c = counters(device);
    return {c.live.load(), c.peak.load(), c.count.load()};
}

void reset_peak(Device device) {
    Counters& c = counters(device);
    c.peak.store(c.live.load());
}

void* tracked_alloc(size_t bytes, Device device, SourceLocation site) {
    Trace* trace = Trace::get();  // opened before the first allocation so the log is complete
    void* p = nullptr;
    // The counters are int64, and rounding up below must not wrap: no real request comes near this.
    FP_CHECK(bytes <= size_t(std::numeric_limits<int64_t>::max() / 2), "cannot allocate ", bytes, " bytes on ",
             device.name(), " at ", site.file_name(), ":", site.line(), ": larger than any address space");
    if (device.is_cpu()) {
        // Rounded up to the alignment (aligned_alloc requires it); a zero-byte request still gets a
        // distinct non-null pointer, which keeps ownership simple.
        p = std::aligned_alloc(64, std::max<size_t>(64, (bytes + 63) / 64 * 64));
        FP_CHECK(p, "out of host memory allocating ", bytes, " bytes at ", site.file_name(), ":", site.line());
    } else {
        p = backend::gpu_alloc(bytes ? bytes : 1, device.index);  // throws with the driver's message on failure
    }
    const int64_t live = counters(device).add(int64_t(bytes));
    if (LiveBytesObserver observer = live_bytes_observer.load(std::memory_order_relaxed)) observer(device, live);
    if (trace) trace->on_alloc(p, bytes, device, site);
    return p;
}

void tracked_free(void* ptr, size_t bytes, Device device) {
    if (!ptr) return;
    if (Trace* trace = Trace::get()) trace->on_free(ptr, device);
    if (device.is_cpu()) {
        std::free(ptr);
    } else {
        backend::gpu_free(ptr, device.index);
    }
    const int64_t live = counters(device).sub(int64_t(bytes));
    if (LiveBytesObserver observer = live_bytes_observer.load(std::memory_order_relaxed)) observer(device, live);
}

Tensor::Tensor(DType dtype, std::initializer_list<int64_t> shape, Device device, SourceLocation site) {
    view = TensorView(nullptr, dtype, shape, device);
    buffer = Buffer(view.nbytes(), device, site);
    view.data = buffer.data();
}

}  // namespace flashport
