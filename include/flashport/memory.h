// The tracked allocator. Every buffer flashport owns comes from here, so live bytes, peak and
// allocation count per device are exact, and `bench` can report an implementation's extra memory.
// With FLASHPORT_MEMTRACE=<file>, each alloc/free is logged with size, device and call site, and a
// leak report of what is still live is written at exit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <version>
#if defined(__cpp_lib_source_location)
#include <source_location>
#endif

#include "flashport/tensor.h"

namespace flashport {

// The call site an allocation is logged with. Where the standard library has no source_location
// (clang 14 with libstdc++ 12: the fuzz build), allocations are logged at "?:0".
#if defined(__cpp_lib_source_location)
using SourceLocation = std::source_location;
#else
struct SourceLocation {
    static constexpr SourceLocation current() noexcept { return {}; }
    constexpr const char* file_name() const noexcept { return "?"; }
    constexpr unsigned line() const noexcept { return 0; }
    constexpr const char* function_name() const noexcept { return ""; }
};
#endif

struct MemoryStats {
    int64_t live_bytes = 0;
    int64_t peak_bytes = 0;   // highest live_bytes since start or the last reset_peak()
    int64_t alloc_count = 0;  // allocations since start
};

MemoryStats memory_stats(Device device = Device::cpu());
// Sets the peak to the current live bytes, so a following call's peak is its own.
void reset_peak(Device device = Device::cpu());

// Bytes that can still be allocated on `device`: on the CPU, /proc/meminfo's MemAvailable (lowered to
// what the cgroup's memory.max leaves, inside a container), INT64_MAX when neither is readable; on a
// GPU, the driver's free memory. A figure for refusing requests that can never fit, not a promise.
int64_t available_memory(Device device);
// Throws flashport::Error "<what> needs N GiB on <device>, but only M GiB is available (...)" when
// `bytes` exceeds available_memory(device): what cannot fit is refused before any work is done.
void require_memory(Device device, int64_t bytes, const std::string& what);

// Told every new live-bytes figure of a device, after each tracked allocation and free, on the thread
// that made it (so it must be cheap and thread-safe). Concurrent changes may arrive out of order; each
// figure was the live bytes at some moment. For the memory timeline (`--memory-plot`); one at a time,
// null to stop. The previous observer is returned.
using LiveBytesObserver = void (*)(Device device, int64_t live_bytes);
LiveBytesObserver set_live_bytes_observer(LiveBytesObserver observer);

// Raw tracked allocation. Prefer Buffer. CPU memory is 64-byte aligned.
void* tracked_alloc(size_t bytes, Device device, SourceLocation site = SourceLocation::current());
void tracked_free(void* ptr, size_t bytes, Device device);  // bytes as allocated

// An owning, move-only allocation from the tracked allocator.
class Buffer {
public:
    Buffer() = default;
    Buffer(size_t bytes, Device device = Device::cpu(),
           SourceLocation site = SourceLocation::current())
        : ptr_(tracked_alloc(bytes, device, site)), bytes_(bytes), device_(device) {}
    ~Buffer() { reset(); }
    Buffer(Buffer&& other) noexcept { *this = std::move(other); }
    Buffer& operator=(Buffer&& other) noexcept {
        if (this != &other) {
            reset();
            ptr_ = std::exchange(other.ptr_, nullptr);
            bytes_ = std::exchange(other.bytes_, 0);
            device_ = other.device_;
        }
        return *this;
    }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;

    void reset() {
        if (ptr_) tracked_free(ptr_, bytes_, device_);
        ptr_ = nullptr;
        bytes_ = 0;
    }
    void* data() const { return ptr_; }
    template <typename T>
    T* as() const { return static_cast<T*>(ptr_); }
    size_t size() const { return bytes_; }
    Device device() const { return device_; }

private:
    void* ptr_ = nullptr;
    size_t bytes_ = 0;
    Device device_;
};

// A contiguous tensor that owns its memory.
struct Tensor {
    Buffer buffer;
    TensorView view;

    Tensor() = default;
    Tensor(DType dtype, std::initializer_list<int64_t> shape, Device device = Device::cpu(),
           SourceLocation site = SourceLocation::current());
};

}  // namespace flashport
