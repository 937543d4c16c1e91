// How much memory a request may still take (flashport/memory.h: available_memory, require_memory).
// Requests that can never fit (a KV pool, a benchmark's inputs) are refused with these figures
// before any work, rather than failing half-way or being killed by the OOM killer: on Linux a large
// host allocation "succeeds" and the process dies when it touches the pages.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <string>

#include "core/device_backend.h"
#include "core/host_memory.h"
#include "flashport/error.h"
#include "flashport/memory.h"

namespace flashport {
namespace {

constexpr int64_t UNKNOWN = std::numeric_limits<int64_t>::max();

int64_t meminfo_available(const std::filesystem::path& root) {
    std::ifstream f(root / "proc/meminfo");
    for (std::string key; f >> key;) {
        int64_t kb = 0;
        f >> kb;
        if (key == "MemAvailable:" && kb >= 0 && kb < UNKNOWN / 1024) return kb * 1024;
        f.ignore(256, '\n');
    }
    return UNKNOWN;
}

// cgroup v2: what memory.max leaves above memory.current ("max" or no file: no limit).
int64_t cgroup_available(const std::filesystem::path& root) {
    std::ifstream max_file(root / "sys/fs/cgroup/memory.max"), current_file(root / "sys/fs/cgroup/memory.current");
    int64_t max = 0, current = 0;
    if (!(max_file >> max) || !(current_file >> current) || max <= 0) return UNKNOWN;
    return max > current ? max - current : 0;
}

std::string gib(int64_t bytes) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / double(int64_t(1) << 30));
    return buf;
}

}  // namespace

std::optional<int64_t> host_available_memory(const std::filesystem::path& root) {
    const int64_t bytes = std::min(meminfo_available(root), cgroup_available(root));
    if (bytes == UNKNOWN) return std::nullopt;
    return bytes;
}

int64_t available_memory(Device device) {
    if (!device.is_cpu()) {
        const size_t free_bytes = backend::gpu_free_bytes(device.index);
        return free_bytes > size_t(UNKNOWN) ? UNKNOWN : int64_t(free_bytes);
    }
    return host_available_memory("/").value_or(UNKNOWN);
}

void require_memory(Device device, int64_t bytes, const std::string& what) {
    const int64_t available = available_memory(device);
    if (bytes <= available) return;
    fail(what, " needs ", gib(bytes), " (", bytes, " bytes) on ", device.name(), ", but only ", gib(available),
         " is available (", device.is_cpu() ? "MemAvailable" : "the driver's free memory",
         "); ask for less, or free memory first");
}

}  // namespace flashport
