// The attention op-test harness: inputs, poisoning, the run, the checks and the error bound.
#include "op_harness.h"

#include "attention_check.h"
#include "support/poison.h"
#include "support/rng.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>

#include "backends/cpu/attention_cpu.h"
#include "backends/cpu/kernels/tile_kernels.h"
#include "flashport/device.h"
#include "flashport/error.h"
#include "flashport/memory.h"

namespace flashport::test {
namespace {

// q is drawn as Q_STD · N(0, 1) and k, v as N(0, 1), so with the default scale 1/sqrt(head_dim) the
// scores are ~N(0, Q_STD²). A standard deviation of 2 keeps softmax away from both failure-hiding
// extremes: over 1025 keys the largest weight is ~0.1 (not one-hot) and ~20 keys carry most of the
// mass (not uniform, where the output would be the mean of v whatever the scores were).
constexpr double Q_STD = 2.0;

// One of q, k, v, out: the whole host buffer (padding included) in the case's layout, a host view of
// the logical [batch, len, heads, dim] tensor, and the device copy.
struct Operand {
    std::vector<unsigned char> host;
    TensorView host_view;
    Buffer device_buf;
    TensorView device_view;
};

Operand make_operand(Layout layout, DType dtype, int64_t B, int64_t L, int64_t H, int64_t D) {
    std::array<int64_t, 4> st{};
    int64_t elems = 0;
    switch (layout) {
        case Layout::BLHD:
            st = {L * H * D, H * D, D, 1};
            elems = B * L * H * D;
            break;
        case Layout::BHLD:  // buffer [B, H, L, D]; the view swaps heads and len
            st = {H * L * D, D, L * D, 1};
            elems = B * H * L * D;
            break;
        case Layout::BLHD_PADDED: {
            const int64_t Dp = D + 5, Lc = L + 3;  // odd pitch: rows are not vector-aligned either
            st = {Lc * H * Dp, H * Dp, Dp, 1};
            elems = B * Lc * H * Dp;
            break;
        }
        case Layout::DIM_STRIDED:
            st = {2 * L * H * D, 2 * H * D, 2 * D, 2};
            elems = 2 * B * L * H * D;
            break;
    }
    Operand op;
    op.host.resize(size_t(elems) * dtype_size(dtype));
    fill_poison(op.host.data(), op.host.size(), dtype);
    op.host_view = TensorView(op.host.data(), dtype, {B, L, H, D});
    op.host_view.stride = st;
    return op;
}

void to_device(Operand& op, Device device) {
    op.device_buf = Buffer(op.host.size(), device);
    // An empty tensor (kv_len 0) has no host storage: memcpy's pointers must not be null, even for 0 bytes.
    if (!op.host.empty()) copy_bytes(op.device_buf.data(), device, op.host.data(), Device::cpu(), op.host.size());
    op.device_view = op.host_view;
    op.device_view.data = op.device_buf.data();
    op.device_view.device = device;
}

void to_host(Operand& op) {
    if (!op.host.empty())
        copy_bytes(op.host.data(), Device::cpu(), op.device_buf.data(), op.device_buf.device(), op.host.size());
}

// Fills the logical elements with scale · N(0, 1) rounded to the dtype, and returns them as floats in
// canonical [batch, len, heads, dim] order for the emulation.
std::vector<float> fill_random(Operand& op, Rng& rng, double scale) {
    const TensorView& t = op.host_view;
    std::vector<float> vals(size_t(t.numel()));
    size_t n = 0;
    for (int64_t b = 0; b < t.shape[0]; ++b)
        for (int64_t l = 0; l < t.shape[1]; ++l)
            for (int64_t h = 0; h < t.shape[2]; ++h)
                for (int64_t d = 0; d < t.shape[3]; ++d) {
                    const float x = round_to(t.dtype, float(scale * rng.normal()));
                    store_from_float(t.at(b, l, h, d), t.dtype, x);
                    vals[n++] = x;
                }
    return vals;
}

// Plants one NaN where c.nan_at says, at a position drawn from rng, in the operand and in its float
// copy (canonical [batch, len, heads, dim] order, as fill_random returns it).
struct Planted {
    int64_t b = -1, len = -1, head = -1, d = -1;  // in the planted operand's [batch, len, heads, dim]
};
Planted plant_nan(const AttentionCase& c, Rng& rng, Operand& q, Operand& k, Operand& v, std::vector<float>& qf,
                  std::vector<float>& kf, std::vector<float>& vf) {
    Operand* op = c.nan_at == NanAt::Q ? &q : c.nan_at == NanAt::K ? &k : &v;
    std::vector<float>& vals = c.nan_at == NanAt::Q ? qf : c.nan_at == NanAt::K ? kf : vf;
    const TensorView& t = op->host_view;
    if (t.numel() == 0) return {};
    int64_t at[4];
    for (int d = 0; d < 4; ++d) at[d] = int64_t(rng.next() % uint64_t(t.shape[size_t(d)]));
    store_from_float(t.at(at[0], at[1], at[2], at[3]), t.dtype, std::numeric_limits<float>::quiet_NaN());
    vals[size_t(((at[0] * t.shape[1] + at[1]) * t.shape[2] + at[2]) * t.shape[3] + at[3])] =
        std::numeric_limits<float>::quiet_NaN();
    return {at[0], at[1], at[2], at[3]};
}

class ScopedEnv {
public:
    ScopedEnv(const char* name, const std::string& value) : name_(name) {
        if (value.empty()) return;
        active_ = true;
        if (const char* old = std::getenv(name)) old_ = old, had_old_ = true;
        setenv(name, value.c_str(), 1);
    }
    ~ScopedEnv() {
        if (!active_) return;
        if (had_old_)
            setenv(name_, old_.c_str(), 1);
        else
            unsetenv(name_);
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
    const char* name_;
    std::string old_;
    bool active_ = false, had_old_ = false;
};

// Which rows (flattened (b · n_heads + h) · q_len + i) to compare with the reference: all of them
// when a NaN was planted (its pattern is checked everywhere), else attention_check.h's sample_rows,
// which keeps, when causal masking leaves rows without keys, the boundary between those and the
// first row with keys.
std::vector<int64_t> rows_to_check(const AttentionCase& c, Rng& rng) {
    const int64_t rows = c.batch * c.n_heads * c.q_len;
    const double cost = double(rows) * double(std::max<int64_t>(c.kv_len, 1)) * double(c.head_dim);
    std::vector<int64_t> must;
    for (int64_t i = 0; i < c.q_len; ++i) {  // the first row with a key
        const cpu::KeyRange keys = cpu::visible_keys(i, c.q_len, c.kv_len, c.causal, c.window_left);
        if (keys.lo < keys.hi) {
            if (i > 0) must.push_back(((c.batch - 1) * c.n_heads) * c.q_len + i - 1);
            must.push_back(((c.batch - 1) * c.n_heads) * c.q_len + i);
            break;
        }
    }
    return sample_rows(rows, cost, c.nan_at != NanAt::NONE ? -1.0 : REFERENCE_BUDGET, must, rng);
}

}  // namespace

const char* layout_name(Layout layout) {
    switch (layout) {
        case Layout::BLHD: return "blhd";
        case Layout::BHLD: return "bhld";
        case Layout::BLHD_PADDED: return "padded";
        case Layout::DIM_STRIDED: return "dimstride2";
    }
    return "?";
}

std::string AttentionCase::name() const {
    std::ostringstream os;
    os << impl_name(impl) << "_" << dtype_name(dtype) << "_b" << batch << "_q" << q_len << "_kv" << kv_len << "_h"
       << n_heads << "_kvh" << n_kv_heads << "_d" << head_dim << (causal ? "_causal" : "_full");
    if (window_left >= 0) os << "_w" << window_left;
    os << "_" << layout_name(layout) << (lse ? "_lse" : "");
    if (scale != 0.0f) {
        std::string s = fmt_double(double(scale));
        for (char& ch : s) ch = ch == '.' ? 'p' : ch == '-' ? 'm' : ch == '+' ? 'P' : ch;
        os << "_s" << s;
    }
    if (!cpu_isa.empty()) os << "_" << cpu_isa;
    if (threads > 0) os << "_t" << threads;
    if (nan_at != NanAt::NONE) os << (nan_at == NanAt::Q ? "_nanq" : nan_at == NanAt::K ? "_nank" : "_nanv");
    os << "_" << (device.is_cpu() ? std::string("cpu") : "gpu" + std::to_string(device.index));
    return os.str();
}

void PrintTo(const AttentionCase& c, std::ostream* os) { *os << c.name(); }

bool perf_mode() {
    const char* s = std::getenv("FLASHPORT_TEST_PERF");
    return s && *s && std::string(s) != "0";
}

bool case_selected(const std::string& name) {
    const char* f = std::getenv("FLASHPORT_TEST_FILTER");
    if (!f || !*f) return true;
    std::stringstream parts(f);
    std::string part;
    while (std::getline(parts, part, ','))
        if (!part.empty() && name.find(part) == std::string::npos) return false;
    return true;
}

std::string CaseResult::summary() const {
    std::ostringstream os;
    os << "case " << name << "\n  kernel " << (kernel.empty() ? "?" : kernel) << ", rows checked " << rows_checked
       << " of " << rows_total << "\n  err " << fmt_double(err) << " vs bound " << fmt_double(bound)
       << " = 2 x naive same-precision err " << fmt_double(err_naive) << " + floor " << fmt_double(floor)
       << "\n  lse max err " << fmt_double(lse_max_err) << " (tol " << fmt_double(lse_tol) << ")";
    if (ms >= 0) os << "\n  " << fmt_double(ms) << " ms";
    for (const std::string& f : failures) os << "\n  FAIL: " << f;
    // The gtest filter names the running test; FLASHPORT_TEST_FILTER picks the case inside a grid test.
    os << "\n  " << reproduce_line(run_seed) << " FLASHPORT_TEST_FILTER=" << name << " (case seed " << seed << ")";
    return os.str();
}

CaseResult start_result(const std::string& name, uint64_t run, DType dtype, double floor) {
    CaseResult r;
    r.name = name;
    r.run_seed = run;
    r.seed = case_seed(name, run);
    r.floor = floor >= 0 ? floor : default_floor(dtype);
    return r;
}

CaseResult run_case(const AttentionCase& c, uint64_t seed_of_run, const Tamper& tamper, const CallTimer& timer) {
    CaseResult r = start_result(c.name(), seed_of_run, c.dtype, c.floor);
    r.rows_total = c.batch * c.n_heads * c.q_len;

    if (c.device.is_cpu() && !c.cpu_isa.empty() && !cpu::tile_kernels_for(c.cpu_isa)) {
        r.skipped = true;
        r.skip_reason = "this CPU or build has no " + c.cpu_isa + " kernels";
        return r;
    }
    auto fail = [&](const std::string& what) { r.failures.push_back(what); };

    // Inputs on the host, outputs poisoned with NaN everywhere (padding included).
    Rng rng(r.seed);
    Operand q = make_operand(c.layout, c.dtype, c.batch, c.q_len, c.n_heads, c.head_dim);
    Operand k = make_operand(c.layout, c.dtype, c.batch, c.kv_len, c.n_kv_heads, c.head_dim);
    Operand v = make_operand(c.layout, c.dtype, c.batch, c.kv_len, c.n_kv_heads, c.head_dim);
    Operand out = make_operand(c.layout, c.dtype, c.batch, c.q_len, c.n_heads, c.head_dim);
    std::vector<float> qf = fill_random(q, rng, Q_STD);
    std::vector<float> kf = fill_random(k, rng, 1.0);
    std::vector<float> vf = fill_random(v, rng, 1.0);
    const Planted planted = c.nan_at != NanAt::NONE ? plant_nan(c, rng, q, k, v, qf, kf, vf) : Planted{};
    Operand lse;
    lse.host.resize(size_t(r.rows_total) * sizeof(float));
    fill_poison(lse.host.data(), lse.host.size(), DType::F32);
    lse.host_view = TensorView(lse.host.data(), DType::F32, {c.batch, c.n_heads, c.q_len});

    for (Operand* op : {&q, &k, &v, &out}) to_device(*op, c.device);
    to_device(lse, c.device);

    AttentionParams params;
    params.scale = c.scale;
    params.causal = c.causal;
    params.window_left = c.window_left;
    params.impl = c.impl;
    const float scale = c.scale != 0.0f ? c.scale : float(1.0 / std::sqrt(double(c.head_dim)));

    ScopedEnv isa("FLASHPORT_CPU_ISA", c.cpu_isa);
    struct ScopedThreads {  // odd thread counts exercise the per-thread scratch and work split
        int old = omp_get_max_threads();
        explicit ScopedThreads(int n) {
            if (n > 0) omp_set_num_threads(n);
        }
        ~ScopedThreads() { omp_set_num_threads(old); }
    } threads(c.threads);
    auto call = [&] {
        const AttentionPlan plan = attention(out.device_view, q.device_view, k.device_view, v.device_view,
                                             c.lse ? &lse.device_view : nullptr, params);
        synchronize(c.device);
        return plan;
    };
    try {
        const AttentionPlan plan = call();
        r.kernel = plan.kernel;
        if (plan.params.scale != scale)
            fail("plan resolved scale " + fmt_double(plan.params.scale) + ", expected " + fmt_double(scale));
        if (c.impl != AttentionImpl::AUTO && plan.params.impl != c.impl)
            fail(std::string("plan runs ") + impl_name(plan.params.impl) + ", asked for " + impl_name(c.impl));
        if (c.device.is_cpu() && c.impl == AttentionImpl::FLASH && !c.cpu_isa.empty() &&
            plan.kernel.find(c.cpu_isa) == std::string::npos)
            fail("FLASHPORT_CPU_ISA=" + c.cpu_isa + " but the kernel is " + plan.kernel);
        if (timer) {
            r.ms = 1e3 * timer([&] {
                       attention(out.device_view, q.device_view, k.device_view, v.device_view,
                                 c.lse ? &lse.device_view : nullptr, params);
                   });
        } else if (perf_mode()) {
            std::vector<double> ms;
            for (int it = 0; it < 5; ++it) {
                const auto t0 = std::chrono::steady_clock::now();
                call();
                ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
            }
            std::sort(ms.begin(), ms.end());
            r.ms = ms[ms.size() / 2];
        }
    } catch (const Error& e) {
        fail(std::string("attention threw: ") + e.what());
        return r;
    }
    to_host(out);
    to_host(lse);
    if (tamper) tamper(out.host_view, lse.host_view);

    // Every element of the view: finite; every row that sees no key: exactly zero, LSE -inf; every
    // other row: a finite LSE. With a planted NaN, where NaN belongs is the reference's to say (below).
    RowTally tally;
    tally.nan_case = c.nan_at != NanAt::NONE;
    const TensorView& o = out.host_view;
    std::vector<char> in_view(out.host.size() / dtype_size(c.dtype), 0);
    for (int64_t b = 0; b < c.batch; ++b)
        for (int64_t h = 0; h < c.n_heads; ++h)
            for (int64_t i = 0; i < c.q_len; ++i) {
                const cpu::KeyRange keys = cpu::visible_keys(i, c.q_len, c.kv_len, c.causal, c.window_left);
                for (int64_t d = 0; d < c.head_dim; ++d)
                    in_view[size_t((static_cast<unsigned char*>(o.at(b, i, h, d)) - out.host.data()) /
                                   int64_t(dtype_size(c.dtype)))] = 1;
                const auto got = [&](int64_t d) { return load_as_float(o.at(b, i, h, d), c.dtype); };
                tally.check_row(got, c.head_dim, keys.lo >= keys.hi,
                                c.lse ? static_cast<const float*>(lse.host_view.at(b, h, i)) : nullptr,
                                [&] { return row_name(b, i, h); });
            }
    check_lse_untouched(c.lse, lse.host.data(), lse.host.size(), r);
    {  // the kernel must not write outside the output view (padding, the odd elements of DIM_STRIDED)
        const size_t es = dtype_size(c.dtype);
        int64_t outside = 0;
        for (size_t n = 0; n < in_view.size(); ++n)
            if (!in_view[n] && !is_poison(out.host.data() + n * es, c.dtype)) ++outside;
        if (outside) fail(std::to_string(outside) + " elements outside the output view were overwritten");
    }

    // Error against the float64 reference, and the naive same-precision emulation's error.
    AttentionPlan ref_plan;
    ref_plan.shape = {c.batch, c.q_len, c.kv_len, c.n_heads, c.n_kv_heads, c.head_dim};
    ref_plan.params = params;
    ref_plan.params.scale = scale;
    const std::vector<int64_t> rows = rows_to_check(c, rng);
    r.rows_checked = int64_t(rows.size());
    std::vector<double> ref(size_t(c.head_dim)), emu(size_t(c.head_dim));
    const int64_t group = c.n_heads / c.n_kv_heads, kv_batch = c.kv_len * c.n_kv_heads * c.head_dim;
    for (int64_t row : rows) {
        const int64_t i = row % c.q_len, h = (row / c.q_len) % c.n_heads, b = row / (c.q_len * c.n_heads);
        double ref_lse = 0.0;
        cpu::reference_row(ref_plan, q.host_view, k.host_view, v.host_view, b, h, i, ref.data(), &ref_lse);
        const cpu::KeyRange keys = cpu::visible_keys(i, c.q_len, c.kv_len, c.causal, c.window_left);
        emulate_row(c.dtype, scale, qf.data() + ((b * c.q_len + i) * c.n_heads + h) * c.head_dim,
                    kf.data() + b * kv_batch, vf.data() + b * kv_batch, h / group, c.n_kv_heads, c.head_dim, keys.lo,
                    keys.hi, emu.data());
        // A NaN value of a key this row does not see may reach it as 0 · NaN, as in PyTorch's math path
        // (P V over every key). Kernels skip whole masked tiles but multiply the masked keys of partly
        // visible ones, so whether it does depends on the tiling: that element is tolerated.
        const bool masked_nan_v = c.nan_at == NanAt::V && planted.b == b && planted.head == h / group &&
                                  (planted.len < keys.lo || planted.len >= keys.hi);
        const auto got = [&](int64_t d) { return load_as_float(o.at(b, i, h, d), c.dtype); };
        tally.compare_row(got, ref.data(), emu.data(), c.head_dim,
                          c.lse ? static_cast<const float*>(lse.host_view.at(b, h, i)) : nullptr, ref_lse,
                          masked_nan_v ? planted.d : -1, [&] { return row_name(b, i, h); });
    }
    tally.finish(r);
    return r;
}

void check_case(const AttentionCase& c) {
    const std::string name = c.name();
    if (!case_selected(name)) GTEST_SKIP() << "not selected by FLASHPORT_TEST_FILTER";
    const CaseResult r = run_case(c);
    if (r.skipped) GTEST_SKIP() << r.skip_reason;
    ::testing::Test::RecordProperty("err", fmt_double(r.err));
    ::testing::Test::RecordProperty("bound", fmt_double(r.bound));
    if (perf_mode()) std::printf("[perf] %-90s %10.3f ms  %s\n", name.c_str(), r.ms, r.kernel.c_str());
    EXPECT_TRUE(r.ok()) << r.summary();
}

}  // namespace flashport::test
