// embedding (flashport/ops.h): the cases the CPU test (test_elementwise.cpp), the GPU test
// (tests/gpu/test_gpu_ops.cpp) and the bench (bench/ops.cpp) run. Reference: the table's rows, copied
// (converted to out's dtype when it differs: exact to fp32, one rounding to another 16-bit type);
// tolerance: bit-identical.
#pragma once

#include <string>
#include <vector>

#include "flashport/ops.h"
#include "ops/op_case.h"

namespace flashport::test {

// out [tokens, hidden] (out_dt, rows padded by 2) = table [vocab, hidden] (dt, padded by 4)[ids]; the
// ids repeat, and include the first and last rows.
inline OpCase embedding_case(DType dt, DType out_dt, int64_t vocab, int64_t hidden, int64_t tokens, bool wide) {
    OpCase c;
    c.op = "embedding";
    c.name = std::to_string(tokens) + "of" + std::to_string(vocab) + "x" + std::to_string(hidden) + "_to_" +
             short_name(out_dt) + (wide ? "_i64" : "_i32");
    c.dtype = dt;
    c.params = "{\"vocab\": " + std::to_string(vocab) + ", \"hidden\": " + std::to_string(hidden) +
               ", \"tokens\": " + std::to_string(tokens) + ", \"out_dtype\": \"" + short_name(out_dt) + "\"}";
    c.bytes = double(tokens * hidden) * double(dtype_size(dt) + dtype_size(out_dt)) + double(tokens) * (wide ? 8 : 4);
    c.make = [=](Rng& rng) {
        OpData d;
        HostTensor& table = d.add(dt, {vocab, hidden}, 4);
        table.fill_normal(rng);
        d.add(out_dt, {tokens, hidden}, 2);
        d.outputs = {1};
        std::vector<int64_t> ids(static_cast<size_t>(tokens));
        for (auto& id : ids) id = rng.below(vocab);
        ids.front() = 0;
        ids.back() = vocab - 1;
        if (tokens > 2) ids[1] = ids.back();
        std::vector<double> ref(size_t(tokens * hidden));
        for (int64_t t = 0; t < tokens; ++t)
            for (int64_t j = 0; j < hidden; ++j)
                ref[size_t(t * hidden + j)] = round_as(out_dt, table.get(ids[size_t(t)] * hidden + j));
        d.set_index(std::move(ids), wide);
        d.tol = {std::vector<double>(ref.size(), 0.0)};
        d.ref = {std::move(ref)};
        d.min_exact = 1.0;
        return d;
    };
    c.run = [](const OpViews& v, void* stream) {
        embedding(v.t[1], v.t[0], v.index, stream);
        return std::string("embedding");
    };
    return c;
}

// A small vocabulary and Qwen's hidden sizes, to the table's dtype and to fp32, int32 and int64 ids.
inline std::vector<OpCase> embedding_cases(DType dt) {
    std::vector<OpCase> cases;
    int i = 0;
    for (auto [vocab, hidden, tokens] :
         {std::tuple<int64_t, int64_t, int64_t>{37, 23, 7}, {1000, 64, 97}, {1000, 896, 1}, {1000, 40, 1025}})
        for (DType out_dt : {dt, DType::F32})
            cases.push_back(embedding_case(dt, out_dt, vocab, hidden, tokens, ++i % 2));
    return cases;
}

}  // namespace flashport::test
