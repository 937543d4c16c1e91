// Every op timed on its shared cases (tests/ops/<op>_case.h: the very cases, reference and tolerance
// the CPU and GPU tests run), on the CPU or the GPU, one JSON object per line:
//   {"op", "case", "dtype", "device", "impl": "flashport", "kernel", "median_us", "gbps", "gflops",
//    "floor_us", "bytes", "flops", "ok"}
// `ok`: the timed views' outputs met the case's float64 check (for the attention family, attention,
// attention_varlen and paged_attention: their harness's check, on a sample of rows for big problems,
// after the timed calls; the CPU runs only their small problems). `floor_us`: the larger of
// bytes / peak bandwidth and flops / peak rate, the time no implementation can beat. Peaks: given
// (--peak-gbps, --peak-gflops), else on the CPU measured here (a 256 MiB memcpy, read + write; sgemm
// 1024^3, as bench/cpu_ceilings.cpp), on the GPU the H200's data-sheet figures (4800 GB/s, 989 dense
// bf16 TFLOP/s). bench/gpu/ops_peers.py times PyTorch on the same cases (--list) in the same format.
//
// Timing: `iters` calls back to back, then one synchronise, host clock around the lot; the median of
// `reps` such runs, per call (the method of bench/gpu/paged_attention.cpp and its peers); `iters` is
// chosen so a run lasts about 2 ms of floor, at least one call.
//
// Usage: flashport_bench_ops [--device cpu|gpu] [--op all|linear|rms_norm|rope|swiglu|add|embedding|matmul|argmax|
//        paged_cache_write|rope_qk_cache_write|attention|attention_varlen|paged_attention]
//        [--dtype bf16|f16|f32|all] [--filter substring of op/case/dtype] [--reps 7] [--iters 0 (auto)]
//        [--peak-gbps X] [--peak-gflops Y] [--list]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "backends/cpu/blas.h"
#include "bench_util.h"
#include "flashport/device.h"
#include "flashport/error.h"
#include "flashport/memory.h"
#include "gpu/gpu_op_case.h"
#include "ops/argmax_case.h"
#include "ops/attention_case.h"
#include "ops/attention_varlen_case.h"
#include "ops/cache_write_case.h"
#include "ops/elementwise_case.h"
#include "ops/embedding_case.h"
#include "ops/linear_case.h"
#include "ops/matmul_case.h"
#include "ops/paged_attention_case.h"
#include "ops/rms_norm_case.h"
#include "ops/rope_case.h"

using namespace flashport;
using namespace flashport::test;

namespace {

struct Options {
    bool gpu = false, list = false;
    std::string op = "all", dtype = "bf16", filter;
    int reps = 7, iters = 0;
    double peak_gbps = 0, peak_gflops = 0;
};

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--list") {
            o.list = true;
            continue;
        }
        FP_CHECK(i + 1 < argc, "missing value after ", a);
        const std::string v = argv[++i];
        if (a == "--device")
            o.gpu = v == "gpu";
        else if (a == "--op")
            o.op = v;
        else if (a == "--dtype")
            o.dtype = v;
        else if (a == "--filter")
            o.filter = v;
        else if (a == "--reps")
            o.reps = std::max(1, std::atoi(v.c_str()));
        else if (a == "--iters")
            o.iters = std::atoi(v.c_str());
        else if (a == "--peak-gbps")
            o.peak_gbps = std::atof(v.c_str());
        else if (a == "--peak-gflops")
            o.peak_gflops = std::atof(v.c_str());
        else
            fail("unknown option ", a);
    }
    return o;
}

// linear's shared cases, then Qwen2.5-7B's decode projections (the perf shapes) for one token and
// batches of 8 and 32.
std::vector<OpCase> linear_bench_cases(DType dt) {
    std::vector<OpCase> cases = linear_op_cases(dt);
    for (int64_t tokens : {1, 8, 32})
        for (const LinearCase& lc : linear_qwen_cases(tokens)) {
            cases.push_back(linear_op_case(lc, dt));
            cases.back().name = "qwen7b_" + cases.back().name;
        }
    return cases;
}

std::vector<DType> dtypes_for(const Options& o) {
    if (o.dtype != "all") return {parse_dtype(o.dtype.c_str())};
    return {DType::BF16, DType::F16, DType::F32};
}

const std::map<std::string, std::vector<AttentionBenchCase> (*)(DType)>& attention_ops() {
    static const std::map<std::string, std::vector<AttentionBenchCase> (*)(DType)> ops = {
        {"attention", attention_bench_cases},
        {"attention_varlen", attention_varlen_bench_cases},
        {"paged_attention", paged_attention_bench_cases}};
    return ops;
}

std::vector<OpCase> cases_for(const Options& o) {
    const std::map<std::string, std::vector<OpCase> (*)(DType)> ops = {
        {"linear", linear_bench_cases}, {"rms_norm", rms_norm_cases}, {"rope", rope_cases},
        {"swiglu", swiglu_cases},       {"add", add_cases},           {"embedding", embedding_cases},
        {"matmul", matmul_cases},       {"argmax", argmax_cases},     {"paged_cache_write", paged_cache_cases},
        {"rope_qk_cache_write", rope_cache_cases}};
    FP_CHECK(o.op == "all" || ops.count(o.op) || attention_ops().count(o.op), "unknown op ", o.op);
    std::vector<OpCase> cases;
    for (const auto& [name, make] : ops) {
        if (o.op != "all" && o.op != name) continue;
        for (DType dt : dtypes_for(o))
            for (OpCase& c : make(dt))
                if (!o.gpu || c.on_gpu) cases.push_back(std::move(c));
    }
    return filtered(std::move(cases), o.filter);
}

// The attention family's problems (tests/ops/<op>_case.h); the CPU takes only the small ones.
std::vector<AttentionBenchCase> attention_cases_for(const Options& o) {
    std::vector<AttentionBenchCase> cases;
    for (const auto& [name, make] : attention_ops()) {
        if (o.op != "all" && o.op != name) continue;
        for (DType dt : dtypes_for(o))
            for (AttentionBenchCase& c : make(dt)) {
                const std::string full = c.op + "/" + c.name + "/" + short_name(c.dtype);
                if ((o.gpu || c.on_cpu || o.list) && full.find(o.filter) != std::string::npos)
                    cases.push_back(std::move(c));
            }
    }
    return cases;
}

// The CPU's peaks, measured: memcpy bandwidth (read + write) and the sgemm rate.
void measure_cpu_peaks(Options& o) {
    if (o.peak_gbps <= 0) o.peak_gbps = bench::memcpy_gbps(size_t(256) << 20, 5);
    if (o.peak_gflops <= 0) o.peak_gflops = bench::sgemm_gflops(1024, 3);
}

double floor_seconds(double bytes, double flops, const Options& o) {
    return std::max(bytes / (o.peak_gbps * 1e9), o.peak_gflops > 0 ? flops / (o.peak_gflops * 1e9) : 0.0);
}

// Seconds per call: `iters` calls back to back (enough to be well above the clock's and the launch
// queue's granularity, about 2 ms of floor), one synchronise; the median of `reps` runs after one
// warm-up run.
double time_calls(const std::function<void()>& call, double floor_s, const Options& o) {
    const Device device = o.gpu ? Device::gpu() : Device::cpu();
    const int iters = o.iters > 0 ? o.iters : int(std::clamp(2e-3 / std::max(floor_s, 1e-7), 1.0, 200.0));
    std::vector<double> runs;
    for (int r = 0; r <= o.reps; ++r) {
        synchronize(device);
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < iters; ++i) call();
        synchronize(device);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
        if (r > 0) runs.push_back(s);  // the first run warms up
    }
    std::sort(runs.begin(), runs.end());
    return runs[runs.size() / 2];
}

void print_result(const std::string& op, const std::string& name, DType dtype, const std::string& kernel, double median,
                  double bytes, double flops, double floor_s, bool ok, const Options& o) {
    std::printf(
        "{\"op\": \"%s\", \"case\": \"%s\", \"dtype\": \"%s\", \"device\": \"%s\", \"impl\": \"flashport\", "
        "\"kernel\": \"%s\", \"median_us\": %.3f, \"gbps\": %.2f, \"gflops\": %.2f, \"floor_us\": %.3f, "
        "\"bytes\": %.0f, \"flops\": %.0f, \"ok\": %s}\n",
        op.c_str(), name.c_str(), short_name(dtype), o.gpu ? "gpu" : "cpu", kernel.c_str(), median * 1e6,
        bytes / median / 1e9, flops / median / 1e9, floor_s * 1e6, bytes, flops, ok ? "true" : "false");
    std::fflush(stdout);
}

void print_listed(const std::string& op, const std::string& name, DType dtype, double bytes, double flops,
                  const std::string& params) {
    std::printf(
        "{\"op\": \"%s\", \"case\": \"%s\", \"dtype\": \"%s\", \"bytes\": %.0f, \"flops\": %.0f, "
        "\"params\": %s}\n",
        op.c_str(), name.c_str(), short_name(dtype), bytes, flops, params.c_str());
}

// One case: place, run once and check, then time.
void bench_case(const OpCase& c, const Options& o) {
    Rng rng(0x5eed);
    OpData d = c.make(rng);
    OpViews views = host_views(d);
    Buffer host_ws;
    std::unique_ptr<GpuOpRun> on_gpu;
    if (o.gpu) {
        on_gpu = std::make_unique<GpuOpRun>(c, d);
        views = on_gpu->views();
    }
    if (!o.gpu && c.workspace_bytes) {
        host_ws = Buffer(std::max<size_t>(c.workspace_bytes(views), 1));
        views.workspace = host_ws.data();
        views.workspace_bytes = host_ws.size();
    }
    const std::string kernel = c.run(views, nullptr);
    if (on_gpu) on_gpu->download(d);
    bool ok = ids_match(d);
    for (size_t i = 0; i < d.outputs.size(); ++i) ok &= check_output(d, i).bad == 0;
    const double floor_s = floor_seconds(c.bytes, c.flops, o);
    const double median = time_calls([&] { c.run(views, nullptr); }, floor_s, o);
    print_result(c.op, c.name, c.dtype, kernel, median, c.bytes, c.flops, floor_s, ok, o);
}

// An attention-family problem: its harness builds the inputs, runs once, lets the timer repeat the
// call, then checks the output against the float64 reference.
void bench_attention_case(const AttentionBenchCase& c, const Options& o) {
    const double floor_s = floor_seconds(c.bytes, c.flops, o);
    const CaseResult r = c.run(o.gpu ? Device::gpu() : Device::cpu(),
                               [&](const std::function<void()>& call) { return time_calls(call, floor_s, o); });
    if (!r.ok()) std::fprintf(stderr, "%s/%s: %s\n", c.op.c_str(), c.name.c_str(), r.summary().c_str());
    print_result(c.op, c.name, c.dtype, r.kernel, r.ms > 0 ? r.ms * 1e-3 : NAN, c.bytes, c.flops, floor_s, r.ok(), o);
}

}  // namespace

int main(int argc, char** argv) {
    try {
        Options o = parse(argc, argv);
        const std::vector<OpCase> cases = cases_for(o);
        const std::vector<AttentionBenchCase> attention = attention_cases_for(o);
        if (o.list) {
            for (const OpCase& c : cases) print_listed(c.op, c.name, c.dtype, c.bytes, c.flops, c.params);
            for (const AttentionBenchCase& c : attention)
                print_listed(c.op, c.name, c.dtype, c.bytes, c.flops, c.params);
            return 0;
        }
        if (o.gpu) {
            if (o.peak_gbps <= 0) o.peak_gbps = 4800;       // H200 HBM3e
            if (o.peak_gflops <= 0) o.peak_gflops = 989e3;  // H200 dense bf16/fp16 tensor cores
        } else {
            measure_cpu_peaks(o);
        }
        std::fprintf(stderr, "flashport_bench_ops: %zu cases on the %s, peaks %.0f GB/s, %.0f GFLOP/s\n",
                     cases.size() + attention.size(), o.gpu ? "GPU" : "CPU", o.peak_gbps, o.peak_gflops);
        for (const OpCase& c : cases) bench_case(c, o);
        for (const AttentionBenchCase& c : attention) bench_attention_case(c, o);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "flashport_bench_ops: %s\n", e.what());
        return 1;
    }
}
