// Rows for the argmax tests (CPU: test_argmax.cpp, GPU: tests/gpu/test_gpu_ops.cpp) and the ids they
// must give: random rows with a planted tie for the maximum (the first must win), a row of -inf only
// (id 0), a row holding a NaN and one holding +inf (id -1), in a view whose rows are padded (strided).
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "ops/ops_test_util.h"

namespace flashport::test {

struct ArgmaxCase {
    std::unique_ptr<HostTensor> x;  // [6, n], rows padded by 3 elements (NaN)
    std::vector<int32_t> want;
};

inline ArgmaxCase make_argmax_case(DType dt, int64_t n, Rng& rng) {
    constexpr int64_t ROWS = 6;
    ArgmaxCase c;
    c.x = std::make_unique<HostTensor>(dt, std::vector<int64_t>{ROWS, n}, 3);
    c.x->fill_normal(rng);
    const float inf = std::numeric_limits<float>::infinity();
    for (int64_t r = 0; r < ROWS; ++r) {
        const int64_t base = r * n;
        if (r == 3)
            for (int64_t i = 0; i < n; ++i) c.x->set(base + i, -inf);
        if (r < 3 && n > 1) {  // the maximum twice: at a and at b > a
            const int64_t a = rng.below(n - 1), b = a + 1 + rng.below(n - 1 - a);
            c.x->set(base + a, 100.0);
            c.x->set(base + b, 100.0);
        }
        if (r == 4) c.x->set(base + rng.below(n), std::nan(""));
        if (r == 5) c.x->set(base + rng.below(n), inf);
        int32_t best = 0;
        bool bad = false;
        for (int64_t i = 0; i < n; ++i) {
            const double v = c.x->get(base + i);
            bad |= std::isnan(v) || v == inf;
            if (v > c.x->get(base + best)) best = int32_t(i);
        }
        c.want.push_back(bad ? -1 : best);
    }
    return c;
}

}  // namespace flashport::test
