// The GPU runtime of a CPU-only build: no devices, and a clear error for any GPU request.
#include <cstring>

#include "core/device_backend.h"
#include "flashport/device.h"
#include "flashport/error.h"

namespace flashport {
namespace {
[[noreturn]] void no_gpu_backend() {
    fail("this build of flashport has no GPU backend; configure with --preset cuda or --preset hip");
}
}  // namespace

const char* gpu_backend_name() { return "none"; }
int gpu_device_count() { return 0; }
std::string gpu_device_description(int) { no_gpu_backend(); }
size_t gpu_driver_used_bytes(int) { no_gpu_backend(); }
std::string gpu_device_arch(int) { no_gpu_backend(); }
GpuVersions gpu_versions() { return {}; }

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) {
    FP_CHECK(dst_device.is_cpu() && src_device.is_cpu(), "cannot copy between ", src_device.name(), " and ",
             dst_device.name(), ": this build has no GPU backend");
    if (nbytes) std::memcpy(dst, src, nbytes);  // an empty copy may come with null pointers
}

void copy_bytes_async(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes, void*) {
    copy_bytes(dst, dst_device, src, src_device, nbytes);
}

void synchronize(Device device) {
    if (!device.is_cpu()) no_gpu_backend();
}

GpuStream::GpuStream(Device device) : device_(device) { no_gpu_backend(); }
GpuStream::~GpuStream() = default;
GpuStream::GpuStream(GpuStream&&) noexcept = default;
GpuStream& GpuStream::operator=(GpuStream&&) noexcept = default;
void GpuStream::synchronize() const { no_gpu_backend(); }

GpuGraph GpuGraph::capture(const GpuStream&, const std::function<void()>&) { no_gpu_backend(); }
GpuGraph::~GpuGraph() = default;
GpuGraph::GpuGraph(GpuGraph&&) noexcept = default;
GpuGraph& GpuGraph::operator=(GpuGraph&&) noexcept = default;
void GpuGraph::replay(const GpuStream&) const { no_gpu_backend(); }

namespace backend {
void* gpu_alloc(size_t, int) { no_gpu_backend(); }
void gpu_free(void*, int) {}
size_t gpu_free_bytes(int) { no_gpu_backend(); }
}  // namespace backend

}  // namespace flashport
