// The attention op-test harness: inputs, poisoning, the run, the checks and the error bound.
#include "op_harness.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
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

// The float64 reference costs head_dim multiply-adds per visible key per row, twice; above this many
// per case the harness checks a deterministic sample of rows instead of all of them (finiteness and
// masking are still checked on every element).
constexpr double REFERENCE_BUDGET = double(1 << 24);
constexpr int64_t MIN_SAMPLED_ROWS = 48;

// LSE tolerance: the kernel computes LSE in fp32 from fp32 scores of the same (already rounded)
// inputs the reference reads, so its error is fp32 rounding of a head_dim-term dot product, an exp
// sum over the row and a log: a few 1e-6 for our |LSE| of ~2 to ~15. 1e-4 absolute plus 1e-5 of
// |LSE| is ~30× that, while a real bug (a missing max, a log2/ln mix-up, a wrong scale) is O(0.1..1).
constexpr double LSE_ABS_TOL = 1e-4, LSE_REL_TOL = 1e-5;

uint64_t splitmix64(uint64_t& state) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t fnv1a(const std::string& s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ull;
    return h;
}

// Our own generator (not std::normal_distribution, whose algorithm is up to the library) so a seed
// reproduces the same inputs on every machine, the GPU one included.
class Rng {
public:
    explicit Rng(uint64_t seed) : state_(seed) {}
    uint64_t next() { return splitmix64(state_); }
    double uniform() { return (double(next() >> 11) + 0.5) * 0x1.0p-53; }  // in (0, 1)
    double normal() {                                                     // Box–Muller
        if (have_spare_) {
            have_spare_ = false;
            return spare_;
        }
        const double r = std::sqrt(-2.0 * std::log(uniform())), t = 2.0 * M_PI * uniform();
        spare_ = r * std::sin(t);
        have_spare_ = true;
        return r * std::cos(t);
    }

private:
    uint64_t state_;
    double spare_ = 0.0;
    bool have_spare_ = false;
};

uint32_t poison_bits(DType dtype) {
    switch (dtype) {
        case DType::F32: return 0x7fc00000u;
        case DType::F16: return 0x7e00u;
        case DType::BF16: return 0x7fc0u;
    }
    return 0;
}

void fill_poison(std::vector<unsigned char>& bytes, DType dtype) {
    const size_t es = dtype_size(dtype);
    const uint32_t bits = poison_bits(dtype);
    for (size_t off = 0; off + es <= bytes.size(); off += es) std::memcpy(bytes.data() + off, &bits, es);
}

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
    fill_poison(op.host, dtype);
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

// The "naive same-precision" implementation that the error bound is relative to, emulating
// PyTorch's math path in the input dtype: S = scale · q kᵀ accumulated in fp32 and rounded to the
// dtype; P = softmax(S) computed in fp32 and rounded to the dtype; O = P v accumulated in fp32 and
// rounded to the dtype. For fp32 inputs this is simply a plain fp32 implementation.
void emulate_row(const AttentionCase& c, float scale, const std::vector<float>& qf, const std::vector<float>& kf,
                 const std::vector<float>& vf, int64_t b, int64_t h, int64_t i, double* out) {
    const int64_t D = c.head_dim, kvh = h / (c.n_heads / c.n_kv_heads);
    const cpu::KeyRange keys = cpu::visible_keys(i, c.q_len, c.kv_len, c.causal, c.window_left);
    std::fill(out, out + D, 0.0);
    if (keys.lo >= keys.hi) return;
    const float* qrow = &qf[size_t(((b * c.q_len + i) * c.n_heads + h) * D)];
    std::vector<float> p(size_t(keys.hi - keys.lo));
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t j = keys.lo; j < keys.hi; ++j) {
        const float* krow = &kf[size_t(((b * c.kv_len + j) * c.n_kv_heads + kvh) * D)];
        float acc = 0.0f;
        for (int64_t d = 0; d < D; ++d) acc += qrow[d] * krow[d];
        const float s = round_to(c.dtype, acc * scale);
        p[size_t(j - keys.lo)] = s;
        m = std::max(m, s);
    }
    float l = 0.0f;
    for (float& x : p) l += (x = std::exp(x - m));
    for (float& x : p) x = round_to(c.dtype, x / l);
    std::vector<float> o(size_t(D), 0.0f);
    for (int64_t j = keys.lo; j < keys.hi; ++j) {
        const float* vrow = &vf[size_t(((b * c.kv_len + j) * c.n_kv_heads + kvh) * D)];
        const float pj = p[size_t(j - keys.lo)];
        for (int64_t d = 0; d < D; ++d) o[size_t(d)] += pj * vrow[d];
    }
    for (int64_t d = 0; d < D; ++d) out[d] = round_to(c.dtype, o[size_t(d)]);
}

// Which rows (flattened (b · n_heads + h) · q_len + i) to compare with the reference: all of them
// when that fits the budget or a NaN was planted (its pattern is checked everywhere), else a sample that always
// includes the first and last rows and, when causal masking leaves rows without keys, the boundary between those and
// the first row with keys.
std::vector<int64_t> rows_to_check(const AttentionCase& c, Rng& rng) {
    const int64_t rows = c.batch * c.n_heads * c.q_len;
    const double cost = double(rows) * double(std::max<int64_t>(c.kv_len, 1)) * double(c.head_dim);
    std::vector<int64_t> picked;
    if (c.nan_at != NanAt::NONE || cost <= REFERENCE_BUDGET || rows <= MIN_SAMPLED_ROWS) {
        picked.resize(size_t(rows));
        for (int64_t r = 0; r < rows; ++r) picked[size_t(r)] = r;
        return picked;
    }
    const int64_t want = std::min<int64_t>(
        rows, std::max<int64_t>(MIN_SAMPLED_ROWS,
                                int64_t(REFERENCE_BUDGET / (double(std::max<int64_t>(c.kv_len, 1)) * double(c.head_dim)))));
    picked = {0, rows - 1};
    for (int64_t i = 0; i < c.q_len; ++i) {  // the first row with a key
        const cpu::KeyRange keys = cpu::visible_keys(i, c.q_len, c.kv_len, c.causal, c.window_left);
        if (keys.lo < keys.hi) {
            if (i > 0) picked.push_back(((c.batch - 1) * c.n_heads) * c.q_len + i - 1);
            picked.push_back(((c.batch - 1) * c.n_heads) * c.q_len + i);
            break;
        }
    }
    while (int64_t(picked.size()) < want * 2) picked.push_back(int64_t(rng.next() % uint64_t(rows)));
    std::sort(picked.begin(), picked.end());
    picked.erase(std::unique(picked.begin(), picked.end()), picked.end());
    if (int64_t(picked.size()) > want) {  // thin out evenly, keeping the first and the last
        std::vector<int64_t> thin;
        for (int64_t n = 0; n < want; ++n) thin.push_back(picked[size_t(n * int64_t(picked.size() - 1) / (want - 1))]);
        picked = thin;
    }
    return picked;
}

std::string fmt_double(double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", x);
    return buf;
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

// Floors, the part of the bound that does not scale with the naive emulation's error:
//  - fp32, 2e-6: the kernel and the emulation sum in different orders (tiles, vector lanes, an
//    exp2 polynomial, up to ~10 online-softmax rescalings of the accumulator); each costs a few fp32
//    ulps (6e-8) relative, ~1e-6 in all, and in a lucky case the emulation's own error can be far
//    smaller. Still 4+ orders of magnitude below what a real bug produces.
//  - fp16, 2^-11 ≈ 4.9e-4, and bf16, 2^-8 ≈ 3.9e-3: half an ulp of the dtype, relative, i.e. the
//    rounding of the output itself, which even an exact-in-fp32 kernel carries and which the 2×
//    term alone would not cover when the emulation happens to be almost exact.
double default_floor(DType dtype) {
    switch (dtype) {
        case DType::F32: return 2e-6;
        case DType::F16: return 0x1.0p-11;
        case DType::BF16: return 0x1.0p-8;
    }
    return 0.0;
}

uint64_t run_seed() {
    static const uint64_t seed = [] {
        if (const char* s = std::getenv("FLASHPORT_TEST_SEED"); s && *s) return uint64_t(std::strtoull(s, nullptr, 0));
        std::random_device rd;
        return (uint64_t(rd()) << 32) ^ rd();
    }();
    return seed;
}

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
    os << "\n  reproduce: FLASHPORT_TEST_SEED=" << run_seed << " FLASHPORT_TEST_FILTER=" << name
       << " (case seed " << seed << ")";
    return os.str();
}

CaseResult run_case(const AttentionCase& c, uint64_t seed_of_run, const Tamper& tamper) {
    CaseResult r;
    r.name = c.name();
    r.run_seed = seed_of_run;
    uint64_t mix = seed_of_run;
    r.seed = fnv1a(r.name) ^ splitmix64(mix);
    r.floor = c.floor >= 0 ? c.floor : default_floor(c.dtype);
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
    fill_poison(lse.host, DType::F32);
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
        if (perf_mode()) {
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
    const bool nan_case = c.nan_at != NanAt::NONE;
    const TensorView& o = out.host_view;
    int64_t non_finite = 0, nonzero_masked = 0, bad_lse = 0;
    std::string first_non_finite, first_nonzero_masked, first_bad_lse;
    std::vector<char> in_view(out.host.size() / dtype_size(c.dtype), 0);
    for (int64_t b = 0; b < c.batch; ++b)
        for (int64_t h = 0; h < c.n_heads; ++h)
            for (int64_t i = 0; i < c.q_len; ++i) {
                const cpu::KeyRange keys = cpu::visible_keys(i, c.q_len, c.kv_len, c.causal, c.window_left);
                const bool sees_none = keys.lo >= keys.hi;
                const std::string where = "(b " + std::to_string(b) + ", i " + std::to_string(i) + ", h " +
                                          std::to_string(h) + ")";
                for (int64_t d = 0; d < c.head_dim; ++d) {
                    in_view[size_t((static_cast<unsigned char*>(o.at(b, i, h, d)) - out.host.data()) /
                                   int64_t(dtype_size(c.dtype)))] = 1;
                    const float x = load_as_float(o.at(b, i, h, d), c.dtype);
                    if (!nan_case && !std::isfinite(x) && non_finite++ == 0)
                        first_non_finite = where + " d " + std::to_string(d);
                    if (sees_none && x != 0.0f && std::isfinite(x) && nonzero_masked++ == 0)
                        first_nonzero_masked = where + " = " + fmt_double(x);
                }
                if (c.lse) {
                    const float l = *static_cast<const float*>(lse.host_view.at(b, h, i));
                    const bool good = sees_none ? (std::isinf(l) && l < 0) : nan_case || std::isfinite(l);
                    if (!good && bad_lse++ == 0)
                        first_bad_lse = where + " = " + fmt_double(double(l)) +
                                        (sees_none ? " (sees no key: want -inf)" : " (want finite)");
                }
            }
    if (non_finite) fail(std::to_string(non_finite) + " output elements are NaN/Inf, first at " + first_non_finite);
    if (nonzero_masked)
        fail(std::to_string(nonzero_masked) + " outputs of rows that see no key are not 0, first " + first_nonzero_masked);
    if (bad_lse) fail(std::to_string(bad_lse) + " LSE values wrong, first " + first_bad_lse);
    if (!c.lse) {  // lse == nullptr: the poisoned buffer must be untouched
        for (size_t n = 0; n < lse.host.size() / 4; ++n)
            if (float_bits(reinterpret_cast<const float*>(lse.host.data())[n]) != poison_bits(DType::F32)) {
                fail("the kernel wrote LSE although none was requested");
                break;
            }
    }
    {  // the kernel must not write outside the output view (padding, the odd elements of DIM_STRIDED)
        const size_t es = dtype_size(c.dtype);
        const uint32_t pb = poison_bits(c.dtype);
        int64_t outside = 0;
        for (size_t n = 0; n < in_view.size(); ++n)
            if (!in_view[n] && std::memcmp(out.host.data() + n * es, &pb, es) != 0) ++outside;
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
    double num = 0.0, num_naive = 0.0, den = 0.0, worst_lse_ratio = 0.0;
    int64_t nan_mismatch = 0;
    std::string first_nan_mismatch;
    for (int64_t row : rows) {
        const int64_t i = row % c.q_len, h = (row / c.q_len) % c.n_heads, b = row / (c.q_len * c.n_heads);
        double ref_lse = 0.0;
        cpu::reference_row(ref_plan, q.host_view, k.host_view, v.host_view, b, h, i, ref.data(), &ref_lse);
        if (nan_case) {  // NaN exactly where the reference has it, output and LSE; error over the rest
            // One exception: a NaN value of a key this row does not see may reach it as 0 · NaN, as in
            // PyTorch's math path (P V over every key). Kernels skip whole masked tiles but multiply
            // the masked keys of partly visible ones, so whether it does depends on the tiling.
            const cpu::KeyRange keys = cpu::visible_keys(i, c.q_len, c.kv_len, c.causal, c.window_left);
            const bool masked_nan_v = c.nan_at == NanAt::V && planted.b == b &&
                                      planted.head == h / (c.n_heads / c.n_kv_heads) &&
                                      (planted.len < keys.lo || planted.len >= keys.hi);
            bool ref_nan = std::isnan(ref_lse);
            for (int64_t d = 0; d < c.head_dim; ++d) {
                const float x = load_as_float(o.at(b, i, h, d), c.dtype);
                ref_nan |= std::isnan(ref[size_t(d)]);
                if (masked_nan_v && d == planted.d && std::isnan(x)) {
                    ref_nan = true;  // tolerated, and left out of the error
                    continue;
                }
                if ((std::isnan(x) != std::isnan(ref[size_t(d)]) || std::isinf(x)) && nan_mismatch++ == 0)
                    first_nan_mismatch = "(b " + std::to_string(b) + ", i " + std::to_string(i) + ", h " +
                                         std::to_string(h) + ", d " + std::to_string(d) + ") = " + fmt_double(x) +
                                         ", reference " + fmt_double(ref[size_t(d)]);
            }
            if (c.lse) {
                const float got = *static_cast<const float*>(lse.host_view.at(b, h, i));
                if (std::isnan(got) != std::isnan(ref_lse) && nan_mismatch++ == 0)
                    first_nan_mismatch = "LSE (b " + std::to_string(b) + ", h " + std::to_string(h) + ", i " +
                                         std::to_string(i) + ") = " + fmt_double(got) + ", reference " +
                                         fmt_double(ref_lse);
            }
            if (ref_nan) continue;
        }
        emulate_row(c, scale, qf, kf, vf, b, h, i, emu.data());
        for (int64_t d = 0; d < c.head_dim; ++d) {
            const double x = load_as_float(o.at(b, i, h, d), c.dtype), y = ref[size_t(d)];
            num += (x - y) * (x - y);
            num_naive += (emu[size_t(d)] - y) * (emu[size_t(d)] - y);
            den += y * y;
        }
        if (c.lse && std::isfinite(ref_lse)) {
            const double got = *static_cast<const float*>(lse.host_view.at(b, h, i));
            const double e = std::abs(got - ref_lse), tol = LSE_ABS_TOL + LSE_REL_TOL * std::abs(ref_lse);
            if (!(e / tol <= worst_lse_ratio)) {
                worst_lse_ratio = std::isfinite(e) ? e / tol : std::numeric_limits<double>::infinity();
                r.lse_max_err = e, r.lse_tol = tol;
            }
        }
    }
    if (nan_mismatch)
        fail(std::to_string(nan_mismatch) +
             " elements are NaN where the reference is not, or the reverse "
             "(NaN must propagate as in PyTorch), first " +
             first_nan_mismatch);
    if (den > 0.0) {
        r.err = std::sqrt(num / den);
        r.err_naive = std::sqrt(num_naive / den);
        r.bound = 2.0 * r.err_naive + r.floor;
    } else {  // every checked row sees no key: the reference is all zeros, so demand exact zeros
        r.err = std::sqrt(num);
        r.bound = 0.0;
    }
    if (!(r.err <= r.bound))
        fail("relative error " + fmt_double(r.err) + " exceeds the bound " + fmt_double(r.bound) +
             (den > 0.0 ? "" : " (all-masked rows must be exact zeros)"));
    if (worst_lse_ratio > 1.0)
        fail("LSE error " + fmt_double(r.lse_max_err) + " exceeds its tolerance " + fmt_double(r.lse_tol));
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
