// build.arch: whether this build holds code each GPU can run.
//
// CUDA (CMAKE_CUDA_ARCHITECTURES entries: "86-real" machine code, "90-virtual" PTX, "90" both, "90a" the
// arch-specific form): machine code for sm_XY runs on sm_XZ with Z >= Y (same major), except the
// arch-specific "a" forms, which run on their own arch only; PTX for compute_XY is JIT-compiled by the
// driver on any sm_AB >= XY, at a start-up cost. HIP: code objects exist per gfx target, exactly.
#include <algorithm>

#include "doctor/checks.h"

namespace flashport::doctor {
namespace {

struct CudaArch {
    int cc = 0;             // 86
    bool specific = false;  // "90a"
    bool sass = false, ptx = false;
};

std::optional<CudaArch> parse_cuda_arch(const std::string& entry) {
    CudaArch a;
    size_t i = 0;
    while (i < entry.size() && entry[i] >= '0' && entry[i] <= '9') a.cc = a.cc * 10 + (entry[i++] - '0');
    if (i == 0 || i > 4) return std::nullopt;
    if (i < entry.size() && entry[i] == 'a') {
        a.specific = true;
        ++i;
    }
    const std::string kind = entry.substr(i);
    a.sass = kind.empty() || kind == "-real";
    a.ptx = kind.empty() || kind == "-virtual";
    if (!a.sass && !a.ptx) return std::nullopt;
    return a;
}

// sm_86 -> 86; 0 when not an NVIDIA arch name.
int cc_of(const std::string& arch) {
    int cc = 0;
    if (arch.rfind("sm_", 0) != 0) return 0;
    for (size_t i = 3; i < arch.size() && i < 7 && arch[i] >= '0' && arch[i] <= '9'; ++i)
        cc = cc * 10 + (arch[i] - '0');
    return cc;
}

std::string rebuild(const std::string& preset, const std::string& variable, const std::vector<std::string>& archs) {
    return "cmake --preset " + preset + " -D" + variable + "=\"" + join(archs, ";") + "\" && cmake --build build/" +
           preset;
}

void cuda_arch_check(const Inputs& in, Checks& out) {
    const std::vector<std::string>& built = in.runtime.build_archs;
    const std::string held = "this build holds " + join(built, ";");
    for (const std::string& e : built)
        if (e == "all" || e == "all-major" || e == "native") {
            out.ok("build.arch", held + " (CMake chose the architectures)");
            return;
        }
    std::vector<std::string> lines, missing, jit;
    for (const GpuFacts& g : in.runtime.gpus) {
        const int cc = cc_of(g.arch);
        std::string sass, ptx;
        for (const std::string& e : built) {
            const std::optional<CudaArch> a = parse_cuda_arch(e);
            if (!a) continue;
            const bool runs_sass = a->specific ? a->cc == cc : a->cc / 10 == cc / 10 && a->cc <= cc;
            const bool runs_ptx = a->specific ? a->cc == cc : a->cc <= cc;
            if (a->sass && runs_sass) sass = "sm_" + std::to_string(a->cc) + (a->specific ? "a" : "");
            if (a->ptx && runs_ptx) ptx = "compute_" + std::to_string(a->cc) + (a->specific ? "a" : "");
        }
        if (!sass.empty()) {
            lines.push_back(g.arch + " runs " + sass + " machine code");
        } else if (!ptx.empty()) {
            lines.push_back(g.arch + " JIT-compiles " + ptx + " PTX at start-up (cached in ~/.nv/ComputeCache)");
            jit.push_back(std::to_string(cc) + "-real");
        } else {
            lines.push_back(g.arch + " has no code in this build");
            missing.push_back(std::to_string(cc) + "-real");
        }
    }
    const std::string found = join(lines, "; ") + "; " + held;
    std::vector<std::string> wanted = built;
    wanted.insert(wanted.end(), missing.begin(), missing.end());
    wanted.insert(wanted.end(), jit.begin(), jit.end());
    if (!missing.empty())
        out.add("build.arch", Status::FAIL, found, rebuild("cuda", "CMAKE_CUDA_ARCHITECTURES", wanted));
    else if (!jit.empty())
        out.add("build.arch", Status::WARN, found,
                "add machine code to skip the JIT: " + rebuild("cuda", "CMAKE_CUDA_ARCHITECTURES", wanted));
    else
        out.ok("build.arch", found);
}

void hip_arch_check(const Inputs& in, const Host& host, Checks& out) {
    const std::vector<std::string>& built = in.runtime.build_archs;
    // KFD's view when there is one (what the runtime will load code for); else the runtime's.
    std::vector<std::string> archs = effective_amd_archs(in, host);
    if (archs.empty())
        for (const GpuFacts& g : in.runtime.gpus) archs.push_back(g.arch);
    if (archs.empty()) {
        out.skip("build.arch", "no AMD GPU to compare with this build's targets " + join(built, ";"));
        return;
    }
    std::vector<std::string> missing;
    for (const std::string& a : archs)
        if (std::find(built.begin(), built.end(), a) == built.end() &&
            std::find(missing.begin(), missing.end(), a) == missing.end())
            missing.push_back(a);
    const std::string found = "GPU(s) " + join(archs) + "; this build's targets " + join(built, ";");
    if (missing.empty()) {
        out.ok("build.arch", found);
        return;
    }
    std::vector<std::string> wanted = built;
    wanted.insert(wanted.end(), missing.begin(), missing.end());
    out.add("build.arch", Status::FAIL, found + ": no code object for " + join(missing),
            rebuild("hip", "FLASHPORT_HIP_ARCHS", wanted));
}

}  // namespace

void build_checks(const Inputs& in, const Host& host, Checks& out) {
    const std::string& backend = in.runtime.backend;
    if (backend == "CUDA") {
        if (in.runtime.gpus.empty())
            out.skip("build.arch", "no GPU to compare with this build's " + join(in.runtime.build_archs, ";"));
        else
            cuda_arch_check(in, out);
    } else if (backend == "HIP") {
        hip_arch_check(in, host, out);
    } else {
        out.skip("build.arch", backend == "none" ? "no GPU code in this build" : "the HIP CPU Runtime runs host code");
    }
}

}  // namespace flashport::doctor
