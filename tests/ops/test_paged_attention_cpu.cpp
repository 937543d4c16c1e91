// Paged-KV attention on the CPU (decode, q_len <= 8: the pages read in place, sliced over threads;
// longer queries: gather + the dense flash kernel) against the float64 reference through the paged
// harness (paged_attention_harness.h: shuffled block tables, NaN in every unused cache slot, partial
// last blocks) on paged_attention_case.h's grid and small problems, and the API's validation: each
// bad request gets an error that names the broken limit.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "flashport/error.h"
#include "flashport/paged_attention.h"
#include "flashport/paged_cache.h"
#include "paged_attention_case.h"

namespace flashport::test {
namespace {

std::vector<PagedCase> cpu_cases() {
    PagedGridAxes a;
    a.lens = {{1}, {7}, {97}, {1023}, {1025}, {4097}, {1, 97, 1025, 7}, {0, 33}};
    a.heads = {{2, 2}, {4, 2}, {7, 1}, {8, 1}};  // GQA 1, 2, 7, 8
    a.q_lens = {1, 2, 8, 97};                    // decode, and prefill against the cached history
    a.dims = {64, 128, 40}, a.dim_step = 2;
    std::vector<PagedCase> cases = paged_grid(a);
    for (const PagedCase& c : paged_nan_cases(Device::cpu()))
        if (c.num_splits == 0) cases.push_back(c);  // the CPU has one split
    return cases;
}

class PagedAttentionCpu : public ::testing::TestWithParam<PagedCase> {};
TEST_P(PagedAttentionCpu, MatchesReference) {
    if (!case_selected(GetParam().name())) GTEST_SKIP() << "not selected by FLASHPORT_TEST_FILTER";
    const PagedResult r = check_paged_case(GetParam());
    EXPECT_EQ(r.num_splits, 1);
    const bool decode = GetParam().q_len <= PAGED_DECODE_MAX_Q_LEN;
    EXPECT_EQ(r.kernel.rfind(decode ? "cpu.paged_attention.decode." : "cpu.paged_attention.gather+cpu.flash.", 0), 0u)
        << r.kernel;
}
INSTANTIATE_TEST_SUITE_P(Cpu, PagedAttentionCpu, ::testing::ValuesIn(cpu_cases()),
                         [](const ::testing::TestParamInfo<PagedCase>& i) { return i.param.name(); });

// The bench's small problems (paged_attention_case.h), as the bench runs them.
TEST(PagedAttentionCpuProblems, MatchReference) {
    for (DType dt : {DType::BF16, DType::F16}) expect_bench_cases_pass(paged_attention_bench_cases(dt), Device::cpu());
}

// A small valid request whose parts each test breaks in turn.
struct Request {
    std::vector<uint16_t> kbuf = std::vector<uint16_t>(4 * 16 * 2 * 64), vbuf = kbuf;
    std::vector<uint16_t> qbuf = std::vector<uint16_t>(2 * 1 * 4 * 64), obuf = qbuf;
    std::vector<float> lbuf = std::vector<float>(2 * 4 * 1);
    std::vector<int32_t> table{0, 1, 2, 3}, lens{20, 5};
    PagedKVCache kv;
    TensorView q, out, lse;
    Request() {
        kv.k_cache = TensorView(kbuf.data(), DType::BF16, {4, 16, 2, 64});
        kv.v_cache = TensorView(vbuf.data(), DType::BF16, {4, 16, 2, 64});
        kv.block_table = table.data();
        kv.max_blocks_per_seq = 2;
        kv.seq_lens = lens.data();
        q = TensorView(qbuf.data(), DType::BF16, {2, 1, 4, 64});
        out = TensorView(obuf.data(), DType::BF16, {2, 1, 4, 64});
        lse = TensorView(lbuf.data(), DType::F32, {2, 4, 1});
    }
    std::string run(const PagedAttentionParams& p = {}) {
        try {
            paged_attention(out, q, kv, &lse, p, nullptr, 0);
        } catch (const Error& e) {
            return e.what();
        }
        return "ok";
    }
};

TEST(PagedAttentionCpuErrors, ValidRequestRuns) {
    EXPECT_EQ(Request().run(), "ok");
}

TEST(PagedAttentionCpuErrors, NamesTheBrokenLimit) {
    auto expect = [](Request& r, const std::string& want, const PagedAttentionParams& p = {}) {
        const std::string got = r.run(p);
        EXPECT_NE(got.find(want), std::string::npos) << "want '" << want << "' in: " << got;
    };
    {
        Request r;  // no query tokens
        std::vector<uint16_t> q0(16);
        r.q = r.out = TensorView(q0.data(), DType::BF16, {2, 0, 4, 64});
        r.lse = TensorView(r.lbuf.data(), DType::F32, {2, 4, 0});
        expect(r, "q_len must be at least 1");
    }
    {
        Request r;  // block_size 8
        r.kv.k_cache = TensorView(r.kbuf.data(), DType::BF16, {8, 8, 2, 64});
        r.kv.v_cache = r.kv.k_cache;
        expect(r, "block_size must be a positive multiple of 16");
    }
    {
        Request r;
        r.kv.v_cache.shape[1] = 32;
        expect(r, "v_cache must be");
    }
    {
        Request r;  // 4 query heads over 3 KV heads
        std::vector<uint16_t> k3(4 * 16 * 3 * 64);
        r.kv.k_cache = r.kv.v_cache = TensorView(k3.data(), DType::BF16, {4, 16, 3, 64});
        expect(r, "multiple of n_kv_heads");
    }
    {
        Request r;
        r.kv.v_cache.dtype = DType::F16;
        expect(r, "share one dtype");
    }
    {
        Request r;
        r.lse = TensorView(r.lbuf.data(), DType::F32, {2, 1, 4});
        expect(r, "lse must be [batch, n_heads, q_len]");
    }
    {
        Request r;
        r.kv.block_table = nullptr;
        expect(r, "block_table is null");
    }
    {
        Request r;
        r.kv.max_blocks_per_seq = 0;
        expect(r, "max_blocks_per_seq must be at least 1");
    }
    {
        Request r;
        PagedAttentionParams p;
        p.num_splits = PAGED_MAX_SPLITS + 1;
        expect(r, "num_splits must be 0", p);
    }
    {
        Request r;  // seq_len 33 > 2 blocks x 16
        r.lens[0] = 33;
        expect(r, "seq_lens[0] = 33 is outside [0, max_blocks_per_seq");
    }
    {
        Request r;  // sequence 1 needs block_table[1][0] = 2 ... make it 4 (only 4 blocks: 0..3)
        r.table[2] = 4;
        expect(r, "block_table[1][0] = 4 is outside [0, num_blocks = 4)");
    }
    {
        Request r;
        r.q.device = Device::gpu(0);
        expect(r, "must be on one device");
    }
}

// Entries past a sequence's last block are never read: -1 there is fine.
TEST(PagedAttentionCpuErrors, UnusedTableEntriesAreNotRead) {
    Request r;
    r.lens = {16, 5};  // sequence 0 uses one block: its second entry is unused
    r.table[1] = -1;
    EXPECT_EQ(r.run(), "ok");
}

// fp32 runs on the CPU (the harness above covers fp16/bf16): with v = 1 every output is 1, and with
// v = the key's position the output is the softmax-weighted mean position, here with equal scores.
TEST(PagedAttentionCpuFp32, UniformScoresAverageValues) {
    std::vector<float> k(4 * 16 * 1 * 8, 0.0f), v(k.size()), q(1 * 2 * 2 * 8, 1.0f), o(q.size(), -1.0f);
    const std::vector<int32_t> table{2, 0, 3, 1}, lens{40};
    for (int64_t j = 0; j < 40; ++j)  // token j lives in block table[j / 16], slot j % 16
        for (int d = 0; d < 8; ++d) v[size_t((table[size_t(j / 16)] * 16 + j % 16) * 8 + d)] = float(j);
    PagedKVCache kv;
    kv.k_cache = TensorView(k.data(), DType::F32, {4, 16, 1, 8});
    kv.v_cache = TensorView(v.data(), DType::F32, {4, 16, 1, 8});
    kv.block_table = table.data(), kv.max_blocks_per_seq = 4, kv.seq_lens = lens.data();
    const TensorView qv(q.data(), DType::F32, {1, 2, 2, 8}), ov(o.data(), DType::F32, {1, 2, 2, 8});
    paged_attention(ov, qv, kv, nullptr, {}, nullptr, 0);
    for (int h = 0; h < 2; ++h)
        for (int d = 0; d < 8; ++d) {
            EXPECT_NEAR(o[size_t((0 * 2 + h) * 8 + d)], 19.0f, 1e-4f);  // query 0 sees keys 0..38: mean 19
            EXPECT_NEAR(o[size_t((1 * 2 + h) * 8 + d)], 19.5f, 1e-4f);  // query 1 sees keys 0..39: mean 19.5
        }
}

TEST(PagedAttentionCpuErrors, WorkspaceQueryIsZeroOnCpu) {
    Request r;
    EXPECT_EQ(paged_attention_workspace_bytes(r.out, r.q, r.kv, &r.lse), 0u);
}

}  // namespace
}  // namespace flashport::test

namespace flashport::test {
namespace {

// paged_cache_write on the CPU: rows land in the slots named, a negative slot skips its token, other
// slots are untouched; int32 and int64 slot maps; strided source rows.
TEST(PagedCacheWrite, WritesTheNamedSlots) {
    constexpr int64_t NB = 3, BS = 16, H = 2, D = 8, T = 5;
    std::vector<uint16_t> kc(size_t(NB * BS * H * D), 0), vc = kc;
    std::vector<uint16_t> src(size_t(T * (H * D + 4)));  // rows padded by 4 elements
    for (size_t i = 0; i < src.size(); ++i) src[i] = uint16_t(i + 1);
    TensorView k(src.data(), DType::BF16, {T, H, D}), v = k;
    k.stride[0] = v.stride[0] = H * D + 4;
    const std::vector<int32_t> slots32 = {17, -1, 0, 47, 5};
    const std::vector<int64_t> slots64(slots32.begin(), slots32.end());
    for (bool wide : {false, true}) {
        std::fill(kc.begin(), kc.end(), 0);
        std::fill(vc.begin(), vc.end(), 0);
        const TensorView kcv(kc.data(), DType::BF16, {NB, BS, H, D}), vcv(vc.data(), DType::BF16, {NB, BS, H, D});
        paged_cache_write(kcv, vcv, k, v, wide ? IndexView(slots64) : IndexView(slots32));
        int64_t written = 0;
        for (int64_t t = 0; t < T; ++t) {
            if (slots32[size_t(t)] < 0) continue;
            const int64_t s = slots32[size_t(t)];
            for (int64_t h = 0; h < H; ++h)
                for (int64_t d = 0; d < D; ++d) {
                    EXPECT_EQ(*static_cast<uint16_t*>(kcv.at(s / BS, s % BS, h, d)), *static_cast<uint16_t*>(k.at(t, h, d)));
                    EXPECT_EQ(*static_cast<uint16_t*>(vcv.at(s / BS, s % BS, h, d)), *static_cast<uint16_t*>(v.at(t, h, d)));
                    ++written;
                }
        }
        EXPECT_EQ(std::count(kc.begin(), kc.end(), uint16_t(0)), int64_t(kc.size()) - written) << "other slots touched";
    }
}

TEST(PagedCacheWrite, BadRequestsAreClear) {
    std::vector<float> kc(2 * 16 * 2 * 8), vc = kc, rows(3 * 2 * 8);
    const TensorView kcv(kc.data(), DType::F32, {2, 16, 2, 8}), vcv(vc.data(), DType::F32, {2, 16, 2, 8});
    const TensorView k(rows.data(), DType::F32, {3, 2, 8});
    auto expect = [&](const TensorView& kk, const std::vector<int32_t>& slots, const std::string& want) {
        try {
            paged_cache_write(kcv, vcv, kk, k, IndexView(slots));
            ADD_FAILURE() << "no error; expected '" << want << "'";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
        }
    };
    expect(k, {0, 1, 32}, "slots[2] = 32 is past the cache's 32 slots");
    expect(k, {0, 1}, "slots must hold one entry per token (3), got 2");
    expect(TensorView(rows.data(), DType::F32, {3, 1, 16}), {0, 1, 2}, "k must be [tokens, n_kv_heads, head_dim]");
    expect(TensorView(rows.data(), DType::BF16, {3, 2, 8}), {0, 1, 2}, "must share one dtype");
}

}  // namespace
}  // namespace flashport::test
