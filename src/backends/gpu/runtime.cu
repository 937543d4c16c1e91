// The GPU runtime: device discovery, copies, synchronisation, and the device side of the tracked
// allocator (backend::gpu_alloc / gpu_free), so GPU buffers are counted like CPU ones.
#include "backends/gpu/runtime.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>

#include "core/device_backend.h"
#include "flashport/device.h"

namespace flashport {
namespace {

// Runs f with `index` as the current device and restores the caller's device afterwards, so the
// library never changes the device a host thread has chosen.
template <typename F>
auto on_device(int index, F&& f) {
    int previous = 0;
    FP_GPU_CHECK(cudaGetDevice(&previous), "querying the current GPU");
    if (previous != index) FP_GPU_CHECK(cudaSetDevice(index), "selecting GPU ", index);
    struct Restore {
        int previous, index;
        ~Restore() {
            if (previous != index) (void)cudaSetDevice(previous);
        }
    } restore{previous, index};
    return f();
}

void check_index(int index) {
    const int n = gpu_device_count();
    FP_CHECK(index >= 0 && index < n, "GPU index ", index, " is out of range: ", n, " GPU(s) present");
}

// The arch name kernels are compiled for: DeviceInfo::arch and gpu_device_arch.
std::string arch_of(const cudaDeviceProp& p) {
#if defined(FLASHPORT_HIP_CPU)
    (void)p;
    return "gfx90a";  // the emulator has both MFMA dtypes (gpu_arch.h), so it selects as a gfx90a
#elif defined(FLASHPORT_GPU_HIP)
    const std::string gcn(p.gcnArchName);
    return gcn.substr(0, gcn.find(':'));
#else
    return "sm_" + std::to_string(p.major) + std::to_string(p.minor);
#endif
}

}  // namespace

const char* gpu_backend_name() { return FLASHPORT_GPU_VENDOR; }

int gpu_device_count() {
    // No driver, no device or a driver too old all mean "no usable GPU", not an error: callers (and
    // the GPU tests) skip GPU work then.
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();  // clear the sticky error so later calls are not confused
        return 0;
    }
    return n;
}

std::string gpu_device_description(int index) {
    check_index(index);
    cudaDeviceProp p{};
    FP_GPU_CHECK(cudaGetDeviceProperties(&p, index), "reading the properties of GPU ", index);
    char line[512];
#if defined(FLASHPORT_HIP_CPU)
    std::snprintf(line, sizeof line, "HIP CPU Runtime on the host (%s), wave64, %d threads", p.name,
                  p.multiProcessorCount);
#elif defined(FLASHPORT_GPU_HIP)
    std::snprintf(line, sizeof line, "%s (%s), %d CUs, %.1f GiB", p.name, p.gcnArchName, p.multiProcessorCount,
                  double(p.totalGlobalMem) / double(1ull << 30));
#else
    std::snprintf(line, sizeof line, "%s (sm_%d%d), %d SMs, %.1f GiB", p.name, p.major, p.minor,
                  p.multiProcessorCount, double(p.totalGlobalMem) / double(1ull << 30));
#endif
    return line;
}

std::string gpu_device_arch(int index) {
    check_index(index);
    cudaDeviceProp p{};
    FP_GPU_CHECK(cudaGetDeviceProperties(&p, index), "reading the properties of GPU ", index);
    return arch_of(p);
}

GpuVersions gpu_versions() {
    // Without a driver the calls fail (or report 0): "unknown", not an error, and the sticky error is
    // cleared so later calls are not confused.
    GpuVersions v;
    if (cudaDriverGetVersion(&v.driver) != cudaSuccess) {
        v.driver = 0;
        (void)cudaGetLastError();
    }
    if (cudaRuntimeGetVersion(&v.runtime) != cudaSuccess) {
        v.runtime = 0;
        (void)cudaGetLastError();
    }
    return v;
}

namespace {

struct MemInfo {
    size_t free_bytes = 0, total = 0;
};

// The driver's free and total memory of one device (neither synchronises nor allocates).
MemInfo mem_info(int index) {
    check_index(index);
    return on_device(index, [&] {
        MemInfo m;
        FP_GPU_CHECK(cudaMemGetInfo(&m.free_bytes, &m.total), "reading the memory use of GPU ", index);
        return m;
    });
}

}  // namespace

size_t gpu_driver_used_bytes(int index) {
    const MemInfo m = mem_info(index);
    return m.total - m.free_bytes;
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) {
    if (nbytes == 0) return;
    if (dst_device.is_cpu() && src_device.is_cpu()) {
        std::memcpy(dst, src, nbytes);
        return;
    }
    // Unified addressing lets the driver infer the direction and the devices from the pointers.
    FP_GPU_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyDefault), "copying ", nbytes, " bytes from ",
                 src_device.name(), " to ", dst_device.name());
}

void copy_bytes_async(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes,
                      void* stream) {
    if (nbytes == 0) return;
    if (dst_device.is_cpu() && src_device.is_cpu()) {
        std::memcpy(dst, src, nbytes);
        return;
    }
    FP_GPU_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)), "copying ",
                 nbytes, " bytes from ", src_device.name(), " to ", dst_device.name(), " on a stream");
}

void synchronize(Device device) {
    if (device.is_cpu()) return;
    check_index(device.index);
    on_device(device.index, [&] {
        FP_GPU_CHECK(cudaDeviceSynchronize(), "synchronising ", device.name());
        return 0;
    });
}

// ---- Streams and graphs (flashport/device.h). ----

GpuStream::GpuStream(Device device) : device_(device) {
    FP_CHECK(!device.is_cpu(), "GpuStream: ", device.name(), " is not a GPU");
    check_index(device.index);
    on_device(device.index, [&] {
        cudaStream_t s = nullptr;
        FP_GPU_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "creating a stream on ", device.name());
        stream_ = s;
        return 0;
    });
}
GpuStream::~GpuStream() {
    if (stream_) (void)cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}
GpuStream::GpuStream(GpuStream&& other) noexcept : device_(other.device_), stream_(std::exchange(other.stream_, nullptr)) {}
GpuStream& GpuStream::operator=(GpuStream&& other) noexcept {
    std::swap(device_, other.device_);
    std::swap(stream_, other.stream_);
    return *this;
}
void GpuStream::synchronize() const {
    FP_GPU_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)), "synchronising a stream on ",
                 device_.name());
}

GpuGraph GpuGraph::capture(const GpuStream& stream, const std::function<void()>& body) {
    const cudaStream_t s = static_cast<cudaStream_t>(stream.get());
    // Thread-local mode: another host thread's unrelated GPU calls don't break this capture.
    FP_GPU_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "starting a graph capture");
    cudaGraph_t graph = nullptr;
    try {
        body();
    } catch (...) {
        (void)cudaStreamEndCapture(s, &graph);  // leave the stream usable; the error is body's
        if (graph) (void)cudaGraphDestroy(graph);
        (void)cudaGetLastError();  // a refused call inside the capture: not the next launch's error
        throw;
    }
    const cudaError_t ended = cudaStreamEndCapture(s, &graph);
    if (ended != cudaSuccess) (void)cudaGetLastError();
    FP_GPU_CHECK(ended, "ending a graph capture (the captured work synchronised, allocated or used another stream)");
    GpuGraph g;
    g.graph_ = graph;
    cudaGraphExec_t exec = nullptr;
    FP_GPU_CHECK(cudaGraphInstantiateWithFlags(&exec, graph, 0), "instantiating a captured graph");
    g.exec_ = exec;
    return g;
}
GpuGraph::~GpuGraph() {
    if (exec_) (void)cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
    if (graph_) (void)cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
}
GpuGraph::GpuGraph(GpuGraph&& other) noexcept
    : graph_(std::exchange(other.graph_, nullptr)), exec_(std::exchange(other.exec_, nullptr)) {}
GpuGraph& GpuGraph::operator=(GpuGraph&& other) noexcept {
    std::swap(graph_, other.graph_);
    std::swap(exec_, other.exec_);
    return *this;
}
void GpuGraph::replay(const GpuStream& stream) const {
    FP_GPU_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), static_cast<cudaStream_t>(stream.get())),
                 "replaying a graph");
}

namespace backend {

void* gpu_alloc(size_t bytes, int device_index) {
    check_index(device_index);
    return on_device(device_index, [&] {
        void* p = nullptr;
        cudaError_t err = cudaMalloc(&p, bytes);
        if (err == cudaSuccess && !p && bytes > 0) err = cudaErrorMemoryAllocation;  // HIP-CPU: malloc's null
        if (err != cudaSuccess) {
            // Clear the error, or the next launch check would report this allocation's failure.
            (void)cudaGetLastError();
            fail("allocating ", bytes, " bytes on gpu:", device_index, ": ", cudaGetErrorName(err), " (",
                 cudaGetErrorString(err), ")");
        }
        return p;
    });
}

size_t gpu_free_bytes(int device_index) {
    return mem_info(device_index).free_bytes;
}

void gpu_free(void* ptr, int device_index) {
    // Called from destructors: report, never throw.
    const cudaError_t err = cudaFree(ptr);
    if (err != cudaSuccess)
        std::fprintf(stderr, "flashport: freeing %p on gpu:%d failed: %s\n", ptr, device_index,
                     cudaGetErrorString(err));
}

}  // namespace backend

namespace gpu {

void check_current_device(const char* op, Device device) {
    const int n = gpu_device_count();
    FP_CHECK(device.index >= 0 && device.index < n, op, ": ", device.name(), " does not exist (", n,
             " GPU(s) present)");
    int current = 0;
    FP_GPU_CHECK(cudaGetDevice(&current), "querying the current GPU");
    FP_CHECK(current == device.index, op, ": the tensors are on ", device.name(), " but the current GPU is gpu:",
             current, "; select it with cudaSetDevice/hipSetDevice first");
}

const DeviceInfo& current_device_info() {
    constexpr int MAX_DEVICES = 16;
    static DeviceInfo infos[MAX_DEVICES];
    static std::once_flag once[MAX_DEVICES];
    int dev = 0;
    FP_GPU_CHECK(cudaGetDevice(&dev), "querying the current GPU");
    FP_CHECK(dev >= 0 && dev < MAX_DEVICES, "GPU index ", dev, " beyond the ", MAX_DEVICES, " supported");
    std::call_once(once[dev], [&] {
        DeviceInfo& d = infos[dev];
        FP_GPU_CHECK(cudaDeviceGetAttribute(&d.sm_count, cudaDevAttrMultiProcessorCount, dev), "reading SM count");
        FP_GPU_CHECK(cudaDeviceGetAttribute(&d.max_smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev),
                     "reading the shared-memory limit");
        cudaDeviceProp p{};
        FP_GPU_CHECK(cudaGetDeviceProperties(&p, dev), "reading the properties of GPU ", dev);
        d.l2_bytes = p.l2CacheSize;
        d.major = p.major;
        d.minor = p.minor;
        d.arch = arch_of(p);
        d.matrix_cores = matrix_cores_of_arch(d.arch);  // NONE for NVIDIA's sm_ names
    });
    return infos[dev];
}

namespace {
// The current device's default pool keeps up to POOL_KEEP_BYTES across synchronisations (StreamBuffer).
// A hint, set once per device outside any stream capture (where a pool call may be refused; the next
// uncaptured call sets it) and never an error: without it buffers are only slower to come by. The HIP
// CPU Runtime has no pools (its hipMallocAsync is hipMalloc).
void keep_pool_memory([[maybe_unused]] cudaStream_t stream) {
#if !defined(FLASHPORT_HIP_CPU)
    constexpr int MAX_DEVICES = 16;
    static std::atomic<bool> kept[MAX_DEVICES];
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= MAX_DEVICES || kept[dev].load()) return;
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess || capture != cudaStreamCaptureStatusNone) return;
    cudaMemPool_t pool{};
    uint64_t keep = StreamBuffer::POOL_KEEP_BYTES;
    if (cudaDeviceGetDefaultMemPool(&pool, dev) == cudaSuccess &&
        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) == cudaSuccess)
        kept[dev].store(true);
    else
        (void)cudaGetLastError();  // the hint failed: clear its (non-sticky) error and go on
#endif
}
}  // namespace

StreamBuffer::StreamBuffer(size_t bytes, cudaStream_t stream, const char* what) : stream_(stream) {
    keep_pool_memory(stream);
    FP_GPU_CHECK(cudaMallocAsync(&p_, bytes, stream), what, ": a ", bytes, "-byte stream-ordered buffer");
}

StreamBuffer::~StreamBuffer() {
    if (p_) (void)cudaFreeAsync(p_, stream_);
}

namespace {
std::atomic<bool>& dependent_launches_wanted() {
    static std::atomic<bool> on{[] {
        const char* env = std::getenv("FLASHPORT_GPU_PDL");
        return !(env && std::strcmp(env, "0") == 0);
    }()};
    return on;
}
}  // namespace

bool dependent_launches() {
#if defined(FLASHPORT_GPU_CUDA)
    return dependent_launches_wanted().load(std::memory_order_relaxed) && current_device_info().major >= 9;
#else
    return false;  // HIP has no programmatic dependent launch: launch_dependent launches plainly
#endif
}
void set_dependent_launches(bool on) { dependent_launches_wanted().store(on); }

}  // namespace gpu
}  // namespace flashport
