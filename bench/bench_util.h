// Shared timing for the CPU benchmark drivers.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

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

}  // namespace flashport::bench
