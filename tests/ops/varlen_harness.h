// The varlen-attention test harness, shared by the CPU (tests/ops/test_varlen_cpu.cpp) and GPU
// (tests/gpu/test_varlen_gpu.cpp) tests, on the op harness's core (attention_check.h): fresh random
// inputs per case,
// NaN-poisoned outputs, every element checked for NaN/Inf, rows that see no key must be exact zeros with
// an LSE of -inf, and ‖out − ref‖ / ‖ref‖ against the float64 reference (cpu::reference_row on each
// sequence as its own dense problem) within 2× that of the naive same-precision emulation plus the
// dtype's floor (tests/support/tolerance.h).
//
// Packing is adversarial on purpose: the packed tensors have spare rows before the first and after the
// last sequence (NaN in q, k and v, so a kernel that reads outside its sequence poisons its output; and
// NaN in out, which must stay untouched), sequences may be empty, and max_seqlen_q may exceed every
// length.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/attention_cpu.h"
#include "flashport/attention_varlen.h"
#include "flashport/device.h"
#include "flashport/error.h"
#include "flashport/memory.h"
#include "paged_attention_harness.h"

namespace flashport::test {

struct VarlenCase {  // fp16 / bf16 (the harness stores 16-bit values)
    std::vector<std::pair<int32_t, int32_t>> seqs{{1, 1}};  // (q_len, kv_len) per sequence
    int64_t n_heads = 1, n_kv_heads = 1, head_dim = 64;
    DType dtype = DType::BF16;
    bool causal = false, lse = true;
    int64_t window_left = -1;
    int32_t lead = 0, tail = 0;    // spare packed rows before the first and after the last sequence
    int32_t extra_max_q = 0;       // max_seqlen_q = longest q_len + this
    int32_t max_k = -1;            // max_seqlen_k: -1 the longest kv_len, 0 unknown, else this (a wrong hint)
    AttentionImpl impl = AttentionImpl::AUTO;
    Device device = Device::cpu();
    double reference_budget = -1;  // < 0: compare every row; else attention_check.h's sample_rows

    std::string name() const {
        std::ostringstream os;
        os << dtype_name(dtype) << "_seqs";
        for (size_t i = 0; i < seqs.size(); ++i) os << (i ? "_" : "") << seqs[i].first << "x" << seqs[i].second;
        os << "_h" << n_heads << "_kvh" << n_kv_heads << "_d" << head_dim << (causal ? "_causal" : "_full");
        if (window_left >= 0) os << "_win" << window_left;
        os << (lse ? "_lse" : "") << "_pad" << lead << "x" << tail << "_maxq" << extra_max_q << "_" << impl_name(impl)
           << (max_k >= 0 ? "_maxk" + std::to_string(max_k) : "") << "_" << (device.is_cpu() ? "cpu" : "gpu");
        return os.str();
    }
};

using VarlenResult = CaseResult;

// Packed host inputs of a case and the offsets.
struct VarlenInputs {
    std::vector<int32_t> cu_q, cu_k;
    int64_t total_q = 0, total_k = 0, max_q = 0, max_k = 0;
    std::vector<uint16_t> q, k, v;  // storage dtype bits
    std::vector<float> qf, kf, vf;  // the same values as floats (NaN in spare rows)
};

inline VarlenInputs make_varlen_inputs(const VarlenCase& c, uint64_t seed) {
    Rng rng(case_seed(c.name(), seed));
    VarlenInputs in;
    in.cu_q.push_back(c.lead);
    in.cu_k.push_back(c.lead);
    for (auto [lq, lk] : c.seqs) {
        in.cu_q.push_back(in.cu_q.back() + lq);
        in.cu_k.push_back(in.cu_k.back() + lk);
        in.max_q = std::max<int64_t>(in.max_q, lq);
        in.max_k = std::max<int64_t>(in.max_k, lk);
    }
    in.max_q += c.extra_max_q;
    if (c.max_k >= 0) in.max_k = c.max_k;
    in.total_q = in.cu_q.back() + c.tail;
    in.total_k = in.cu_k.back() + c.tail;
    const int64_t D = c.head_dim;
    auto fill = [&](std::vector<uint16_t>& bits, std::vector<float>& f, int64_t rows, int64_t heads, int32_t first,
                    int32_t last, double sigma) {
        bits.assign(size_t(rows * heads * D), nan_bits(c.dtype));
        f.assign(bits.size(), std::nanf(""));
        for (size_t n = size_t(first * heads * D); n < size_t(last * heads * D); ++n) {
            f[n] = round_to(c.dtype, float(sigma * rng.normal()));
            store_from_float(&bits[n], c.dtype, f[n]);
        }
    };
    // q ~ 2·N(0, 1) as in the op harness (scores ~N(0, 4): neither one-hot nor uniform).
    fill(in.q, in.qf, in.total_q, c.n_heads, in.cu_q.front(), in.cu_q.back(), 2.0);
    fill(in.k, in.kf, in.total_k, c.n_kv_heads, in.cu_k.front(), in.cu_k.back(), 1.0);
    fill(in.v, in.vf, in.total_k, c.n_kv_heads, in.cu_k.front(), in.cu_k.back(), 1.0);
    return in;
}

// Runs attention_varlen on the case's device (and times it with `timer`, as run_case does) and checks it.
inline VarlenResult run_varlen_case(const VarlenCase& c, uint64_t seed = run_seed(), const CallTimer& timer = {}) {
    VarlenResult r = start_result(c.name(), seed, c.dtype);
    auto fail = [&](const std::string& s) { r.failures.push_back(s); };
    const VarlenInputs in = make_varlen_inputs(c, seed);
    const int64_t H = c.n_heads, KVH = c.n_kv_heads, D = c.head_dim, B = int64_t(c.seqs.size());
    std::vector<uint16_t> out_host(size_t(in.total_q * H * D), nan_bits(c.dtype));
    std::vector<float> lse_host(size_t(H * in.total_q), std::nanf(""));

    const Device dev = c.device;
    auto place = [&](const void* host, size_t bytes, Buffer& buf) { return place_on(dev, host, bytes, buf); };
    Buffer qb, kb, vb, ob, lb, cqb, ckb;
    const TensorView q(place(in.q.data(), in.q.size() * 2, qb), c.dtype, {in.total_q, H, D}, dev);
    const TensorView k(place(in.k.data(), in.k.size() * 2, kb), c.dtype, {in.total_k, KVH, D}, dev);
    const TensorView v(place(in.v.data(), in.v.size() * 2, vb), c.dtype, {in.total_k, KVH, D}, dev);
    const TensorView out(place(out_host.data(), out_host.size() * 2, ob), c.dtype, {in.total_q, H, D}, dev);
    const TensorView lse(place(lse_host.data(), lse_host.size() * 4, lb), DType::F32, {H, in.total_q}, dev);
    VarlenSeqs seqs;
    seqs.cu_seqlens_q = static_cast<const int32_t*>(place(in.cu_q.data(), in.cu_q.size() * 4, cqb));
    seqs.cu_seqlens_k = static_cast<const int32_t*>(place(in.cu_k.data(), in.cu_k.size() * 4, ckb));
    seqs.batch = B;
    seqs.max_seqlen_q = in.max_q;
    seqs.max_seqlen_k = in.max_k;
    AttentionParams params;
    params.causal = c.causal;
    params.window_left = c.window_left;
    params.impl = c.impl;
    const auto call = [&] { return attention_varlen(out, q, k, v, seqs, c.lse ? &lse : nullptr, params).kernel; };
    try {
        r.kernel = call();
        synchronize(dev);
        if (timer) r.ms = 1e3 * timer(call);
    } catch (const Error& e) {
        fail(std::string("attention_varlen threw: ") + e.what());
        return r;
    }
    fetch_outputs(dev, out_host, out, lse_host, lse);

    int64_t touched = 0;
    // Spare rows must be untouched (still NaN), in out and in lse.
    for (int64_t i = 0; i < in.total_q; ++i) {
        if (i >= in.cu_q.front() && i < in.cu_q.back()) continue;
        for (int64_t n = 0; n < H * D; ++n)
            if (!std::isnan(load_as_float(&out_host[size_t(i * H * D + n)], c.dtype))) ++touched;
        for (int64_t h = 0; h < H; ++h)
            if (!std::isnan(lse_host[size_t(h * in.total_q + i)])) ++touched;
    }
    std::vector<SeqRows> rows(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) {
        const int64_t q0 = in.cu_q[size_t(b)], k0 = in.cu_k[size_t(b)];
        SeqRows& s = rows[size_t(b)];
        s.q_len = c.seqs[size_t(b)].first, s.kv_len = c.seqs[size_t(b)].second;
        s.q = in.qf.data() + q0 * H * D, s.k = in.kf.data() + k0 * KVH * D, s.v = in.vf.data() + k0 * KVH * D;
        s.out = out_host.data() + q0 * H * D;
        s.lse = c.lse ? lse_host.data() + q0 : nullptr, s.lse_head_stride = in.total_q;
    }
    Rng rng(r.seed ^ 0x5a5a);  // the row sample's own stream: the inputs are drawn from r.seed
    const float scale = float(1.0 / std::sqrt(double(D)));
    check_sequences(rows, {c.dtype, H, KVH, D, scale, c.causal, c.window_left, false, c.reference_budget}, rng, r);
    check_lse_untouched(c.lse, lse_host.data(), lse_host.size() * 4, r);
    if (touched) fail(std::to_string(touched) + " values of rows no sequence claims were written");
    return r;
}

inline VarlenResult check_varlen_case(const VarlenCase& c) {
    return expect_ok(run_varlen_case(c));
}

}  // namespace flashport::test
