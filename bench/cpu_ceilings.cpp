// The CPU's two ceilings for the perf log: fp32 GEMM rate (OpenBLAS sgemm, as flashport loads it)
// and memory bandwidth (a large memcpy, bytes read + written). Medians of several runs.
#include <cstdio>
#include <cstring>

#include "backends/cpu/blas.h"
#include "bench_util.h"
#include "flashport/memory.h"

int main() {
    using namespace flashport;
    using bench::median_seconds;
    const cpu::Blas& blas = cpu::blas();
    std::printf("blas: %s\n", blas.description.c_str());

    const int n = 2048;
    Buffer a(sizeof(float) * n * n), b(sizeof(float) * n * n), c(sizeof(float) * n * n);
    for (int i = 0; i < n * n; ++i) a.as<float>()[i] = float(i % 13) * 0.1f, b.as<float>()[i] = float(i % 7) * 0.1f;
    const double gemm_s = median_seconds(5, [&] {
        blas.sgemm(false, n, n, n, 1.0f, a.as<float>(), n, b.as<float>(), n, 0.0f, c.as<float>(), n);
    });
    std::printf("sgemm %d^3: %.1f GFLOP/s\n", n, 2.0 * n * n * double(n) / gemm_s / 1e9);

    const size_t bytes = size_t(1) << 30;
    Buffer src(bytes), dst(bytes);
    std::memset(src.data(), 1, bytes);
    std::memset(dst.data(), 0, bytes);
    const double copy_s = median_seconds(5, [&] { std::memcpy(dst.data(), src.data(), bytes); });
    std::printf("memcpy 1 GiB: %.1f GB/s (read + write)\n", 2.0 * double(bytes) / copy_s / 1e9);
    return 0;
}
