// cpu.*: the CPU (ROOT/proc/cpuinfo), the flash kernels' ISA, the thread count and the BLAS core, which
// together set the CPU engine's speed.
#include <sstream>

#include "doctor/checks.h"

namespace flashport::doctor {

void cpu_checks(const Inputs& in, const Host& host, Checks& out) {
    std::string model;
    int processors = 0;
    if (const auto cpuinfo = host.read("proc/cpuinfo")) {
        std::stringstream lines(*cpuinfo);
        for (std::string line; std::getline(lines, line);) {
            if (line.rfind("processor", 0) == 0) ++processors;
            if (model.empty() && line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos)
                model = line.substr(line.find(':') + 1);
        }
    }
    model.erase(0, model.find_first_not_of(' '));
    out.ok("cpu.model", (model.empty() ? "unknown (no model name in /proc/cpuinfo)" : model) +
                            (processors ? ", " + std::to_string(processors) + " logical CPUs" : ""));

    const RuntimeFacts& rt = in.runtime;
    const std::optional<std::string> isa_env = env_value(in, "FLASHPORT_CPU_ISA");
    if (rt.cpu_isa.empty())
        out.add("cpu.isa", Status::FAIL, "no flash kernel table: " + rt.cpu_isa_error,
                "unset FLASHPORT_CPU_ISA, or name a table this CPU runs (generic, avx2, avx512)");
    else if (rt.cpu_isa == "generic")
        out.add("cpu.isa", Status::WARN, "flash kernels: generic (no AVX2 path)",
                isa_env ? "unset FLASHPORT_CPU_ISA, which picks the lower table"
                        : "this CPU lacks AVX2+FMA: an x86-64 CPU with them runs the CPU kernels several times faster");
    else
        out.ok("cpu.isa", "flash kernels: " + rt.cpu_isa + (isa_env ? " (FLASHPORT_CPU_ISA=" + *isa_env + ")" : ""));

    const std::optional<std::string> omp = env_value(in, "OMP_NUM_THREADS");
    const std::string threads =
        std::to_string(rt.cpu_threads) + " OpenMP threads" + (omp ? " (OMP_NUM_THREADS=" + *omp + ")" : "");
    if (processors && rt.cpu_threads > processors)
        out.add("cpu.threads", Status::WARN, threads + " on " + std::to_string(processors) + " logical CPUs",
                "set OMP_NUM_THREADS=" + std::to_string(processors) +
                    " or fewer: oversubscribed threads wait on each other");
    else
        out.ok("cpu.threads", threads);

    if (rt.blas.empty())
        out.add("cpu.blas", Status::WARN, "OpenBLAS not loaded: " + rt.blas_error,
                "install OpenBLAS (scripts/install-deps.sh; Debian: libopenblas0-pthread): prefill's GEMMs use it");
    else
        out.ok("cpu.blas", rt.blas);
}

}  // namespace flashport::doctor
