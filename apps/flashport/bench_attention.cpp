#include "bench_attention.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

#include "backends/cpu/attention_cpu.h"
#include "backends/cpu/blas.h"
#include "flag_ranges.h"
#include "flashport/attention.h"
#include "flashport/checked.h"
#include "flashport/device.h"
#include "flashport/error.h"
#include "flashport/memory.h"
#include "machine_info.h"
#include "output_file.h"
#include "plot.h"

namespace flashport::app {
namespace {

// The CPU default keeps the reference shape's length and head dim but shrinks batch × heads from
// 8 × 16 to 1 × 4, so naive and flash each take well under a second on a 2-core machine.
constexpr int64_t CPU_DEFAULT_BATCH = 1, CPU_DEFAULT_HEADS = 4;
constexpr int ERROR_SAMPLE_ROWS = 192;  // float64 reference rows per measurement

struct Problem {
    AttentionShape shape;
    DType dtype;
    Device device;
    bool causal;
};

double flops(const Problem& p) {
    const AttentionShape& s = p.shape;
    const double f = 4.0 * double(s.batch) * double(s.n_heads) * double(s.q_len) * double(s.kv_len) * double(s.head_dim);
    return p.causal ? f / 2 : f;
}

// Inputs live on the benchmark device; a host copy is kept for the float64 reference.
struct Inputs {
    Tensor q, k, v;              // on the device
    Tensor q_host, k_host, v_host;
};

Tensor random_tensor(DType dtype, std::initializer_list<int64_t> shape, std::mt19937& rng) {
    Tensor t(dtype, shape);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const size_t elem = dtype_size(dtype);
    for (int64_t i = 0; i < t.view.numel(); ++i)
        store_from_float(static_cast<char*>(t.view.data) + size_t(i) * elem, dtype, normal(rng));
    return t;
}

Tensor to_device(const Tensor& host, Device device) {
    if (device.is_cpu()) return {};
    const TensorView& v = host.view;
    Tensor t(v.dtype, {v.shape[0], v.shape[1], v.shape[2], v.shape[3]}, device);
    copy_bytes(t.view.data, device, v.data, Device::cpu(), v.nbytes());
    return t;
}

Inputs make_inputs(const Problem& p, uint32_t seed) {
    const AttentionShape& s = p.shape;
    std::mt19937 rng(seed);
    Inputs in;
    in.q_host = random_tensor(p.dtype, {s.batch, s.q_len, s.n_heads, s.head_dim}, rng);
    in.k_host = random_tensor(p.dtype, {s.batch, s.kv_len, s.n_kv_heads, s.head_dim}, rng);
    in.v_host = random_tensor(p.dtype, {s.batch, s.kv_len, s.n_kv_heads, s.head_dim}, rng);
    in.q = to_device(in.q_host, p.device);
    in.k = to_device(in.k_host, p.device);
    in.v = to_device(in.v_host, p.device);
    return in;
}

const TensorView& on_device(const Tensor& dev, const Tensor& host) { return dev.buffer.data() ? dev.view : host.view; }

struct Result {
    std::string impl, kernel, error;  // error: why it did not run (e.g. out of memory)
    bool skipped = false;             // not run by choice: naive's score matrix would not fit
    int64_t seq = 0;
    double ms = NAN, tokens_per_s = NAN, tflops = NAN, extra_mb = NAN, rel_err = NAN;
    std::vector<double> ms_all;
};

// ‖out − ref‖ / ‖ref‖ over a deterministic sample of rows (always including the first and last).
double sampled_error(const AttentionPlan& plan, const Inputs& in, const Tensor& out_dev, DType dtype) {
    const AttentionShape& s = plan.shape;
    Tensor out_host;
    const TensorView* out = &out_dev.view;
    if (!out_dev.view.device.is_cpu()) {
        out_host = Tensor(dtype, {s.batch, s.q_len, s.n_heads, s.head_dim});
        copy_bytes(out_host.view.data, Device::cpu(), out_dev.view.data, out_dev.view.device, out_dev.view.nbytes());
        out = &out_host.view;
    }
    const int64_t rows = s.batch * s.n_heads * s.q_len;
    const int64_t n = std::min<int64_t>(rows, ERROR_SAMPLE_ROWS);
    std::vector<double> ref(size_t(s.head_dim));
    double num = 0, den = 0;
    for (int64_t t = 0; t < n; ++t) {
        const int64_t row = n == 1 ? 0 : t * (rows - 1) / (n - 1);
        const int64_t i = row % s.q_len, h = (row / s.q_len) % s.n_heads, b = row / (s.q_len * s.n_heads);
        cpu::reference_row(plan, in.q_host.view, in.k_host.view, in.v_host.view, b, h, i, ref.data(), nullptr);
        for (int64_t d = 0; d < s.head_dim; ++d) {
            const double x = load_as_float(out->at(b, i, h, d), dtype);
            num += (x - ref[size_t(d)]) * (x - ref[size_t(d)]);
            den += ref[size_t(d)] * ref[size_t(d)];
        }
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// Extra memory is the tracked peak during the call minus what was live before it, with the output
// allocated inside the measured region; the timer covers the attention call alone.
Result measure(const Problem& p, const Inputs& in, AttentionImpl impl, int iters) {
    Result r;
    r.impl = impl_name(impl);
    r.seq = p.shape.q_len;
    const AttentionShape& s = p.shape;
    AttentionParams params;
    params.causal = p.causal;
    params.impl = impl;
    const TensorView& q = on_device(in.q, in.q_host);
    const TensorView& k = on_device(in.k, in.k_host);
    const TensorView& v = on_device(in.v, in.v_host);
    int64_t extra = 0;
    AttentionPlan plan;
    for (int it = -1; it < iters; ++it) {  // it == -1 warms up (threads, BLAS load, GPU modules)
        const int64_t live_before = memory_stats(p.device).live_bytes;
        reset_peak(p.device);
        Tensor out(p.dtype, {s.batch, s.q_len, s.n_heads, s.head_dim}, p.device);
        synchronize(p.device);
        const auto t0 = std::chrono::steady_clock::now();
        plan = attention(out.view, q, k, v, nullptr, params);
        synchronize(p.device);
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        extra = std::max(extra, memory_stats(p.device).peak_bytes - live_before);
        if (it >= 0) r.ms_all.push_back(ms);
        if (it == iters - 1) r.rel_err = sampled_error(plan, in, out, p.dtype);
    }
    std::vector<double> sorted = r.ms_all;
    std::sort(sorted.begin(), sorted.end());
    r.ms = sorted[sorted.size() / 2];
    r.kernel = plan.kernel;
    r.tokens_per_s = double(s.batch * s.q_len) / (r.ms / 1e3);
    r.tflops = flops(p) / (r.ms / 1e3) / 1e12;
    r.extra_mb = double(extra) / 1e6;
    return r;
}

// Naive needs the whole score matrix; refuse up front when it clearly can't fit rather than
// letting the machine swap or the allocator fail half-way through. (In doubles: the product of four
// sizes can pass int64, and only a comparison is needed.)
std::string naive_fits(const Problem& p) {
    const AttentionShape& s = p.shape;
    const double need = 4.0 * double(s.batch) * double(s.n_heads) * double(s.q_len) * double(s.kv_len);
    const double avail = double(available_memory(p.device));
    if (need > 0.8 * avail) {
        char msg[160];
        std::snprintf(msg, sizeof msg, "skipped: the score matrix needs %.1f GB, %.1f GB available", need / 1e9,
                      avail / 1e9);
        return msg;
    }
    return {};
}

Result run_one(const Problem& p, const Inputs& in, const std::string& impl_name_, int iters) {
    const AttentionImpl impl = parse_impl(impl_name_);
    if (impl == AttentionImpl::NAIVE) {
        if (std::string why = naive_fits(p); !why.empty()) {
            Result r;
            r.impl = impl_name_, r.seq = p.shape.q_len, r.error = why, r.skipped = true;
            return r;
        }
    }
    try {
        return measure(p, in, impl, iters);
    } catch (const Error& e) {  // e.g. out of GPU memory: report it in the table, keep going
        Result r;
        r.impl = impl_name_, r.seq = p.shape.q_len, r.error = e.what();
        return r;
    }
}

void print_header() {
    std::printf("%-7s %-22s %7s %10s %14s %9s %12s %10s\n", "impl", "kernel", "seq", "median ms", "tokens/s",
                "TFLOP/s", "extra MB", "rel err");
}

void print_row(const Result& r) {
    if (!r.error.empty()) {
        std::printf("%-7s %-22s %7lld  %s\n", r.impl.c_str(), "-", (long long)r.seq, r.error.c_str());
        return;
    }
    std::printf("%-7s %-22s %7lld %10.3f %14.0f %9.3f %12.2f %10.2e\n", r.impl.c_str(), r.kernel.c_str(),
                (long long)r.seq, r.ms, r.tokens_per_s, r.tflops, r.extra_mb, r.rel_err);
}

nlohmann::json to_json(const Result& r) {
    nlohmann::json j{{"impl", r.impl}, {"seq", r.seq}};
    if (!r.error.empty()) {
        j["error"] = r.error;
        return j;
    }
    j.update({{"kernel", r.kernel}, {"median_ms", r.ms}, {"ms", r.ms_all}, {"tokens_per_s", r.tokens_per_s},
              {"tflops", r.tflops}, {"extra_mb", r.extra_mb}, {"rel_err", r.rel_err}});
    return j;
}

void print_ratios(const std::vector<Result>& rows) {
    auto find = [&](const char* name) -> const Result* {
        for (const Result& r : rows)
            if (r.impl == name && r.error.empty()) return &r;
        return nullptr;
    };
    const Result* naive = find("naive");
    const Result* flash = find("flash");
    if (naive && flash)
        std::printf("flash vs naive: %.2fx the speed, %.1fx less extra memory\n", naive->ms / flash->ms,
                    naive->extra_mb / flash->extra_mb);
}

void write_sweep_plot(const std::string& path, const Problem& p, const std::vector<std::string>& impls,
                      const std::vector<Result>& sweep) {
    PlotPanel mem{"peak extra memory", "sequence length (q_len = kv_len)", "extra memory (MB)", true, true, {}};
    PlotPanel time{"time per call (median)", "sequence length (q_len = kv_len)", "time (ms)", true, true, {}};
    for (const std::string& impl : impls) {
        PlotSeries m{impl, {}, {}}, t{impl, {}, {}};
        for (const Result& r : sweep) {
            if (r.impl != impl) continue;
            m.x.push_back(double(r.seq)), t.x.push_back(double(r.seq));
            m.y.push_back(r.extra_mb), t.y.push_back(r.ms);  // NaN where it did not run: a gap
        }
        mem.series.push_back(m), time.series.push_back(t);
    }
    const AttentionShape& s = p.shape;
    char title[200];
    std::snprintf(title, sizeof title, "attention on %s: batch %lld, %lld heads (%lld kv), head_dim %lld, %s%s",
                  p.device.name().c_str(), (long long)s.batch, (long long)s.n_heads, (long long)s.n_kv_heads,
                  (long long)s.head_dim, dtype_name(p.dtype), p.causal ? ", causal" : "");
    write_plot(path, title, {mem, time});
    std::printf("plot written to %s\n", path.c_str());
}

// Everything that can be known before allocating, for one shape: its byte sizes (checked: a product
// that overflows is refused here, not turned into a small allocation), the planner's verdict on each
// requested implementation, and whether the inputs fit in the memory there is.
void validate(const Problem& p, const std::vector<std::string>& impls) {
    const AttentionShape& s = p.shape;
    const int64_t elem = int64_t(dtype_size(p.dtype));
    const int64_t q_bytes = checked_product({s.batch, s.q_len, s.n_heads, s.head_dim, elem},
                                            "bench attention: the bytes of q [batch, q_len, heads, head_dim]");
    const int64_t kv_bytes = checked_product({s.batch, s.kv_len, s.n_kv_heads, s.head_dim, elem},
                                             "bench attention: the bytes of k [batch, kv_len, kv_heads, head_dim]");
    // Stand-in views: the planner reads shapes, strides, dtypes, devices and the data's alignment,
    // never the data, so it can judge the request before anything is allocated.
    alignas(64) static char probe[64];
    const TensorView q(probe, p.dtype, {s.batch, s.q_len, s.n_heads, s.head_dim}, p.device);
    const TensorView kv(probe, p.dtype, {s.batch, s.kv_len, s.n_kv_heads, s.head_dim}, p.device);
    for (const std::string& name : impls) {
        AttentionParams params;
        params.causal = p.causal;
        params.impl = parse_impl(name);
        try {
            (void)plan_attention(q, q, kv, kv, nullptr, params);
        } catch (const Error& e) {
            fail("bench attention: ", name, " cannot run this request: ", e.what());
        }
    }
    // The host keeps q, k and v for the float64 reference, and the output (or its copy from a GPU); a
    // GPU holds its own q, k, v and output.
    const char* what = "bench attention: the bytes of q, k, v and the output";
    const int64_t tensors =
        checked_add(checked_add(q_bytes, q_bytes, what), checked_mul(kv_bytes, int64_t(2), what), what);
    const std::string needs = "bench attention at q_len " + std::to_string(s.q_len) + ", kv_len " +
                              std::to_string(s.kv_len) + " (q, k, v and the output)";
    require_memory(Device::cpu(), tensors, needs);
    if (!p.device.is_cpu()) require_memory(p.device, tensors, needs);
}

// A requested implementation that did not run is a failure, so the exit status says so; in a sweep,
// naive skipped for lack of memory is the point of the chart (where it stops fitting), not a failure.
void fail_if_any_failed(const std::vector<Result>& rows, const std::vector<Result>& sweep) {
    std::string failed;
    int count = 0;
    const auto add = [&](const Result& r, bool sweep_row) {
        if (r.error.empty() || (sweep_row && r.skipped)) return;
        failed += (count++ ? "; " : "") + r.impl + " at seq " + std::to_string(r.seq) + ": " + excerpt(r.error, 120);
    };
    for (const Result& r : rows) add(r, false);
    for (const Result& r : sweep) add(r, true);
    FP_CHECK(count == 0, "bench attention: ", count, " of ", rows.size() + sweep.size(), " runs did not complete (",
             failed, ")");
}

}  // namespace

void run_bench_attention(BenchAttentionOptions o, bool shape_given) {
    Device device = o.device == "auto" ? (gpu_device_count() > 0 ? Device::gpu(0) : Device::cpu()) : parse_device(o.device);
    if (!device.is_cpu())
        FP_CHECK(device.index < gpu_device_count(), "no ", device.name(), ": this machine has ", gpu_device_count(),
                 " GPU(s) (backend ", gpu_backend_name(), ")");
    if (device.is_cpu() && !shape_given) {
        o.batch = CPU_DEFAULT_BATCH, o.heads = CPU_DEFAULT_HEADS;
        std::printf("note: on the CPU the default shape is scaled from batch 8 x 16 heads to batch %lld x %lld heads "
                    "so a run takes seconds; pass --batch/--heads to change it\n",
                    (long long)o.batch, (long long)o.heads);
    }
    FP_CHECK(o.iters >= 1, "--iters must be at least 1, got ", o.iters);
    FP_CHECK(!o.impls.empty(), "bench attention: --impl needs at least one implementation");
    for (const std::string& impl : o.impls) (void)parse_impl(impl);  // reject typos before any work

    Problem p;
    p.device = device;
    p.dtype = parse_dtype(o.dtype);
    p.causal = o.causal;
    p.shape = {o.batch, o.q_len, o.kv_len, o.heads, o.kv_heads ? o.kv_heads : o.heads, o.head_dim};
    validate(p, o.impls);
    for (int64_t n : o.sweep) {
        Problem ps = p;
        ps.shape.q_len = ps.shape.kv_len = n;
        validate(ps, o.impls);
    }

    print_machine_info(device);
    const AttentionShape& s = p.shape;
    std::printf("shape: batch %lld, q_len %lld, kv_len %lld, %lld heads, %lld kv heads, head_dim %lld, %s%s; "
                "median of %d runs after 1 warm-up\n\n",
                (long long)s.batch, (long long)s.q_len, (long long)s.kv_len, (long long)s.n_heads,
                (long long)s.n_kv_heads, (long long)s.head_dim, dtype_name(p.dtype), p.causal ? ", causal" : "",
                o.iters);

    std::vector<Result> rows;
    {
        Inputs in = make_inputs(p, 1234);
        print_header();
        for (const std::string& impl : o.impls) {
            rows.push_back(run_one(p, in, impl, o.iters));
            print_row(rows.back());
        }
    }
    print_ratios(rows);

    std::vector<Result> sweep;
    if (!o.sweep.empty()) {
        std::printf("\nsweep over sequence length (q_len = kv_len):\n");
        print_header();
        for (int64_t n : o.sweep) {
            Problem ps = p;
            ps.shape.q_len = ps.shape.kv_len = n;
            Inputs in = make_inputs(ps, uint32_t(n));
            for (const std::string& impl : o.impls) {
                sweep.push_back(run_one(ps, in, impl, o.iters));
                print_row(sweep.back());
            }
        }
        if (!o.plot_path.empty()) write_sweep_plot(o.plot_path, p, o.impls, sweep);
    } else if (!o.plot_path.empty()) {
        std::printf("note: --plot draws the --sweep; no sweep was given, so no plot was written\n");
    }

    if (!o.json_path.empty()) {
        nlohmann::json j;
        j["machine"] = machine_info_json(device);
        j["shape"] = {{"batch", s.batch},   {"q_len", s.q_len},     {"kv_len", s.kv_len},   {"n_heads", s.n_heads},
                      {"n_kv_heads", s.n_kv_heads}, {"head_dim", s.head_dim}, {"dtype", dtype_name(p.dtype)},
                      {"causal", p.causal}, {"iters", o.iters}};
        for (const Result& r : rows) j["results"].push_back(to_json(r));
        for (const Result& r : sweep) j["sweep"].push_back(to_json(r));
        write_output_file(o.json_path, j.dump(2) + "\n", "--json file");
        std::printf("json written to %s\n", o.json_path.c_str());
    }
    fail_if_any_failed(rows, sweep);
}

void add_bench_attention(CLI::App& bench) {
    auto opts = std::make_shared<BenchAttentionOptions>();
    CLI::App* cmd = bench.add_subcommand("attention", "naive vs memory-efficient attention: time, memory, error");
    cmd->add_option("--device", opts->device, "auto, cpu, gpu or gpu:N")->capture_default_str();
    // Sizes take any positive int64: what the kernels support is the planner's to say, and what the
    // shapes need in bytes is computed with checked arithmetic against the memory there is.
    const CLI::Validator size = integer_range(1, INT64_LIMIT);
    auto* batch = cmd->add_option("--batch", opts->batch, "batch size")->check(size)->capture_default_str();
    auto* heads = cmd->add_option("--heads", opts->heads, "query heads")->check(size)->capture_default_str();
    cmd->add_option("--kv-heads", opts->kv_heads, "key/value heads (GQA); default: --heads")->check(size);
    auto* seq = cmd->add_option("--seq", "q_len and kv_len together")->check(size);
    cmd->add_option("--q-len", opts->q_len, "query length")->check(size)->capture_default_str();
    cmd->add_option("--kv-len", opts->kv_len, "key/value length")->check(size)->capture_default_str();
    cmd->add_option("--head-dim", opts->head_dim, "head dimension")->check(size)->capture_default_str();
    cmd->add_option("--dtype", opts->dtype, "fp32, fp16 or bf16")->capture_default_str();
    cmd->add_flag("--causal", opts->causal, "causal mask (bottom-right aligned)");
    cmd->add_option("--impl", opts->impls, "implementations, comma-separated")->delimiter(',')->capture_default_str();
    cmd->add_option("--iters", opts->iters, "timed runs (median reported)")
        ->check(integer_range(1, 1000000))
        ->capture_default_str();
    cmd->add_option("--sweep", opts->sweep, "sequence lengths to sweep, comma-separated (e.g. 1024,2048,4096)")
        ->delimiter(',')
        ->check(size);
    cmd->add_option("--json", opts->json_path, "write results as JSON");
    cmd->add_option("--plot", opts->plot_path, "write the sweep plot (.svg or .png)");
    cmd->callback([opts, seq, batch, heads] {
        if (seq->count()) opts->q_len = opts->kv_len = seq->as<int64_t>();
        run_bench_attention(*opts, batch->count() || heads->count());
    });
}

}  // namespace flashport::app
