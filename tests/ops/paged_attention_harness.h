// The paged-attention test harness, shared by the CPU (tests/ops/test_paged_attention_cpu.cpp) and GPU
// (tests/gpu/test_paged_attention_gpu.cpp) tests, on the op harness's core (attention_check.h): fresh
// random inputs per case, NaN-poisoned outputs, every element checked for NaN/Inf, rows that see no key
// must be exact zeros with an LSE of -inf, and ‖out − ref‖ / ‖ref‖ against the float64 reference
// (cpu::reference_row on dense copies of what the case wrote into the cache) within 2× that of the
// naive same-precision emulation plus the dtype's floor (tests/support/tolerance.h).
//
// The cache a case builds is adversarial on purpose:
//   - the block table is a random permutation of the pool (never the identity), with spare blocks and
//     unused table entries set to -1, so a kernel that ignores or over-reads the table fails;
//   - every cache slot that holds no token of a sequence (the tail of a partial last block, spare
//     blocks) is NaN, so reading past seq_len poisons the output;
//   - optionally K and V are interleaved in one buffer ([num_blocks, 2, block_size, heads, dim]), so
//     the cache strides differ from the contiguous ones.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "attention_check.h"
#include "backends/cpu/attention_cpu.h"
#include "flashport/device.h"
#include "flashport/error.h"
#include "flashport/memory.h"
#include "flashport/paged_attention.h"
#include "op_harness.h"
#include "support/poison.h"
#include "support/rng.h"
#include "support/seed.h"

namespace flashport::test {

struct PagedCase {
    std::vector<int32_t> seq_lens{1};  // batch = seq_lens.size()
    int64_t q_len = 1, n_heads = 1, n_kv_heads = 1, head_dim = 128, block_size = 16;
    DType dtype = DType::BF16;
    bool causal = true, lse = true, interleaved_kv = false;
    int num_splits = 0;  // 0: automatic
    float scale = 0.0f;
    Device device = Device::cpu();
    NanAt nan_at = NanAt::NONE;  // one NaN planted in q, the K cache or the V cache (op_harness.h)
    double reference_budget = -1;  // < 0: compare every row; else attention_check.h's sample_rows
    // Workspace reuse: the call runs `runs` times on one workspace, outputs poisoned before each run
    // and each run checked (a graph replay's reuse); with dirty_workspace, the workspace is filled
    // with 0xff bytes (NaN floats, counters at UINT32_MAX) before each run, as a fresh one may be.
    int runs = 1;
    bool dirty_workspace = false;

    std::string name() const {
        std::ostringstream os;
        os << dtype_name(dtype) << "_len";
        for (size_t i = 0; i < seq_lens.size(); ++i) os << (i ? "x" : "") << seq_lens[i];
        os << "_q" << q_len << "_h" << n_heads << "_kvh" << n_kv_heads << "_d" << head_dim << "_bs" << block_size
           << (causal ? "_causal" : "_full") << (lse ? "_lse" : "") << (interleaved_kv ? "_interleaved" : "")
           << "_splits" << (num_splits ? std::to_string(num_splits) : std::string("auto"))
           << "_" << (device.is_cpu() ? "cpu" : "gpu");
        if (nan_at != NanAt::NONE) os << (nan_at == NanAt::Q ? "_nanq" : nan_at == NanAt::K ? "_nank" : "_nanv");
        if (runs > 1) os << "_runs" << runs;
        if (dirty_workspace) os << "_dirtyws";
        if (scale != 0.0f) {  // e.g. _s2p5, _sm0p125
            std::string v = std::to_string(scale);
            v.erase(v.find_last_not_of('0') + 1);
            for (char& ch : v) ch = ch == '.' ? 'p' : ch == '-' ? 'm' : ch;
            os << "_s" << v;
        }
        return os.str();
    }
};

struct PagedResult : CaseResult {
    int num_splits = 0;
    std::vector<float> out;  // the output, [batch, q_len, n_heads, head_dim] as floats
    std::vector<uint8_t> workspace;  // the workspace's bytes after the last run (runs > 1, GPU)
};

inline uint16_t nan_bits(DType dt) { return uint16_t(poison_bits(dt)); }  // the 16-bit dtypes' NaN

// Builds the case's cache and inputs (fp16 or bf16), runs paged_attention on the case's device (and
// times it with `timer`, as run_case does) and checks it.
inline PagedResult run_paged_case(const PagedCase& c, uint64_t seed = run_seed(), const CallTimer& timer = {}) {
    PagedResult r;
    static_cast<CaseResult&>(r) = start_result(c.name(), seed, c.dtype);
    auto fail = [&](const std::string& s) { r.failures.push_back(s); };
    // Inputs depend on the shape and the seed, not on the split count, so runs that differ only in
    // num_splits see the same data.
    PagedCase shape = c;
    shape.num_splits = 0;
    shape.runs = 1, shape.dirty_workspace = false;
    r.seed = case_seed(shape.name(), seed);
    Rng rng(r.seed);

    const int64_t B = int64_t(c.seq_lens.size()), D = c.head_dim, H = c.n_heads, KVH = c.n_kv_heads, BS = c.block_size;
    const int64_t Q = c.q_len;
    std::vector<int64_t> nblk(static_cast<size_t>(B));
    int64_t used = 0, max_blocks = 1;
    for (int64_t b = 0; b < B; ++b) {
        nblk[size_t(b)] = (c.seq_lens[size_t(b)] + BS - 1) / BS;
        used += nblk[size_t(b)];
        max_blocks = std::max(max_blocks, nblk[size_t(b)] + 1);  // one unused (-1) entry per row at least
    }
    const int64_t num_blocks = used + 3;  // spare blocks: never referenced, NaN
    std::vector<int32_t> perm(static_cast<size_t>(num_blocks));
    std::iota(perm.begin(), perm.end(), 0);
    for (int64_t i = num_blocks - 1; i > 0; --i) std::swap(perm[size_t(i)], perm[size_t(rng.below(i + 1))]);
    std::vector<int32_t> table(size_t(B * max_blocks), -1);
    for (int64_t b = 0, next = 0; b < B; ++b)
        for (int64_t i = 0; i < nblk[size_t(b)]; ++i) table[size_t(b * max_blocks + i)] = perm[size_t(next++)];

    // The caches, NaN everywhere, then each sequence's tokens; dense float copies for the emulation.
    const int64_t slot = KVH * D, block = BS * slot;
    const int64_t kv_elems = num_blocks * block * 2;
    std::vector<uint16_t> kv_host(size_t(kv_elems), nan_bits(c.dtype));
    TensorView kc(kv_host.data(), c.dtype, {num_blocks, BS, KVH, D}), vc = kc;
    if (c.interleaved_kv) {  // [num_blocks, 2, BS, KVH, D]
        kc.stride[0] = vc.stride[0] = 2 * block;
        vc.data = kv_host.data() + block;
    } else {
        vc.data = kv_host.data() + num_blocks * block;
    }
    std::vector<std::vector<float>> kf(static_cast<size_t>(B)), vf(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) {
        const int64_t len = c.seq_lens[size_t(b)];
        kf[size_t(b)].resize(size_t(len * slot));
        vf[size_t(b)].resize(size_t(len * slot));
        for (int64_t j = 0; j < len; ++j) {
            const int64_t page = table[size_t(b * max_blocks + j / BS)];
            for (int64_t h = 0; h < KVH; ++h)
                for (int64_t d = 0; d < D; ++d) {
                    const float x = round_to(c.dtype, float(rng.normal())), y = round_to(c.dtype, float(rng.normal()));
                    store_from_float(kc.at(page, j % BS, h, d), c.dtype, x);
                    store_from_float(vc.at(page, j % BS, h, d), c.dtype, y);
                    kf[size_t(b)][size_t((j * KVH + h) * D + d)] = x;
                    vf[size_t(b)][size_t((j * KVH + h) * D + d)] = y;
                }
        }
    }
    // q ~ 2·N(0, 1) as in the op harness (scores ~N(0, 4): neither one-hot nor uniform).
    const size_t q_elems = size_t(B * Q * H * D);
    std::vector<uint16_t> q_host(q_elems), out_host(q_elems, nan_bits(c.dtype));
    std::vector<float> qf(q_elems);
    for (size_t n = 0; n < q_host.size(); ++n) {
        qf[n] = round_to(c.dtype, float(2.0 * rng.normal()));
        store_from_float(&q_host[n], c.dtype, qf[n]);
    }
    std::vector<float> lse_host(size_t(B * H * Q), std::numeric_limits<float>::quiet_NaN());

    // One planted NaN (op_harness.h's NanAt): in q, or in a token of a sequence's K or V cache.
    struct {
        int64_t b = -1, j = -1, kvh = -1, d = -1;
    } planted;
    if (c.nan_at == NanAt::Q) {
        const size_t n = size_t(rng.below(int64_t(q_elems)));
        qf[n] = std::numeric_limits<float>::quiet_NaN();
        store_from_float(&q_host[n], c.dtype, qf[n]);
    } else if (c.nan_at != NanAt::NONE) {
        const int64_t b = rng.below(B), len = c.seq_lens[size_t(b)];
        if (len > 0) {
            planted.b = b;
            planted.j = rng.below(len);
            planted.kvh = rng.below(KVH);
            planted.d = rng.below(D);
            const TensorView& cache = c.nan_at == NanAt::K ? kc : vc;
            std::vector<float>& dense = c.nan_at == NanAt::K ? kf[size_t(b)] : vf[size_t(b)];
            const int64_t page = table[size_t(b * max_blocks + planted.j / BS)];
            store_from_float(cache.at(page, planted.j % BS, planted.kvh, planted.d), c.dtype,
                             std::numeric_limits<float>::quiet_NaN());
            dense[size_t((planted.j * KVH + planted.kvh) * D + planted.d)] = std::numeric_limits<float>::quiet_NaN();
        }
    }

    // Device copies (or the host buffers themselves on the CPU).
    const Device dev = c.device;
    auto place = [&](void* host, size_t bytes, Buffer& buf) { return place_on(dev, host, bytes, buf); };
    Buffer kv_buf, q_buf, out_buf, lse_buf, table_buf, lens_buf, ws_buf;
    uint16_t* kv_dev = static_cast<uint16_t*>(place(kv_host.data(), kv_host.size() * 2, kv_buf));
    PagedKVCache kv;
    kv.k_cache = kc;
    kv.v_cache = vc;
    kv.k_cache.data = kv_dev + (static_cast<uint16_t*>(kc.data) - kv_host.data());
    kv.v_cache.data = kv_dev + (static_cast<uint16_t*>(vc.data) - kv_host.data());
    kv.k_cache.device = kv.v_cache.device = dev;
    kv.block_table = static_cast<const int32_t*>(place(table.data(), table.size() * 4, table_buf));
    std::vector<int32_t> lens = c.seq_lens;
    kv.seq_lens = static_cast<const int32_t*>(place(lens.data(), lens.size() * 4, lens_buf));
    kv.max_blocks_per_seq = max_blocks;
    TensorView q(place(q_host.data(), q_host.size() * 2, q_buf), c.dtype, {B, Q, H, D}, dev);
    TensorView out(place(out_host.data(), out_host.size() * 2, out_buf), c.dtype, {B, Q, H, D}, dev);
    TensorView lse(place(lse_host.data(), lse_host.size() * 4, lse_buf), DType::F32, {B, H, Q}, dev);

    PagedAttentionParams params;
    params.scale = c.scale;
    params.causal = c.causal;
    params.num_splits = c.num_splits;
    const std::vector<uint16_t> out_poison = out_host;
    const std::vector<float> lse_poison = lse_host;
    const auto dirty = [&] {  // a workspace as a fresh allocation may leave it
        if (!c.dirty_workspace || ws_buf.size() == 0) return;
        const std::vector<uint8_t> ff(ws_buf.size(), 0xff);
        copy_bytes(ws_buf.data(), dev, ff.data(), Device::cpu(), ff.size());
    };
    try {
        const PagedAttentionPlan plan = plan_paged_attention(out, q, kv, c.lse ? &lse : nullptr, params);
        if (plan.workspace_bytes > 0) ws_buf = Buffer(plan.workspace_bytes, dev);
        const auto call = [&] {
            paged_attention(out, q, kv, c.lse ? &lse : nullptr, params, ws_buf.data(), ws_buf.size());
        };
        dirty();
        call();
        synchronize(dev);
        r.kernel = plan.kernel;
        r.num_splits = plan.params.num_splits;
        if (timer) r.ms = 1e3 * timer(call);
    } catch (const Error& e) {
        fail(std::string("paged_attention threw: ") + e.what());
        return r;
    }
    fetch_outputs(dev, out_host, out, lse_host, lse);
    // Runs 2.. on the same workspace: each from poisoned outputs, each must give the same bits as the
    // first (the same kernel on the same inputs is deterministic; the first is checked below).
    for (int run = 2; run <= c.runs; ++run) {
        const std::vector<uint16_t> first_out = out_host;
        const std::vector<float> first_lse = lse_host;
        std::copy(out_poison.begin(), out_poison.end(), out_host.begin());
        std::copy(lse_poison.begin(), lse_poison.end(), lse_host.begin());
        if (!dev.is_cpu()) {
            copy_bytes(out.data, dev, out_host.data(), Device::cpu(), out_host.size() * 2);
            copy_bytes(lse.data, dev, lse_host.data(), Device::cpu(), lse_host.size() * 4);
        }
        try {
            dirty();
            paged_attention(out, q, kv, c.lse ? &lse : nullptr, params, ws_buf.data(), ws_buf.size());
            synchronize(dev);
        } catch (const Error& e) {
            fail(std::string("paged_attention threw on run ") + std::to_string(run) + ": " + e.what());
            return r;
        }
        fetch_outputs(dev, out_host, out, lse_host, lse);
        if (std::memcmp(first_out.data(), out_host.data(), out_host.size() * 2) != 0)
            fail("run " + std::to_string(run) + " on the same workspace gave another output than run 1");
        if (c.lse && std::memcmp(first_lse.data(), lse_host.data(), lse_host.size() * 4) != 0)
            fail("run " + std::to_string(run) + " on the same workspace gave another LSE than run 1");
    }
    if (c.runs > 1 && !dev.is_cpu() && ws_buf.size() > 0) {
        r.workspace.resize(ws_buf.size());
        copy_bytes(r.workspace.data(), Device::cpu(), ws_buf.data(), dev, ws_buf.size());
    }

    // The reference reads the dense copies made while filling the cache.
    r.out.resize(out_host.size());
    for (size_t n = 0; n < out_host.size(); ++n) r.out[n] = load_as_float(&out_host[n], c.dtype);
    std::vector<SeqRows> seqs(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) {
        SeqRows& s = seqs[size_t(b)];
        s.q_len = Q, s.kv_len = c.seq_lens[size_t(b)];
        s.q = qf.data() + b * Q * H * D, s.k = kf[size_t(b)].data(), s.v = vf[size_t(b)].data();
        s.out = out_host.data() + b * Q * H * D;
        s.lse = c.lse ? lse_host.data() + b * H * Q : nullptr, s.lse_head_stride = Q;
        if (c.nan_at == NanAt::V && planted.b == b)
            s.nan_v_key = planted.j, s.nan_v_head = planted.kvh, s.nan_v_d = planted.d;
    }
    const float scale = c.scale != 0.0f ? c.scale : float(1.0 / std::sqrt(double(D)));
    check_sequences(seqs, {c.dtype, H, KVH, D, scale, c.causal, -1, c.nan_at != NanAt::NONE, c.reference_budget}, rng,
                    r);
    check_lse_untouched(c.lse, lse_host.data(), lse_host.size() * 4, r);
    return r;
}

// NaN propagation cases: one NaN in q, the K cache or the V cache; one split and several (the combine
// must not drop a NaN split), one query token and a few (causal: a planted key has rows on both sides).
inline std::vector<PagedCase> paged_nan_cases(Device device) {
    std::vector<PagedCase> cases;
    int n = 0;
    for (NanAt at : {NanAt::Q, NanAt::K, NanAt::V})
        for (int splits : {1, 0, 7})
            for (int64_t q : {1, 4}) {
                PagedCase c;
                c.device = device, c.nan_at = at, c.num_splits = splits, c.q_len = q;
                c.seq_lens = {300, 77}, c.n_heads = 8, c.n_kv_heads = 2, c.head_dim = 128;
                c.dtype = n++ % 2 ? DType::F16 : DType::BF16;
                cases.push_back(c);
            }
    return cases;
}

// gtest glue, as check_case: filter, run, fail with the summary.
inline PagedResult check_paged_case(const PagedCase& c) {
    return expect_ok(run_paged_case(c));
}

}  // namespace flashport::test
