// The host's available memory read under a file root, so `flashport doctor --root DIR` (src/doctor) sizes
// a model against a fake machine's /proc/meminfo the way available_memory(Device::cpu()) does on "/".
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

namespace flashport {

// ROOT/proc/meminfo's MemAvailable, lowered by a cgroup v2 memory.max (ROOT/sys/fs/cgroup); nullopt
// when neither can be read.
std::optional<int64_t> host_available_memory(const std::filesystem::path& root);

}  // namespace flashport
