// The CPU's two ceilings for the perf log: fp32 GEMM rate (OpenBLAS sgemm, as flashport loads it)
// and memory bandwidth: a large memcpy (bytes read + written) and a read-only pass (decode's weight
// stream; bench/cpu_llama.py divides the weights' bytes by it). Medians of several runs.
#include <cstdio>

#include "backends/cpu/blas.h"
#include "bench_util.h"

int main() {
    using namespace flashport;
    std::printf("blas: %s\n", cpu::blas().description.c_str());

    const int n = 2048;
    std::printf("sgemm %d^3: %.1f GFLOP/s\n", n, bench::sgemm_gflops(n, 5));
    std::printf("memcpy 1 GiB: %.1f GB/s (read + write)\n", bench::memcpy_gbps(size_t(1) << 30, 5));
    std::printf("read 1 GiB: %.1f GB/s (read only)\n", bench::read_gbps(size_t(1) << 30, 5));
    return 0;
}
