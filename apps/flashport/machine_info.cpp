#include "machine_info.h"

#include <omp.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "backends/cpu/blas.h"
#include "backends/cpu/kernels/tile_kernels.h"
#include "flashport/device.h"
#include "flashport/error.h"

namespace flashport::app {
namespace {

std::string cpu_model() {
    std::ifstream f("/proc/cpuinfo");
    for (std::string line; std::getline(f, line);)
        if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
    return "unknown CPU";
}

std::string blas_description() {
    try {
        return cpu::blas().description;
    } catch (const Error& e) {
        return std::string("not available: ") + e.what();
    }
}

}  // namespace

nlohmann::json machine_info_json(Device device) {
    nlohmann::json j{{"device", device.name()},
                     {"cpu", cpu_model()},
                     {"cpu_threads", omp_get_max_threads()},
                     {"cpu_kernels", cpu::tile_kernels().isa},
                     {"blas", blas_description()},
                     {"gpu_backend", gpu_backend_name()}};
    for (int i = 0; i < gpu_device_count(); ++i) j["gpus"].push_back(gpu_device_description(i));
    return j;
}

void print_machine_info(Device device) {
    const nlohmann::json j = machine_info_json(device);
    std::printf("device: %s\n", device.name().c_str());
    std::printf("cpu:    %s, %d threads, flash kernels: %s\n", j["cpu"].get<std::string>().c_str(),
                j["cpu_threads"].get<int>(), j["cpu_kernels"].get<std::string>().c_str());
    std::printf("blas:   %s\n", j["blas"].get<std::string>().c_str());
    std::printf("gpu:    backend %s", gpu_backend_name());
    if (j.contains("gpus"))
        for (const auto& g : j["gpus"]) std::printf("; %s", g.get<std::string>().c_str());
    else
        std::printf(", no device found");
    std::printf("\n");
}

}  // namespace flashport::app
