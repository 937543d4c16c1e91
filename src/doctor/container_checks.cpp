// container.*: whether this runs in a container, whether /dev/shm is big enough for NCCL/RCCL's
// shared-memory transport (Docker's default is 64 MiB), and whether the GPU device nodes were passed in.
#include <algorithm>
#include <cctype>
#include <sstream>

#include "doctor/checks.h"

namespace flashport::doctor {
namespace {

// Below this NCCL/RCCL and PyTorch's DataLoader workers run out of shared memory ("Bus error", "NCCL
// WARN Error: failed to extend /dev/shm") once a few GPUs talk; 8 GiB is the usual recommendation.
constexpr int64_t MIN_SHM = int64_t(1) << 30;

std::vector<std::string> words(const std::string& line) {
    std::vector<std::string> w;
    std::stringstream in(line);
    for (std::string s; in >> s;) w.push_back(s);
    return w;
}

// The options of the mount visible at /dev/shm (the last one listed: a later mount hides an earlier).
std::optional<std::string> shm_options(const Host& host) {
    std::optional<std::string> options;
    if (const auto mountinfo = host.read("proc/self/mountinfo")) {
        std::stringstream in(*mountinfo);
        for (std::string line; std::getline(in, line);) {
            const std::vector<std::string> w = words(line);
            const auto dash = std::find(w.begin(), w.end(), "-");
            // id parent dev root mount-point options ... - fstype source super-options
            if (w.size() > 4 && w[4] == "/dev/shm" && dash != w.end() && w.end() - dash >= 4) options = *(dash + 3);
        }
        return options ? options : std::optional<std::string>("");
    }
    if (const auto mounts = host.read("proc/mounts")) {
        std::stringstream in(*mounts);
        for (std::string line; std::getline(in, line);) {
            const std::vector<std::string> w = words(line);  // source mount-point fstype options 0 0
            if (w.size() > 3 && w[1] == "/dev/shm") options = w[3];
        }
        return options ? options : std::optional<std::string>("");
    }
    return std::nullopt;
}

// size=65536k (what mount prints), 64m, 8g, bytes, or a percentage of RAM ("" then).
std::optional<int64_t> size_option(const std::string& options) {
    std::stringstream in(options);
    for (std::string opt; std::getline(in, opt, ',');) {
        if (opt.rfind("size=", 0) != 0) continue;
        const std::string v = opt.substr(5);
        size_t used = 0;
        long long n = 0;
        try {
            n = std::stoll(v, &used);
        } catch (const std::exception&) {
            return std::nullopt;
        }
        const std::string unit = v.substr(used);
        const char u = unit.size() == 1 ? char(std::tolower(static_cast<unsigned char>(unit[0]))) : '\0';
        if (n < 0 || (!unit.empty() && u != 'k' && u != 'm' && u != 'g')) return std::nullopt;  // "50%"
        const int shift = u == 'k' ? 10 : u == 'm' ? 20 : u == 'g' ? 30 : 0;
        if (n > (int64_t(1) << (62 - shift))) return std::nullopt;
        return int64_t(n) << shift;
    }
    return std::nullopt;
}

void shm_check(const Host& host, Checks& out) {
    const std::optional<std::string> options = shm_options(host);
    const std::string fix = host.container.empty() ? "sudo mount -o remount,size=8G /dev/shm"
                                                   : "start the container with --shm-size=8g or --ipc=host";
    if (!options) {
        out.skip("container.shm", "cannot read /proc/self/mountinfo or /proc/mounts");
    } else if (options->empty()) {
        out.add("container.shm", Status::WARN, "no tmpfs mounted on /dev/shm", fix);
    } else if (const std::optional<int64_t> size = size_option(*options)) {
        const std::string found = "/dev/shm is " + size_text(*size);
        if (*size < MIN_SHM)
            out.add("container.shm", Status::WARN, found + ": too small for NCCL/RCCL between GPUs", fix);
        else
            out.ok("container.shm", found);
    } else {
        out.ok("container.shm", "/dev/shm: " + *options + " (a share of RAM)");
    }
}

void devices_check(const Inputs& in, const Host& host, Checks& out) {
    if (host.container.empty()) {
        out.skip("container.gpu_devices", "not in a container");
        return;
    }
    const bool amd = host.kfd_topology || host.amd_drm || in.runtime.backend == "HIP";
    const bool nvidia = host.nvidia_driver || in.runtime.backend == "CUDA";
    if (amd) {
        std::vector<std::string> missing, flags;
        if (!host.exists("dev/kfd")) missing.push_back("/dev/kfd");
        if (!host.exists("dev/dri")) missing.push_back("/dev/dri");
        for (const std::string& m : missing) flags.push_back("--device=" + m);
        if (!(host.identity.known && host.identity.uid == 0))
            for (const char* g : {"video", "render"}) {
                const auto gid = host.group_id(g);
                if (!gid || !host.in_group(*gid)) flags.push_back(std::string("--group-add ") + g);
            }
        if (missing.empty())
            out.ok("container.gpu_devices", "/dev/kfd and /dev/dri were passed in");
        else
            out.add("container.gpu_devices", Status::FAIL,
                    "the host has an AMD GPU but the container lacks " + join(missing, " and "),
                    "start the container with " + join(flags, " "));
    } else if (nvidia) {
        if (host.nvidia_nodes.empty())
            out.add("container.gpu_devices", Status::FAIL, "no /dev/nvidia* in the container",
                    "start the container with --gpus all (NVIDIA Container Toolkit)");
        else
            out.ok("container.gpu_devices", join(host.nvidia_nodes) + " passed in");
    } else {
        out.skip("container.gpu_devices", "no GPU driver in sight (no KFD, no AMD or NVIDIA card)");
    }
}

}  // namespace

void container_checks(const Inputs& in, const Host& host, Checks& out) {
    out.ok("container.detected", host.container.empty() ? "not in a container" : host.container);
    shm_check(host, out);
    devices_check(in, host, out);
}

}  // namespace flashport::doctor
