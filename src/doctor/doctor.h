// `flashport doctor`: the porting checklist (PyTorch on ROCm, Qwen on a Radeon, the same on CUDA) as
// checks of this machine and build (docs/doctor.md). Each check is one line: an id, a status, what was
// found and, unless it passed, one fix.
//
// The checks read the machine through three inputs only, so a test builds a fake machine and gets the
// same answers whoever runs it (root or not, with or without a GPU):
//   - a file root ("/" for real): /proc, /sys, /dev and /etc are read under it;
//   - the environment as a map (the CLI passes the real environ);
//   - RuntimeFacts: what the GPU runtime and the CPU backend report (probe_runtime() for real).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "flashport/device.h"

namespace flashport::doctor {

// SKIP: the check does not apply here (ROCm checks on a machine without AMD's driver; `found` says why).
enum class Status : uint8_t { OK, WARN, FAIL, SKIP };
const char* status_name(Status status);  // "ok", "warn", "fail", "skip"

struct Check {
    std::string id;     // "rocm.kfd_access"
    std::string group;  // "rocm": the id's first part
    Status status = Status::OK;
    std::string found;  // one line
    std::string fix;    // one line; empty when the check passed
};

using Env = std::map<std::string, std::string>;

struct GpuFacts {
    std::string description;            // gpu_device_description()
    std::string arch;                   // "sm_90", "gfx906"
    std::optional<int64_t> free_bytes;  // the driver's free memory
};

// What the runtime reports, or a test says it reports.
struct RuntimeFacts {
    std::string backend = "none";          // gpu_backend_name(): "CUDA", "HIP", "HIP-CPU" or "none"
    std::vector<std::string> build_archs;  // CUDA: CMAKE_CUDA_ARCHITECTURES entries ("80-real", "90"); HIP: gfx
    GpuVersions versions;
    std::vector<GpuFacts> gpus;
    std::string gpu_error;      // the driver's error while listing the GPUs, "" when none
    std::string cpu_isa;        // the CPU flash kernels' table: "avx512", "avx2", "generic"; empty on an error
    std::string cpu_isa_error;  // why no table could be chosen (FLASHPORT_CPU_ISA naming one this CPU lacks)
    int cpu_threads = 0;        // OpenMP's
    std::string blas;           // cpu::blas().description; empty when it could not be loaded
    std::string blas_error;
};

// The real runtime: this build's GPU backend, its GPUs, the CPU kernels and OpenBLAS.
RuntimeFacts probe_runtime();
// The process's environment as a map.
Env current_environment();

struct ModelQuery {
    std::filesystem::path dir;   // a Hugging Face Qwen folder (config.json + safetensors)
    std::optional<int64_t> ctx;  // KV-cache tokens; default: the model's max_position_embeddings
};

struct Inputs {
    std::filesystem::path root = "/";
    Env env;
    RuntimeFacts runtime;
    std::optional<ModelQuery> model;
};

struct Report {
    std::vector<Check> checks;  // grouped, in the order of group_titles()
    int count(Status status) const;
    // 1 when any check failed, else 0 (the CLI's exit status; usage errors are 2).
    int exit_status() const { return count(Status::FAIL) ? 1 : 0; }
};

// Runs every check. A model folder that cannot be read, or a --ctx whose cache size overflows, throws
// flashport::Error (one line): that is a bad request, not a finding about the machine.
Report run_checks(const Inputs& inputs);

// The groups in report order, with their titles: {"gpu", "GPU and driver"}, ...
const std::vector<std::pair<std::string, std::string>>& group_titles();

// One line per check under its group's title, `[fail] id: found` then `       fix: ...`, and a count.
std::string report_text(const Report& report);
// {"checks": [{"id", "group", "status", "found", "fix"}...], "ok": N, "warn": N, "fail": N, "skip": N},
// in that key order
nlohmann::ordered_json report_json(const Report& report);

}  // namespace flashport::doctor
