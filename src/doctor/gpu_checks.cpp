// gpu.visible and gpu.driver: whether this build sees a GPU, and whether the driver can run the runtime
// this build links.
#include <cstdio>

#include "doctor/checks.h"

namespace flashport::doctor {
namespace {

// The vendors' numbering (flashport/device.h, GpuVersions) as people write it.
std::string version_text(const std::string& backend, int v) {
    char buf[48];
    if (backend == "CUDA")
        std::snprintf(buf, sizeof buf, "%d.%d", v / 1000, v % 1000 / 10);
    else
        std::snprintf(buf, sizeof buf, "%d.%d.%d", v / 10000000, v / 100000 % 100, v % 100000);
    return buf;
}

// Where to look when a GPU build finds no GPU.
std::string no_gpu_fix(const Inputs& in, const Host& host) {
    if (in.runtime.backend == "CUDA")
        return host.container.empty() ? "nvidia-smi must list the GPU: install or load the NVIDIA driver"
                                      : "start the container with --gpus all (NVIDIA Container Toolkit)";
    return "rocminfo must list a GPU agent: see the rocm.* and container.* checks below";
}

}  // namespace

void gpu_checks(const Inputs& in, const Host& host, Checks& out) {
    const RuntimeFacts& rt = in.runtime;
    if (rt.backend == "none") {
        out.skip("gpu.visible",
                 "this build has no GPU backend: flashport runs on the CPU "
                 "(cmake --preset cuda or --preset hip builds one)");
        out.skip("gpu.driver", "no GPU backend in this build");
        return;
    }
    if (rt.backend == "HIP-CPU") {
        out.ok("gpu.visible", "HIP CPU Runtime: the GPU kernels run on the host (a test build)");
        out.skip("gpu.driver", "the HIP CPU Runtime needs no driver");
        return;
    }

    if (!rt.gpus.empty()) {
        std::vector<std::string> names;
        for (const GpuFacts& g : rt.gpus) names.push_back(g.description);
        out.ok("gpu.visible", std::to_string(rt.gpus.size()) + " " + rt.backend + " GPU(s): " + join(names, "; "));
    } else {
        out.add("gpu.visible", Status::FAIL,
                "the " + rt.backend + " build finds no GPU" + (rt.gpu_error.empty() ? "" : " (" + rt.gpu_error + ")"),
                no_gpu_fix(in, host));
    }

    const GpuVersions v = rt.versions;
    const std::string driver = version_text(rt.backend, v.driver), runtime = version_text(rt.backend, v.runtime);
    if (v.driver == 0) {
        out.add("gpu.driver", Status::FAIL, "no " + rt.backend + " driver answers (runtime " + runtime + " linked)",
                rt.backend == "CUDA" ? "install the NVIDIA driver for CUDA " + runtime + " or newer"
                                     : "install ROCm " + runtime + "'s amdgpu driver (amdgpu-dkms) and runtime");
    } else if (v.driver < v.runtime) {
        out.add("gpu.driver", Status::FAIL,
                "driver " + driver + " is older than the " + rt.backend + " runtime " + runtime + " this build links",
                rt.backend == "CUDA" ? "update the NVIDIA driver to one for CUDA " + runtime +
                                           ", or build with a CUDA toolkit no newer than " + driver
                                     : "install matching ROCm packages: driver and runtime from ROCm " + runtime);
    } else {
        out.ok("gpu.driver", "driver " + driver + ", runtime " + runtime + " (" + rt.backend + ")");
    }
}

}  // namespace flashport::doctor
