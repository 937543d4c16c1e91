// argmax (flashport/ops.h): the cases the CPU test (test_argmax.cpp), the GPU test
// (tests/gpu/test_gpu_ops.cpp) and the bench (bench/ops.cpp) run. Output: int32 ids (OpData::ids),
// which must be exactly the reference's: random rows with a planted tie for the maximum (the first
// must win, as torch.argmax), a row of -inf only (id 0), a row holding a NaN and one holding +inf
// (id -1), the maximum last only, and tied first and last (the first and last chunk of a GPU row
// split over blocks), in a view whose rows are padded (strided). With a workspace
// (argmax_workspace_bytes) unless told not to: on a GPU, batches of <= 64 rows then take the
// multi-block path, which rows = 1 and 8 on Qwen's vocabulary time in the bench.
#pragma once

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "flashport/ops.h"
#include "ops/op_case.h"

namespace flashport::test {

// ids [rows] = argmax over x [rows, n] (rows padded by 3 elements).
inline OpCase argmax_case(DType dt, int64_t n, int64_t rows = 6, bool workspace = true) {
    const int64_t ROWS = rows;
    OpCase c;
    c.op = "argmax";
    c.name = std::to_string(ROWS) + "x" + std::to_string(n) + (workspace ? "" : "_no_workspace");
    c.dtype = dt;
    c.params = "{\"rows\": " + std::to_string(ROWS) + ", \"n\": " + std::to_string(n) + "}";
    c.bytes = double(ROWS * n) * double(dtype_size(dt)) + double(ROWS) * 4;
    c.make = [=](Rng& rng) {
        OpData d;
        HostTensor& x = d.add(dt, {ROWS, n}, 3);
        x.fill_normal(rng);
        const float inf = std::numeric_limits<float>::infinity();
        for (int64_t r = 0; r < ROWS; ++r) {
            const int64_t base = r * n;
            if (r == 3)
                for (int64_t i = 0; i < n; ++i) x.set(base + i, -inf);
            if (r < 3 && n > 1) {  // the maximum twice: at a and at b > a
                const int64_t a = rng.below(n - 1), b = a + 1 + rng.below(n - 1 - a);
                x.set(base + a, 100.0);
                x.set(base + b, 100.0);
            }
            if (r == 4) x.set(base + rng.below(n), std::nan(""));
            if (r == 5) x.set(base + rng.below(n), inf);
            if (r == 6) x.set(base + n - 1, 100.0);
            if (r == 7) {
                x.set(base, 100.0);
                x.set(base + n - 1, 100.0);
            }
            int32_t best = 0;
            bool bad = false;
            for (int64_t i = 0; i < n; ++i) {
                const double v = x.get(base + i);
                bad |= std::isnan(v) || v == inf;
                if (v > x.get(base + best)) best = int32_t(i);
            }
            d.want_ids.push_back(bad ? -1 : best);
        }
        d.ids.assign(size_t(ROWS), -7);  // poison: every row must be written
        return d;
    };
    if (workspace) c.workspace_bytes = [](const OpViews& v) { return argmax_workspace_bytes(v.t[0]); };
    c.run = [workspace](const OpViews& v, void* stream) {
        if (workspace)
            argmax(v.ids, v.t[0], v.workspace, v.workspace_bytes, stream);
        else
            argmax(v.ids, v.t[0], stream);
        return std::string("argmax");
    };
    return c;
}

// One entry, odd lengths, and Qwen's 152064-entry vocabulary (greedy decoding's row) at batch 1, 6
// and 8 (the GPU's multi-block path: 2049 is 3 chunks of 683, 5001 a shorter last chunk), 65 rows
// (past its 64), and without a workspace (one block per row).
inline std::vector<OpCase> argmax_cases(DType dt) {
    std::vector<OpCase> cases;
    for (int64_t n : {1, 7, 97, 1025, 2049, 5001, 152064}) cases.push_back(argmax_case(dt, n));
    for (int64_t rows : {1, 8}) cases.push_back(argmax_case(dt, 152064, rows));
    cases.push_back(argmax_case(dt, 5001, 65));
    cases.push_back(argmax_case(dt, 5001, 8, false));
    cases.push_back(argmax_case(dt, 152064, 1, false));
    return cases;
}

}  // namespace flashport::test
