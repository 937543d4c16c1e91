// The core the attention harnesses share (op_harness.cpp for dense attention, paged_attention_harness.h,
// varlen_harness.h): the naive same-precision emulation the error bound is relative to, and the
// checks each output row goes through, tallied into one CaseResult (op_harness.h) by the tolerance
// rule of tests/support/tolerance.h.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/attention_cpu.h"
#include "flashport/device.h"
#include "flashport/dtype.h"
#include "flashport/memory.h"
#include "op_harness.h"
#include "support/poison.h"
#include "support/rng.h"
#include "support/tolerance.h"

namespace flashport::test {

// The "naive same-precision" emulation of one query row, PyTorch's math path in the input dtype:
// S = scale · q kᵀ accumulated in fp32 and rounded to the dtype; P = softmax(S) in fp32, rounded;
// O = P v accumulated in fp32, rounded. For fp32 inputs it is simply a plain fp32 implementation.
// Shapes: q [D]; k, v [keys][n_kv][D] (dense floats); the row sees keys [lo, hi) of head kvh; out [D].
inline void emulate_row(DType dt, float scale, const float* q, const float* k, const float* v, int64_t kvh,
                        int64_t n_kv, int64_t D, int64_t lo, int64_t hi, double* out) {
    std::fill(out, out + D, 0.0);
    if (hi <= lo) return;
    std::vector<float> p(size_t(hi - lo));
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t j = lo; j < hi; ++j) {
        const float* kr = &k[(j * n_kv + kvh) * D];
        float acc = 0.0f;
        for (int64_t d = 0; d < D; ++d) acc += q[d] * kr[d];
        p[size_t(j - lo)] = round_to(dt, acc * scale);
        m = std::max(m, p[size_t(j - lo)]);
    }
    float l = 0.0f;
    for (float& x : p) l += (x = std::exp(x - m));
    for (float& x : p) x = round_to(dt, x / l);
    std::vector<float> o(size_t(D), 0.0f);
    for (int64_t j = lo; j < hi; ++j)
        for (int64_t d = 0; d < D; ++d) o[size_t(d)] += p[size_t(j - lo)] * v[(j * n_kv + kvh) * D + d];
    for (int64_t d = 0; d < D; ++d) out[d] = round_to(dt, o[size_t(d)]);
}

inline std::string fmt_double(double x) {  // "%.3g": failures and summaries print 3 digits
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", x);
    return buf;
}

// Where a harness's host buffer lives for the op: on the CPU the buffer itself, else a device copy
// held by `buf` (at least 16 bytes, so an empty tensor still has an address).
inline void* place_on(Device dev, const void* host, size_t bytes, Buffer& buf) {
    if (dev.is_cpu()) return const_cast<void*>(host);
    buf = Buffer(std::max<size_t>(bytes, 16), dev);
    if (bytes) copy_bytes(buf.data(), dev, host, Device::cpu(), bytes);
    return buf.data();
}

// Copies a paged or varlen run's 16-bit output and fp32 LSE back into their host buffers (on the CPU
// the op wrote those buffers themselves).
inline void fetch_outputs(Device dev, std::vector<uint16_t>& out, const TensorView& out_view, std::vector<float>& lse,
                          const TensorView& lse_view) {
    if (dev.is_cpu()) return;
    copy_bytes(out.data(), Device::cpu(), out_view.data, dev, out.size() * 2);
    copy_bytes(lse.data(), Device::cpu(), lse_view.data, dev, lse.size() * 4);
}

// How failures name a query row: "(b 0, i 5, h 3)".
inline std::string row_name(int64_t b, int64_t i, int64_t h) {
    return "(b " + std::to_string(b) + ", i " + std::to_string(i) + ", h " + std::to_string(h) + ")";
}

// The checks of every output row, in two parts because the dense harness samples the rows it compares
// with the (costly) reference but checks every row's values:
//   check_row:   each element finite; a row that sees no key exactly 0 with an LSE of -inf, any other
//                row a finite LSE.
//   compare_row: the error against the float64 reference and the emulation (NormError), and the
//                LSE's error. With a planted NaN (nan_case), NaN must be exactly where the reference
//                has it, in the output and the LSE, and rows the reference makes NaN are left out of
//                the error; only element `nan_ok_d` may be NaN where the reference is not (a masked
//                key's NaN value reaching the row as 0 · NaN, as in PyTorch's math path).
// `got(d)` reads the output's element d as float; `lse_got` is null when no LSE was requested;
// `where()` names the row for the first failure of each kind.
struct RowTally {
    bool nan_case = false;
    NormError norm;
    double lse_worst = 0.0, lse_max_err = 0.0, lse_tol = 0.0;  // worst |err| / tol, and that error
    int64_t non_finite = 0, nonzero_masked = 0, bad_lse = 0, nan_mismatch = 0;
    std::string first_non_finite, first_nonzero_masked, first_bad_lse, first_nan_mismatch;

    template <typename Got, typename Where>
    void check_row(Got got, int64_t D, bool sees_none, const float* lse_got, Where where) {
        for (int64_t d = 0; d < D; ++d) {
            const float x = got(d);
            if (!nan_case && !std::isfinite(x) && non_finite++ == 0) first_non_finite = where() + " d " + std::to_string(d);
            if (sees_none && x != 0.0f && std::isfinite(x) && nonzero_masked++ == 0)
                first_nonzero_masked = where() + " = " + fmt_double(x);
        }
        if (!lse_got) return;
        const float l = *lse_got;
        const bool good = sees_none ? (std::isinf(l) && l < 0) : nan_case || std::isfinite(l);
        if (!good && bad_lse++ == 0)
            first_bad_lse = where() + " = " + fmt_double(double(l)) + (sees_none ? " (sees no key: want -inf)" : " (want finite)");
    }

    template <typename Got, typename Where>
    void compare_row(Got got, const double* ref, const double* emu, int64_t D, const float* lse_got, double lse_ref,
                     int64_t nan_ok_d, Where where) {
        if (nan_case) {
            bool ref_nan = std::isnan(lse_ref);
            for (int64_t d = 0; d < D; ++d) {
                const float x = got(d);
                ref_nan |= std::isnan(ref[d]);
                if (d == nan_ok_d && std::isnan(x)) {
                    ref_nan = true;  // tolerated, and left out of the error
                    continue;
                }
                if ((std::isnan(x) != std::isnan(ref[d]) || std::isinf(x)) && nan_mismatch++ == 0)
                    first_nan_mismatch = where() + " d " + std::to_string(d) + " = " + fmt_double(x) + ", reference " +
                                         fmt_double(ref[d]);
            }
            if (lse_got && std::isnan(*lse_got) != std::isnan(lse_ref) && nan_mismatch++ == 0)
                first_nan_mismatch = "LSE " + where() + " = " + fmt_double(*lse_got) + ", reference " + fmt_double(lse_ref);
            if (ref_nan) return;
        }
        for (int64_t d = 0; d < D; ++d) norm.add(got(d), ref[d], emu[d]);
        if (lse_got && std::isfinite(lse_ref)) {
            const double e = std::abs(double(*lse_got) - lse_ref), tol = lse_tolerance(lse_ref);
            if (!(e / tol <= lse_worst)) {
                lse_worst = std::isfinite(e) ? e / tol : std::numeric_limits<double>::infinity();
                lse_max_err = e, lse_tol = tol;
            }
        }
    }

    // Appends the failures to r and sets its err, err_naive, bound and LSE figures.
    void finish(CaseResult& r) const {
        auto fail = [&](const std::string& s) { r.failures.push_back(s); };
        if (non_finite) fail(std::to_string(non_finite) + " output elements are NaN/Inf, first at " + first_non_finite);
        if (nonzero_masked)
            fail(std::to_string(nonzero_masked) + " outputs of rows that see no key are not 0, first " +
                 first_nonzero_masked);
        if (bad_lse) fail(std::to_string(bad_lse) + " LSE values wrong, first " + first_bad_lse);
        if (nan_mismatch)
            fail(std::to_string(nan_mismatch) +
                 " elements are NaN where the reference is not, or the reverse (NaN must propagate as in "
                 "PyTorch), first " + first_nan_mismatch);
        const NormVerdict v = norm_bound(norm, r.floor);
        r.err = v.err, r.err_naive = v.err_emulated, r.bound = v.bound;
        if (!v.ok) fail(v.failure);
        r.lse_max_err = lse_max_err, r.lse_tol = lse_tol;
        if (lse_worst > 1.0)
            fail("LSE error " + fmt_double(lse_max_err) + " exceeds its tolerance " + fmt_double(lse_tol));
    }
};

// gtest glue of the paged and varlen harnesses: fails with the full summary (numbers, reproduce line),
// and hands the result on.
template <typename Result>
Result expect_ok(Result r) {
    EXPECT_TRUE(r.ok()) << r.summary();
    return r;
}

// With no LSE requested, the op must leave the poisoned LSE buffer as it was.
inline void check_lse_untouched(bool lse_requested, const void* lse, size_t bytes, CaseResult& r) {
    if (!lse_requested && !all_poison(lse, bytes, DType::F32))
        r.failures.push_back("the kernel wrote LSE although none was requested");
}

// The float64 reference costs head_dim multiply-adds per visible key per row, twice (reference and
// emulation). A case over this many checks a deterministic sample of rows rather than all of them
// (finiteness and masking are still checked on every row): the dense harness always, the paged and
// varlen harnesses when the case asks (their `reference_budget`; the bench problems do).
constexpr double REFERENCE_BUDGET = double(1 << 24);
constexpr int64_t MIN_SAMPLED_ROWS = 48;

// Rows [0, rows) to compare with the reference, sorted, when comparing all of them would cost `cost`
// multiply-adds: all when that fits `budget` (< 0: no limit), else `must`, the first and the last row
// and random others, thinned evenly to budget / (cost / rows) rows, at least MIN_SAMPLED_ROWS.
inline std::vector<int64_t> sample_rows(int64_t rows, double cost, double budget, std::vector<int64_t> must, Rng& rng) {
    std::vector<int64_t> picked;
    if (budget < 0 || cost <= budget || rows <= MIN_SAMPLED_ROWS) {
        picked.resize(size_t(rows));
        for (int64_t n = 0; n < rows; ++n) picked[size_t(n)] = n;
        return picked;
    }
    const int64_t want =
        std::min<int64_t>(rows, std::max<int64_t>(MIN_SAMPLED_ROWS, int64_t(budget / (cost / double(rows)))));
    picked = {0, rows - 1};
    picked.insert(picked.end(), must.begin(), must.end());
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

// One sequence of a paged or packed batch as the checks see it: dense float copies of its inputs
// (q [q_len][n_heads][D], k and v [kv_len][n_kv_heads][D]: the reference reads these, the kernel read
// the paged or packed tensors), and where its 16-bit output rows [q_len][n_heads][D] and its LSE
// (head h, row i at lse[h * lse_head_stride + i]; null when none was requested) ended up.
struct SeqRows {
    int64_t q_len = 0, kv_len = 0;
    const float *q = nullptr, *k = nullptr, *v = nullptr;
    const uint16_t* out = nullptr;
    const float* lse = nullptr;
    int64_t lse_head_stride = 0;
    int64_t nan_v_key = -1, nan_v_head = -1, nan_v_d = -1;  // a NaN planted in this sequence's V
};

// What the paged and varlen cases share: shape, parameters and how many rows to compare.
struct SeqCheck {
    DType dtype;
    int64_t n_heads, n_kv_heads, head_dim;
    float scale;
    bool causal;
    int64_t window_left;
    bool nan_case;
    double budget;  // sample_rows's; a NaN case compares every row
};

// Every row of every sequence through check_row, the sampled rows also through compare_row against
// cpu::reference_row on the dense copies; fills r's row counts and figures (RowTally::finish).
inline void check_sequences(const std::vector<SeqRows>& seqs, const SeqCheck& p, Rng& rng, CaseResult& r) {
    const int64_t H = p.n_heads, KVH = p.n_kv_heads, D = p.head_dim, group = H / KVH;
    double cost = 0.0;
    r.rows_total = 0;
    for (const SeqRows& s : seqs) {
        r.rows_total += s.q_len * H;
        cost += double(s.q_len * H) * double(std::max<int64_t>(s.kv_len, 1)) * double(D);
    }
    const std::vector<int64_t> picked = sample_rows(r.rows_total, cost, p.nan_case ? -1.0 : p.budget, {}, rng);
    r.rows_checked = int64_t(picked.size());
    RowTally tally;
    tally.nan_case = p.nan_case;
    std::vector<double> ref(static_cast<size_t>(D)), emu(static_cast<size_t>(D));
    static const float no_keys[1] = {0.0f};  // a sequence without keys still needs an address
    size_t next = 0;
    int64_t row = 0;
    for (size_t b = 0; b < seqs.size(); ++b) {
        const SeqRows& s = seqs[b];
        AttentionPlan plan;
        plan.shape = {1, s.q_len, s.kv_len, H, KVH, D};
        plan.params.scale = p.scale, plan.params.causal = p.causal, plan.params.window_left = p.window_left;
        const TensorView qv(const_cast<float*>(s.q ? s.q : no_keys), DType::F32, {1, s.q_len, H, D});
        const TensorView kv(const_cast<float*>(s.k ? s.k : no_keys), DType::F32, {1, s.kv_len, KVH, D});
        const TensorView vv(const_cast<float*>(s.v ? s.v : no_keys), DType::F32, {1, s.kv_len, KVH, D});
        for (int64_t i = 0; i < s.q_len; ++i) {
            const cpu::KeyRange keys = cpu::visible_keys(i, s.q_len, s.kv_len, p.causal, p.window_left);
            for (int64_t h = 0; h < H; ++h, ++row) {
                const uint16_t* o = s.out + (i * H + h) * D;
                const auto got = [&](int64_t d) { return load_as_float(o + d, p.dtype); };
                const float* lse_got = s.lse ? s.lse + h * s.lse_head_stride + i : nullptr;
                const auto where = [&] { return row_name(int64_t(b), i, h); };  // b: the sequence, i: its row
                tally.check_row(got, D, keys.lo >= keys.hi, lse_got, where);
                if (next >= picked.size() || picked[next] != row) continue;
                ++next;
                double ref_lse = 0.0;
                cpu::reference_row(plan, qv, kv, vv, 0, h, i, ref.data(), &ref_lse);
                emulate_row(p.dtype, p.scale, s.q + (i * H + h) * D, s.k, s.v, h / group, KVH, D, keys.lo, keys.hi,
                            emu.data());
                // A masked key's NaN value may reach the row as 0 · NaN (see op_harness.cpp).
                const bool masked_nan_v =
                    s.nan_v_head == h / group && (s.nan_v_key < keys.lo || s.nan_v_key >= keys.hi);
                tally.compare_row(got, ref.data(), emu.data(), D, lse_got, ref_lse, masked_nan_v ? s.nan_v_d : -1,
                                  where);
            }
        }
    }
    tally.finish(r);
}

// Query-key pairs a problem's rows see (cpu::visible_keys), per batch and head: the bench counts
// 4 · head_dim flops per pair (q kᵀ and P v, a multiply and an add each), so causal counts exactly
// the visible half (plus the diagonal) rather than half the square.
inline double visible_pairs(int64_t q_len, int64_t kv_len, bool causal, int64_t window_left) {
    double pairs = 0.0;
    for (int64_t i = 0; i < q_len; ++i) {
        const cpu::KeyRange keys = cpu::visible_keys(i, q_len, kv_len, causal, window_left);
        pairs += double(std::max<int64_t>(keys.hi - keys.lo, 0));
    }
    return pairs;
}

// One bench problem of the attention family (attention_case.h, attention_varlen_case.h,
// paged_attention_case.h), as bench/ops.cpp runs it: its name, bytes and flops (the floors), its
// parameters as JSON (--list, for bench/gpu/ops_peers.py and decode_peers.py), and a run on a device
// through the op's harness: the check against float64 (sampled rows) and the timing by `timer`.
struct AttentionBenchCase {
    std::string op, name;
    DType dtype;
    double bytes = 0, flops = 0;
    std::string params;
    bool on_cpu = true;  // false: too big for a 2-core CPU (the GPU tests and the GPU bench run it)
    std::function<CaseResult(Device, const CallTimer&)> run;
};

// A problem's bench case at `dtype`, named as the problem, its floors and run still to fill in.
template <typename Problem>
AttentionBenchCase bench_case_of(const char* op, const Problem& p, DType dtype) {
    AttentionBenchCase b;
    b.op = op, b.name = p.name, b.dtype = dtype, b.on_cpu = p.on_cpu;
    return b;
}

// Adds `count` sequences of q_len queries over kv_len keys to a bench case's floors: q, out, k and v
// moved once each, 4 · head_dim flops per visible query-key pair and head.
inline void add_sequences(AttentionBenchCase& b, int64_t count, int64_t q_len, int64_t kv_len, int64_t n_heads,
                          int64_t n_kv_heads, int64_t head_dim, bool causal) {
    const double es = double(dtype_size(b.dtype)), D = double(head_dim), n = double(count);
    b.bytes += n * es * D * double(2 * q_len * n_heads + 2 * kv_len * n_kv_heads);
    b.flops += n * 4.0 * D * double(n_heads) * visible_pairs(q_len, kv_len, causal, -1);
}

// The heads part of a problem's --list params: "n_heads": 28, "n_kv_heads": 4, "head_dim": 128, "causal": true.
inline std::string heads_json(int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, bool causal) {
    return "\"n_heads\": " + std::to_string(n_heads) + ", \"n_kv_heads\": " + std::to_string(n_kv_heads) +
           ", \"head_dim\": " + std::to_string(head_dim) + ", \"causal\": " + (causal ? "true" : "false");
}

// The bench problems as a test (as expect_cases_on_host for the other ops): each problem the device
// takes (the CPU: the small ones), checked once against the float64 reference.
inline void expect_bench_cases_pass(const std::vector<AttentionBenchCase>& cases, Device device) {
    for (const AttentionBenchCase& c : cases) {
        if (device.is_cpu() && !c.on_cpu) continue;
        SCOPED_TRACE(c.op + "/" + c.name + "/" + dtype_name(c.dtype));
        const CaseResult r = c.run(device, {});
        EXPECT_TRUE(r.ok()) << r.summary();
    }
}

}  // namespace flashport::test
