// One case description per op, run by the CPU test (tests/ops), the GPU test (tests/gpu) and the
// bench (bench/ops.cpp) alike, as ggml's test-backend-ops does: a case names its shape and
// parameters, makes random operands with their float64 reference and a tolerance per output element,
// and runs the op on views that may live on any device. Each op family has its own file
// (rms_norm_case.h, rope_case.h, elementwise_case.h, embedding_case.h, matmul_case.h, linear_case.h,
// argmax_case.h) with a `<op>_cases(dtype)` list; a runner only moves bytes and compares.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "flashport/memory.h"
#include "flashport/tensor.h"
#include "ops/ops_test_util.h"

namespace flashport::test {

// A case's operands on the host, outputs included (NaN-poisoned), and what the outputs must hold.
struct OpData {
    std::vector<std::unique_ptr<HostTensor>> tensors;  // in the order the case's run() takes them
    std::vector<size_t> outputs;                       // indices into tensors of what the op writes
    std::vector<int64_t> index;                        // positions or token ids, when the op takes them
    bool wide_index = true;                            // index passed as int64 (else as index32)
    std::vector<int32_t> index32;                      // the same values, when !wide_index
    std::vector<std::vector<double>> ref;              // per output: float64 reference, row-major
    std::vector<std::vector<double>> tol;              // per output: allowed |out - ref| per element
    // 16-bit outputs of ops whose reference rounds where the kernel rounds: at least this share must
    // be bit-identical to the reference (a moved rounding point leaves far fewer); 0: tolerance only.
    double min_exact = 0.0;
    // An int32 output (argmax's ids), poisoned, and the values it must hold exactly; empty for ops
    // whose outputs are all tensors. Ids are not a float tensor: no tolerance, no padding.
    std::vector<int32_t> ids, want_ids;

    void set_index(std::vector<int64_t> values, bool wide) {
        index = std::move(values);
        wide_index = wide;
        index32.assign(index.begin(), index.end());
    }
    HostTensor& add(DType dt, std::vector<int64_t> shape, int64_t pad = 0) {
        tensors.push_back(std::make_unique<HostTensor>(dt, std::move(shape), pad));
        return *tensors.back();
    }
};

// The views one run takes: the case's tensors (on the host or copied to a device) and its index.
struct OpViews {
    std::vector<TensorView> t;
    IndexView index;
    int32_t* ids = nullptr;     // OpData::ids, on the views' device
    void* workspace = nullptr;  // on the views' device, OpCase::workspace_bytes long
    size_t workspace_bytes = 0;
};

struct OpCase {
    std::string op, name;  // op: the library's name for it ("rms_norm"); name: shape and parameters
    DType dtype;
    double bytes = 0, flops = 0;  // moved and computed by one call (the bench's floors)
    std::string params;           // shape and parameters as a JSON object, for a peer's script (bench/gpu/ops_peers.py)
    bool on_gpu = true;           // false: a CPU-only form (e.g. x and weight of two dtypes)
    std::function<OpData(Rng&)> make;                              // operands, reference and tolerances
    std::function<std::string(const OpViews&, void* stream)> run;  // the op; returns the kernel name
    std::function<size_t(const OpViews&)> workspace_bytes;         // null: the op takes no workspace
    std::string full_name() const { return op + "/" + name + "/" + short_name(dtype); }
};

// A shape's dimensions joined by `sep`: "3x4x19" for a case name, "3, 4, 19" for a JSON list.
inline std::string join_dims(const std::vector<int64_t>& shape, const char* sep) {
    std::string s;
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i) s += sep;
        s += std::to_string(shape[i]);
    }
    return s;
}

// Tolerance per element: `ulps` units of dtype at the reference value, plus rel_f32 · |ref| for fp32
// outputs, plus `extra` (when given, per element).
inline std::vector<double> ulp_tolerance(const std::vector<double>& ref, DType dt, double ulps, double rel_f32 = 0.0,
                                         const std::vector<double>* extra = nullptr) {
    std::vector<double> tol(ref.size());
    for (size_t i = 0; i < ref.size(); ++i)
        tol[i] = ulps * ulp(dt, ref[i]) + (dt == DType::F32 ? rel_f32 * std::fabs(ref[i]) : 0.0) +
                 (extra ? (*extra)[i] : 0.0);
    return tol;
}

// Views of the host tensors themselves (the CPU run).
inline OpViews host_views(const OpData& d) {
    OpViews v;
    for (const auto& t : d.tensors) v.t.push_back(t->view);
    v.index = d.wide_index ? IndexView(d.index.data(), int64_t(d.index.size()))
                           : IndexView(d.index32.data(), int64_t(d.index32.size()));
    v.ids = const_cast<int32_t*>(d.ids.data());  // the op writes them, as it writes the tensors' data
    return v;
}

// Output `o` of d (after the run) against its reference: out-of-tolerance and non-finite elements,
// exact matches, and whether the padding around it is still poison.
inline Compare check_output(const OpData& d, size_t o) {
    const HostTensor& out = *d.tensors[d.outputs[o]];
    Compare c = compare(out, d.ref[o], 0.0, 0.0, &d.tol[o]);
    if (!out.padding_intact() && c.bad++ == 0) c.first_bad = "the op wrote outside the view";
    return c;
}

// Whether d's int32 output holds exactly what it must (true for ops without one).
inline bool ids_match(const OpData& d) { return d.ids == d.want_ids; }

// Every output of d against its reference, as gtest expectations.
inline void expect_outputs_match(const OpData& d) {
    EXPECT_EQ(d.ids, d.want_ids) << "the int32 output";
    for (size_t o = 0; o < d.outputs.size(); ++o) {
        SCOPED_TRACE("output " + std::to_string(o));
        const bool wide = d.tensors[d.outputs[o]]->view.dtype == DType::F32;  // fp32: tolerance only
        EXPECT_TRUE(close_enough(check_output(d, o), wide ? 0.0 : d.min_exact));
    }
}

// Runs each case on host views and checks every output (the CPU tests).
inline void expect_cases_on_host(const std::vector<OpCase>& cases, Rng& rng) {
    for (const OpCase& c : cases) {
        SCOPED_TRACE(c.full_name());
        OpData d = c.make(rng);
        OpViews v = host_views(d);
        Buffer ws(c.workspace_bytes ? std::max<size_t>(c.workspace_bytes(v), 1) : 1);
        v.workspace = ws.data();
        v.workspace_bytes = ws.size();
        EXPECT_FALSE(c.run(v, nullptr).empty());
        expect_outputs_match(d);
    }
}

// Keeps the cases whose full name contains `filter` (all of them for an empty filter).
inline std::vector<OpCase> filtered(std::vector<OpCase> cases, const std::string& filter) {
    if (filter.empty()) return cases;
    cases.erase(std::remove_if(cases.begin(), cases.end(),
                               [&](const OpCase& c) { return c.full_name().find(filter) == std::string::npos; }),
                cases.end());
    return cases;
}

}  // namespace flashport::test
