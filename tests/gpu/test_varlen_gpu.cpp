// Varlen attention and paged-KV prefill on the GPU (the flash kernels reading packed or paged rows),
// for each flash variant (tensor-core mma, AMD MFMA and dot2, portable), against the float64 CPU
// reference through the varlen and paged harnesses (tests/ops/varlen_harness.h,
// paged_attention_harness.h) on the grids and problems of attention_varlen_case.h and
// paged_attention_case.h; varlen split-KV (a few queries per sequence, the decode kernels); plus
// in-kernel detection of broken offsets. Every test skips with "no GPU present" where there is none.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "attention_varlen_case.h"
#include "flashport/attention_varlen.h"
#include "flashport/error.h"
#include "flashport/memory.h"
#include "flashport/paged_attention.h"
#include "gpu_test_util.h"
#include "paged_attention_case.h"

namespace flashport::test {
namespace {

using gpu::FlashVariant;

class VarlenGpu : public ::testing::TestWithParam<VarlenCase> {};
// tma: the wgmma kernel's TMA route; false: its all-thread cp.async instance (pinned either way, whatever the default).
void check_varlen(const VarlenCase& c, FlashVariant v, bool tma = false) {
    FP_SKIP_WITHOUT_GPU();
    FP_SKIP_MMA_OFF_NVIDIA(v == FlashVariant::MMA);
    FP_SKIP_WITHOUT_MFMA_KERNELS(v == FlashVariant::MFMA);
    FP_SKIP_WITHOUT_DOT2_KERNEL(v == FlashVariant::DOT2, c.dtype);
    FP_SKIP_WITHOUT_WGMMA(v == FlashVariant::WGMMA);
    if (!case_selected(c.name())) GTEST_SKIP() << "not selected by FLASHPORT_TEST_FILTER";
    ScopedFlashVariant scoped(v);
    ScopedWgmmaTma scoped_tma(tma);
    const VarlenResult r = check_varlen_case(c);
    EXPECT_EQ(r.kernel.rfind(std::string("gpu.flash.") + flash_variant_label(v), 0), 0u) << r.kernel;
}
TEST_P(VarlenGpu, Mma) { check_varlen(GetParam(), FlashVariant::MMA); }
TEST_P(VarlenGpu, Portable) { check_varlen(GetParam(), FlashVariant::PORTABLE); }
TEST_P(VarlenGpu, Mfma) {
    check_varlen(GetParam(), FlashVariant::MFMA);
}
TEST_P(VarlenGpu, Dot2) {
    check_varlen(GetParam(), FlashVariant::DOT2);
}
TEST_P(VarlenGpu, Wgmma) { check_varlen(GetParam(), FlashVariant::WGMMA); }  // sm_90 only
// The wgmma kernel's TMA route (sm_90 only): the packed rows as TMA boxes; past a sequence's last key the
// box holds the next sequence's rows or the harness's NaN spare rows, which the producer must zero in V.
TEST_P(VarlenGpu, WgmmaTma) { check_varlen(GetParam(), FlashVariant::WGMMA, true); }
INSTANTIATE_TEST_SUITE_P(Gpu, VarlenGpu, ::testing::ValuesIn(varlen_grid(Device::gpu())),
                         [](const ::testing::TestParamInfo<VarlenCase>& i) { return i.param.name(); });

// The bench's packed-batch problems (attention_varlen_case.h), with the default kernel.
TEST(VarlenGpuProblems, MatchReference) {
    FP_SKIP_WITHOUT_GPU();
    for (DType dt : {DType::BF16, DType::F16}) expect_bench_cases_pass(attention_varlen_bench_cases(dt), Device::gpu());
}

// Paged prefill: more query tokens than the decode kernel takes (and head dims it lacks), against
// histories of odd lengths, shuffled block tables, partial last blocks, GQA 1/2/7.
std::vector<PagedCase> prefill_grid() {
    PagedGridAxes a;
    a.lens = {{97}, {1025}, {1023, 300}, {2049, 40, 9}};
    a.heads = {{4, 4}, {4, 2}, {14, 2}};
    a.q_lens = {9, 97, 300};
    a.dims = {128, 64, 40, 80, 96, 160, 256};
    a.device = Device::gpu();
    std::vector<PagedCase> cases = paged_grid(a);
    for (int64_t d : {40, 80, 96, 160}) {  // decode-sized queries on head dims only the flash kernel has
        PagedCase c;
        c.device = Device::gpu();
        c.seq_lens = {500, 17}, c.n_heads = 8, c.n_kv_heads = 2, c.q_len = 1, c.head_dim = d;
        cases.push_back(c);
    }
    return cases;
}

class PagedPrefillGpu : public ::testing::TestWithParam<PagedCase> {};
void check_prefill(const PagedCase& c, FlashVariant v, bool tma = false) {
    FP_SKIP_WITHOUT_GPU();
    FP_SKIP_MMA_OFF_NVIDIA(v == FlashVariant::MMA);
    FP_SKIP_WITHOUT_MFMA_KERNELS(v == FlashVariant::MFMA);
    FP_SKIP_WITHOUT_DOT2_KERNEL(v == FlashVariant::DOT2, c.dtype);
    FP_SKIP_WITHOUT_WGMMA(v == FlashVariant::WGMMA);
    if (!case_selected(c.name())) GTEST_SKIP() << "not selected by FLASHPORT_TEST_FILTER";
    ScopedFlashVariant scoped(v);
    ScopedWgmmaTma scoped_tma(tma);
    const PagedResult r = check_paged_case(c);
    EXPECT_EQ(r.kernel,
              std::string("gpu.paged_attention.prefill.") + flash_variant_label(v) + ".d" + std::to_string(c.head_dim));
    EXPECT_EQ(r.num_splits, 1);
}
TEST_P(PagedPrefillGpu, Mma) { check_prefill(GetParam(), FlashVariant::MMA); }
TEST_P(PagedPrefillGpu, Portable) { check_prefill(GetParam(), FlashVariant::PORTABLE); }
TEST_P(PagedPrefillGpu, Mfma) {
    check_prefill(GetParam(), FlashVariant::MFMA);  // no AMD GPU has run it: emulated (wave64.sh)
}
TEST_P(PagedPrefillGpu, Dot2) {
    check_prefill(GetParam(), FlashVariant::DOT2);  // fp16 cases; no AMD GPU has run it: emulated (wave64.sh)
}
TEST_P(PagedPrefillGpu, Wgmma) { check_prefill(GetParam(), FlashVariant::WGMMA); }  // sm_90 only
// The TMA route (sm_90 only): block sizes 16 and 32 as TMA boxes of one block, 48 (neither a divisor nor a
// multiple of the tile's keys) on the all-thread instance; the harness's caches are NaN outside the
// sequences' tokens, so a V row past a sequence that the producer failed to zero poisons the output.
TEST_P(PagedPrefillGpu, WgmmaTma) { check_prefill(GetParam(), FlashVariant::WGMMA, true); }
INSTANTIATE_TEST_SUITE_P(Gpu, PagedPrefillGpu, ::testing::ValuesIn(prefill_grid()),
                         [](const ::testing::TestParamInfo<PagedCase>& i) { return i.param.name(); });

// The TMA route's block sizes beside the grid's: a box of one block under a tile (64, and 128 at d256's
// 64-key tiles), a tile inside one block (128 at d128, 256), at the head dims of both TMA tile shapes and
// one the instance rounds up; lengths that end mid-block, mid-tile and on a tile's edge.
std::vector<PagedCase> prefill_tma_block_cases() {
    std::vector<PagedCase> cases;
    size_t n = 0;
    for (int64_t bs : {64, 128, 256})
        for (int64_t d : {128, 256, 40}) {
            PagedCase c;
            c.device = Device::gpu();
            c.seq_lens = n % 2 ? std::vector<int32_t>{1025, 256} : std::vector<int32_t>{300, 9, 640};
            c.n_heads = 14, c.n_kv_heads = 2, c.q_len = 97, c.head_dim = d, c.block_size = bs;
            c.dtype = n % 2 ? DType::F16 : DType::BF16;
            c.causal = n % 3 != 2;
            c.interleaved_kv = n % 4 == 1;
            ++n;
            cases.push_back(c);
        }
    return cases;
}
class PagedPrefillTmaBlocks : public ::testing::TestWithParam<PagedCase> {};
TEST_P(PagedPrefillTmaBlocks, Portable) { check_prefill(GetParam(), FlashVariant::PORTABLE); }
TEST_P(PagedPrefillTmaBlocks, WgmmaTma) { check_prefill(GetParam(), FlashVariant::WGMMA, true); }
INSTANTIATE_TEST_SUITE_P(Gpu, PagedPrefillTmaBlocks, ::testing::ValuesIn(prefill_tma_block_cases()),
                         [](const ::testing::TestParamInfo<PagedCase>& i) { return i.param.name(); });

// Offsets the host cannot check without synchronising are checked in the kernel: a broken sequence's
// rows are NaN (all heads, and its LSE), every other sequence is right. Two sequences over TQ query and
// TK key rows of ones (so every right row is 1); the first claims query rows [0, q0_rows). Each case
// breaks sequence 1. The output is a view of a buffer with one spare head a row, of twos, which must
// stay twos: with a head dim a kernel rounds up (24 runs a 32- or 40-wide instance), a poison written
// over the instance's width would land there, where past the last head it lands in the next row.
struct BrokenOffsets {
    std::vector<int32_t> cu_q, cu_k;
    int64_t max_q;
    const char* what;
};
void expect_broken_sequence_poisoned(DType dt, int64_t TQ, int64_t TK, int64_t q0_rows,
                                     const std::vector<BrokenOffsets>& cases, const char* kernel_prefix,
                                     int64_t D = 64) {
    constexpr int64_t H = 4, KVH = 2;
    std::vector<uint16_t> ones(size_t(std::max(TQ, TK) * H * D), dt == DType::F16 ? 0x3c00 : 0x3f80);
    const std::vector<uint16_t> twos(size_t(TQ * (H + 1) * D), 0x4000);  // 2.0 in fp16 and in bf16
    Tensor q(dt, {TQ, H, D}, Device::gpu()), out_buffer(dt, {TQ, H + 1, D}, Device::gpu());
    const TensorView out = out_buffer.view.narrowed(1, 0, H);
    Tensor k(dt, {TK, KVH, D}, Device::gpu()), v(dt, {TK, KVH, D}, Device::gpu());
    Tensor lse(DType::F32, {H, TQ}, Device::gpu());
    for (Tensor* t : {&q, &k, &v}) copy_bytes(t->view.data, Device::gpu(), ones.data(), Device::cpu(), t->view.nbytes());
    Buffer cu(3 * 2 * 4, Device::gpu());
    const int32_t* cu_q = cu.as<int32_t>();
    const int32_t* cu_k = reinterpret_cast<const int32_t*>(static_cast<char*>(cu.data()) + 12);
    for (const BrokenOffsets& b : cases) {
        copy_bytes(out_buffer.view.data, Device::gpu(), twos.data(), Device::cpu(), twos.size() * 2);
        copy_bytes(cu.data(), Device::gpu(), b.cu_q.data(), Device::cpu(), 12);
        copy_bytes(static_cast<char*>(cu.data()) + 12, Device::gpu(), b.cu_k.data(), Device::cpu(), 12);
        AttentionParams p;
        p.causal = true;
        const AttentionPlan plan =
            attention_varlen(out, q.view, k.view, v.view, {cu_q, cu_k, 2, b.max_q}, &lse.view, p);
        EXPECT_EQ(plan.kernel.rfind(kernel_prefix, 0), 0u) << plan.kernel;
        synchronize(Device::gpu());
        std::vector<uint16_t> o(size_t(TQ * (H + 1) * D));
        std::vector<float> l(size_t(H * TQ));
        copy_bytes(o.data(), Device::cpu(), out_buffer.view.data, Device::gpu(), o.size() * 2);
        copy_bytes(l.data(), Device::cpu(), lse.view.data, Device::gpu(), l.size() * 4);
        for (int64_t i = 0; i < TQ; ++i)
            for (int64_t n = 0; n < (H + 1) * D; ++n) {
                const float x = load_as_float(&o[size_t(i * (H + 1) * D + n)], dt);
                if (n >= H * D)
                    ASSERT_EQ(x, 2.0f) << b.what << ": row " << i << "'s spare head, column " << n - H * D;
                else if (i < q0_rows)
                    ASSERT_NEAR(x, 1.0f, 1e-2f) << b.what << ": row " << i;
                else
                    ASSERT_TRUE(std::isnan(x)) << b.what << ": row " << i << " is " << x;
            }
        for (int64_t h = 0; h < H; ++h)
            for (int64_t i = q0_rows; i < TQ; ++i) ASSERT_TRUE(std::isnan(l[size_t(h * TQ + i)])) << b.what;
    }
}

// Sequence 1 claims rows 10..30 of 30, broken three ways.
const std::vector<BrokenOffsets> broken_second_sequence = {
    {{0, 10, 30}, {0, 10, 31}, 20, "cu_k past total_k"},
    {{0, 10, 30}, {0, 10, 5}, 20, "cu_k decreasing"},
    {{0, 10, 30}, {0, 10, 30}, 12, "a query length above max_seqlen_q"}};

class VarlenGpuBadOffsets : public ::testing::TestWithParam<FlashVariant> {};
TEST_P(VarlenGpuBadOffsets, PoisonOnlyThatSequence) {
    FP_SKIP_WITHOUT_GPU();
    FP_SKIP_MMA_OFF_NVIDIA(GetParam() == FlashVariant::MMA);
    FP_SKIP_WITHOUT_WGMMA(GetParam() == FlashVariant::WGMMA);
    FP_SKIP_WITHOUT_MFMA_KERNELS(GetParam() == FlashVariant::MFMA);
    // bf16, except for the fp16-only dot2 kernel.
    const DType dt = GetParam() == FlashVariant::DOT2 ? DType::F16 : DType::BF16;
    FP_SKIP_WITHOUT_DOT2_KERNEL(GetParam() == FlashVariant::DOT2, dt);
    ScopedFlashVariant scoped(GetParam());
    ScopedWgmmaTma tma(false);  // the all-thread instance; the TMA route's is the test below
    // Head dims 64 and 24 (an instance's width, and one rounded up).
    for (const int64_t d : {64, 24})
        expect_broken_sequence_poisoned(dt, 30, 30, 10, broken_second_sequence,
                                        (std::string("gpu.flash.") + flash_variant_label(GetParam())).c_str(), d);
}
// The same through the TMA route (sm_90 only): a broken sequence is found before the producer starts.
TEST(VarlenGpuBadOffsetsTma, PoisonOnlyThatSequence) {
    FP_SKIP_WITHOUT_GPU();
    FP_SKIP_WITHOUT_WGMMA(true);
    ScopedFlashVariant scoped(FlashVariant::WGMMA);
    ScopedWgmmaTma tma(true);
    for (const int64_t d : {64, 24})
        expect_broken_sequence_poisoned(DType::BF16, 30, 30, 10, broken_second_sequence, "gpu.flash.wgmma", d);
}
INSTANTIATE_TEST_SUITE_P(Gpu, VarlenGpuBadOffsets,
                         ::testing::Values(FlashVariant::MMA, FlashVariant::WGMMA, FlashVariant::PORTABLE,
                                           FlashVariant::MFMA, FlashVariant::DOT2),
                         [](const ::testing::TestParamInfo<FlashVariant>& i) { return flash_variant_label(i.param); });

// Split-KV for varlen: at most PAGED_DECODE_MAX_Q_LEN queries per sequence against histories of
// SPLIT_KV_MIN_KV_LEN keys or more on average, under the default flash variant, run the decode kernels
// over the packed keys. The varlen harness's adversarial packing as above (NaN spare rows, empty
// sequences, max_seqlen_q above every length), plus a sequence with queries and no keys, one with
// keys and no queries, and decode-sized queries next to long and 1-key histories; max_seqlen_k right,
// unknown (0) and too small (it only sizes the splits).
std::vector<VarlenCase> split_kv_grid() {
    const std::vector<VarlenBatch> batches = {
        {{1, 1025}},
        {{1, 300}, {1, 1}, {1, 700}},
        {{4, 1023}, {0, 97}, {8, 2049}},
        {{3, 0}, {2, 1200}},
        {{7, 7}, {5, 900}},
    };
    std::vector<VarlenCase> cases = varlen_cases(batches, {{2, 2}, {4, 2}, {7, 1}}, {64, 128, 256}, Device::gpu());
    for (size_t n = 0; n < cases.size(); ++n) {
        VarlenCase& c = cases[n];
        c.window_left = -1;  // a window keeps the flash kernel
        int32_t longest_q = 0, longest_k = 0;
        for (auto [lq, lk] : c.seqs) longest_q = std::max(longest_q, lq), longest_k = std::max(longest_k, lk);
        if (c.extra_max_q > 0) c.extra_max_q = int32_t(PAGED_DECODE_MAX_Q_LEN) - longest_q;  // still <= 8
        // max_seqlen_k: right (splits by length), unknown (equal slices), or a third of the truth: the
        // splits planned for the hint cover too few keys, and the kernel's equal slices must take over.
        c.max_k = n % 5 == 3 ? 0 : n % 5 == 4 ? longest_k / 3 + 1 : -1;
    }
    return cases;
}

// Each case under the default decode kernel (mma on NVIDIA sm_80+, MFMA on AMD CDNA and the HIP CPU
// Runtime) and the portable one, merged by the separate combine kernel; and merged in the split kernel.
enum class SplitKvRun { DEFAULT, PORTABLE, FUSED };
class VarlenSplitKv : public ::testing::TestWithParam<VarlenCase> {};
void check_varlen_split_kv(const VarlenCase& c, SplitKvRun run) {
    FP_SKIP_WITHOUT_GPU();
    if (!case_selected(c.name())) GTEST_SKIP() << "not selected by FLASHPORT_TEST_FILTER";
    ScopedDecodeVariant variant(run == SplitKvRun::PORTABLE ? gpu::DecodeVariant::PORTABLE : gpu::decode_variant());
    ScopedDecodeCombine combine(run == SplitKvRun::FUSED ? gpu::DecodeCombine::FUSED : gpu::DecodeCombine::SEPARATE);
    const VarlenResult r = check_varlen_case(c);
    EXPECT_EQ(r.kernel.rfind("gpu.flash.split_kv.", 0), 0u) << r.kernel;
    if (run == SplitKvRun::PORTABLE) {
        EXPECT_NE(r.kernel.find(".portable."), std::string::npos) << r.kernel;
    }
}
TEST_P(VarlenSplitKv, Default) { check_varlen_split_kv(GetParam(), SplitKvRun::DEFAULT); }
TEST_P(VarlenSplitKv, Portable) { check_varlen_split_kv(GetParam(), SplitKvRun::PORTABLE); }
TEST_P(VarlenSplitKv, Fused) { check_varlen_split_kv(GetParam(), SplitKvRun::FUSED); }
INSTANTIATE_TEST_SUITE_P(Gpu, VarlenSplitKv, ::testing::ValuesIn(split_kv_grid()),
                         [](const ::testing::TestParamInfo<VarlenCase>& i) { return i.param.name(); });

// Broken offsets under split-KV: the offsets kernel poisons the sequence, the decode kernels skip it.
TEST(VarlenSplitKvBadOffsets, PoisonOnlyThatSequence) {
    FP_SKIP_WITHOUT_GPU();
    // Sequence 1 claims query rows 1..4 against keys from row 300.
    expect_broken_sequence_poisoned(DType::BF16, 4, 600, 1,
                                    {{{0, 1, 4}, {0, 300, 601}, 4, "cu_k past total_k"},
                                     {{0, 1, 4}, {0, 300, 5}, 4, "cu_k decreasing"},
                                     {{0, 1, 4}, {0, 300, 600}, 2, "a query length above max_seqlen_q"},
                                     {{0, 1, 5}, {0, 300, 600}, 4, "cu_q past total_q"}},
                                    "gpu.flash.split_kv.");
}

// Where varlen split-KV serves: max_seqlen_q <= 8, total_k >= SPLIT_KV_MIN_KV_LEN per sequence, a
// decode head dim, no window, the default variant; anything else keeps the flash kernel.
TEST(VarlenGpuPlan, SplitKvOnlyWhereItServes) {
    FP_SKIP_WITHOUT_GPU();
    Buffer cu(8 * 4, Device::gpu());
    const auto kernel = [&](int64_t batch, int64_t max_q, int64_t total_k, int64_t d, int64_t window) {
        Tensor q(DType::BF16, {batch * max_q, 8, d}, Device::gpu()), o(DType::BF16, {batch * max_q, 8, d}, Device::gpu());
        Tensor kv(DType::BF16, {total_k, 2, d}, Device::gpu());
        AttentionParams p;
        p.causal = true;
        p.window_left = window;
        const VarlenSeqs seqs{cu.as<int32_t>(), cu.as<int32_t>(), batch, max_q};
        return plan_attention_varlen(o.view, q.view, kv.view, kv.view, seqs, nullptr, p).kernel;
    };
    const int64_t min_kv = gpu::SPLIT_KV_MIN_KV_LEN;
    for (auto [batch, max_q, total_k, d] : {std::tuple{1, 1, min_kv, 128}, {3, 8, 3 * min_kv, 64}, {7, 2, 9000, 256}})
        EXPECT_EQ(kernel(batch, max_q, total_k, d, -1).rfind("gpu.flash.split_kv.", 0), 0u)
            << kernel(batch, max_q, total_k, d, -1);
    for (auto [batch, max_q, total_k, d, window] :
         {std::tuple{1, 9, 4096, 128, -1}, {3, 1, 3 * min_kv - 1, 128, -1}, {1, 1, 4096, 96, -1},
          {1, 1, 4096, 128, 100}, {2, 0, 4096, 128, -1}})
        EXPECT_EQ(kernel(batch, max_q, total_k, d, window).rfind("gpu.flash.split_kv.", 0), std::string::npos)
            << batch << " " << max_q << " " << total_k << " " << d << " " << window;
    {
        ScopedFlashVariant forced(FlashVariant::PORTABLE);  // a forced variant means that flash kernel
        EXPECT_EQ(kernel(1, 1, 4096, 128, -1), "gpu.flash.portable.d128.varlen");
    }
    gpu::set_split_kv(false);  // FLASHPORT_GPU_SPLIT_KV=0
    const std::string off = kernel(1, 1, 4096, 128, -1);
    gpu::set_split_kv(true);
    EXPECT_EQ(off.rfind("gpu.flash.split_kv.", 0), std::string::npos) << off;
    EXPECT_EQ(off.substr(off.size() - 7), ".varlen") << off;
}

// The splits of varlen split-KV: with max_seqlen_k, "splits<S>x<T>": splits of T keys (whole 64-key
// tiles, at least 4), S of them covering the longest sequence; without it, equal slices ("splits<S>").
TEST(VarlenGpuPlan, SplitsByLengthWithMaxSeqlenK) {
    FP_SKIP_WITHOUT_GPU();
    constexpr int64_t batch = 8, total_k = 65324, longest = 32768;  // decode_b8_mixed's lengths
    Tensor q(DType::BF16, {batch, 28, 128}, Device::gpu()), o(DType::BF16, {batch, 28, 128}, Device::gpu());
    Tensor kv(DType::BF16, {total_k, 4, 128}, Device::gpu());
    Buffer cu((batch + 1) * 4, Device::gpu());
    AttentionParams p;
    p.causal = true;
    const auto kernel = [&](int64_t max_k) {
        return plan_attention_varlen(o.view, q.view, kv.view, kv.view, {cu.as<int32_t>(), cu.as<int32_t>(), batch, 1, max_k},
                                     nullptr, p)
            .kernel;
    };
    const std::string by_length = kernel(longest), by_count = kernel(0);
    const size_t at = by_length.find(".splits");
    ASSERT_NE(at, std::string::npos) << by_length;
    const size_t x = by_length.find('x', at);
    ASSERT_NE(x, std::string::npos) << by_length;
    const int64_t splits = std::stoll(by_length.substr(at + 7)), tokens = std::stoll(by_length.substr(x + 1));
    EXPECT_EQ(tokens % 64, 0) << by_length;
    EXPECT_GE(tokens, 256) << by_length;
    EXPECT_EQ(splits, (longest + tokens - 1) / tokens) << by_length;
    EXPECT_LE(splits, PAGED_MAX_SPLITS) << by_length;
    EXPECT_EQ(by_count.find('x', by_count.find(".splits")), std::string::npos) << by_count;
}

TEST(VarlenGpuPlan, NaiveIsRejectedClearly) {
    FP_SKIP_WITHOUT_GPU();
    Tensor q(DType::F32, {8, 2, 64}, Device::gpu());
    Tensor lse(DType::F32, {2, 8}, Device::gpu());
    Buffer cu(8, Device::gpu());
    const VarlenSeqs seqs{cu.as<int32_t>(), cu.as<int32_t>(), 1, 8};
    try {
        plan_attention_varlen(q.view, q.view, q.view, q.view, seqs, &lse.view);
        ADD_FAILURE() << "fp32 varlen accepted on the GPU";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("fp16 or bf16"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace flashport::test
