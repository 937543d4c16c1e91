// The GPU runtime as the rest of flashport sees it: discovery, copies and synchronisation. A CPU-only
// build links the "none" implementation, which reports no devices and refuses GPU work clearly.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "flashport/tensor.h"

namespace flashport {

// "CUDA", "HIP" or "none": what this build's GPU backend is compiled as.
const char* gpu_backend_name();
// Number of usable GPUs; 0 when the build has no GPU backend or the driver finds none.
int gpu_device_count();
// A one-line description: name, compute capability / gfx arch, memory. Throws for a bad index.
std::string gpu_device_description(int index);
// Bytes the driver reports in use on the device (for peak-memory cross-checks in bench).
size_t gpu_driver_used_bytes(int index);
// The architecture the kernels are compiled for on GPU `index`: "sm_90", "gfx90a" (HIP's gcnArchName
// without its feature flags). Throws for a bad index.
std::string gpu_device_arch(int index);

// The driver's and the runtime's versions as the vendor numbers them (CUDA: 1000 * major + 10 * minor;
// HIP: 10000000 * major + 100000 * minor + patch). A driver older than the runtime this build links
// cannot run it, which `flashport doctor` reports. 0 where unknown: no GPU backend, or no driver.
struct GpuVersions {
    int driver = 0;
    int runtime = 0;
};
GpuVersions gpu_versions();

// Copies nbytes between any two devices (host<->GPU or GPU<->GPU), synchronously.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes);
// The same, enqueued on a GPU stream (a cudaStream_t / hipStream_t; null: the default stream) and
// asynchronous to the host where the driver allows it: the host buffer must stay as it is until the
// stream has passed the copy. Host-to-host copies run at once.
void copy_bytes_async(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes, void* stream);
// Waits for all work on the device.
void synchronize(Device device);

// A stream on a GPU, owned by the caller: get() is the cudaStream_t / hipStream_t that the library's
// `stream` parameters take. Work on it runs in order and asynchronously to the host.
class GpuStream {
public:
    explicit GpuStream(Device device);
    ~GpuStream();
    GpuStream(GpuStream&& other) noexcept;
    GpuStream& operator=(GpuStream&& other) noexcept;
    GpuStream(const GpuStream&) = delete;
    GpuStream& operator=(const GpuStream&) = delete;

    void* get() const { return stream_; }
    Device device() const { return device_; }
    void synchronize() const;

private:
    Device device_;
    void* stream_ = nullptr;
};

// GPU work recorded once and replayed without the host's per-launch cost (a CUDA graph / hipGraph).
// capture() runs `body`, which must only enqueue work on `stream`: no allocation, no synchronisation,
// no host reads of device results (the library's attention calls qualify; see attention.h). Replays
// reuse the recorded pointers and launch arguments, so the buffers must outlive the graph and keep
// their addresses; only their contents may change between replays.
class GpuGraph {
public:
    static GpuGraph capture(const GpuStream& stream, const std::function<void()>& body);
    ~GpuGraph();
    GpuGraph(GpuGraph&& other) noexcept;
    GpuGraph& operator=(GpuGraph&& other) noexcept;
    GpuGraph(const GpuGraph&) = delete;
    GpuGraph& operator=(const GpuGraph&) = delete;

    // Enqueues one replay on `stream` (asynchronous, like a launch).
    void replay(const GpuStream& stream) const;

private:
    GpuGraph() = default;
    void* graph_ = nullptr;  // the recorded graph
    void* exec_ = nullptr;   // its instantiation
};

}  // namespace flashport
