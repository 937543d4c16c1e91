// The real inputs: what this build's GPU runtime and CPU backend report (RuntimeFacts), and the
// environment. The only file of the doctor that asks the runtime anything; the checks read the facts.
#include <omp.h>
#include <unistd.h>

#include <sstream>

#include "backends/cpu/blas.h"
#include "backends/cpu/kernels/tile_kernels.h"
#include "doctor/doctor.h"
#include "flashport/error.h"
#include "flashport/memory.h"

// The GPU code this build holds, comma-separated (src/doctor/CMakeLists.txt passes CMake's list).
#ifndef FLASHPORT_DOCTOR_GPU_ARCHS
#define FLASHPORT_DOCTOR_GPU_ARCHS ""
#endif

extern char** environ;

namespace flashport::doctor {

RuntimeFacts probe_runtime() {
    RuntimeFacts f;
    f.backend = gpu_backend_name();
    std::stringstream archs(FLASHPORT_DOCTOR_GPU_ARCHS);
    for (std::string a; std::getline(archs, a, ',');)
        if (!a.empty()) f.build_archs.push_back(a);
    f.versions = gpu_versions();
    try {
        for (int i = 0; i < gpu_device_count(); ++i)
            f.gpus.push_back({gpu_device_description(i), gpu_device_arch(i), available_memory(Device::gpu(i))});
    } catch (const Error& e) {
        f.gpu_error = e.what();  // a driver that lists a GPU and then fails on it: reported, not fatal
    }
    try {
        f.cpu_isa = cpu::tile_kernels().isa;
    } catch (const Error& e) {
        f.cpu_isa_error = e.what();
    }
    f.cpu_threads = omp_get_max_threads();
    try {
        f.blas = cpu::blas().description;
    } catch (const Error& e) {
        f.blas_error = e.what();
    }
    return f;
}

Env current_environment() {
    Env env;
    for (char** e = environ; e && *e; ++e) {
        const std::string entry(*e);
        const size_t eq = entry.find('=');
        if (eq != std::string::npos) env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
    }
    return env;
}

}  // namespace flashport::doctor
