// Shared timing for the CPU benchmark drivers, and the CPU's two ceilings they quote floors against.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/cpu/blas.h"
#include "flashport/memory.h"

namespace flashport::bench {

// Median wall time of `reps` calls of f, after one warm-up call.
template <typename F>
double median_seconds(int reps, F&& f) {
    std::vector<double> t;
    f();
    for (int i = 0; i < reps; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        f();
        t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

// Memory bandwidth: a memcpy of `bytes` (bytes read + written), in GB/s, median of `reps` calls.
inline double memcpy_gbps(size_t bytes, int reps) {
    Buffer src(bytes), dst(bytes);
    std::memset(src.data(), 1, bytes);
    std::memset(dst.data(), 0, bytes);
    const double s = median_seconds(reps, [&] { std::memcpy(dst.data(), src.data(), bytes); });
    return 2.0 * double(bytes) / s / 1e9;
}

// Read-only memory bandwidth: every thread XORs its share of `bytes` (a weight stream, as in
// decode), in GB/s, median of `reps` passes. Higher than memcpy's, whose writes compete with reads.
inline double read_gbps(size_t bytes, int reps) {
    Buffer src(bytes);
    std::memset(src.data(), 1, bytes);
    const auto* words = src.as<uint64_t>();
    const int64_t n = int64_t(bytes / sizeof(uint64_t));
    volatile uint64_t sink = 0;
    const double s = median_seconds(reps, [&] {
        uint64_t acc = 0;
#pragma omp parallel for reduction(^ : acc) schedule(static)
        for (int64_t i = 0; i < n; ++i) acc ^= words[i];
        sink = sink ^ acc;
    });
    return double(bytes) / s / 1e9;
}

// The fp32 GEMM rate of the BLAS flashport loads (cpu::blas()): an n×n×n sgemm, in GFLOP/s, median
// of `reps` calls.
inline double sgemm_gflops(int n, int reps) {
    const size_t elems = size_t(n) * size_t(n);
    Buffer a(sizeof(float) * elems), b(sizeof(float) * elems), c(sizeof(float) * elems);
    for (size_t i = 0; i < elems; ++i) a.as<float>()[i] = float(i % 13) * 0.1f, b.as<float>()[i] = float(i % 7) * 0.1f;
    const cpu::Blas& blas = cpu::blas();
    const double s = median_seconds(
        reps, [&] { blas.sgemm(false, n, n, n, 1.0f, a.as<float>(), n, b.as<float>(), n, 0.0f, c.as<float>(), n); });
    return 2.0 * double(n) * n * n / s / 1e9;
}

}  // namespace flashport::bench
