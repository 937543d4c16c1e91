// Varlen attention and paged-KV prefill on the GPU (the flash kernels reading packed or paged rows),
// for each flash variant (tensor-core mma, AMD MFMA and dot2, portable), against the float64 CPU
// reference through the varlen and paged harnesses (tests/ops/varlen_harness.h,
// paged_attention_harness.h) on the grids and problems of attention_varlen_case.h and
// paged_attention_case.h; plus in-kernel detection of broken offsets. Every test skips with "no GPU
// present" where there is none.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "attention_varlen_case.h"
#include "flashport/attention_varlen.h"
#include "flashport/error.h"
#include "flashport/memory.h"
#include "gpu_test_util.h"
#include "paged_attention_case.h"

namespace flashport::test {
namespace {

using gpu::FlashVariant;

class VarlenGpu : public ::testing::TestWithParam<VarlenCase> {};
void check_varlen(const VarlenCase& c, FlashVariant v) {
    FP_SKIP_WITHOUT_GPU();
    FP_SKIP_MMA_OFF_NVIDIA(v == FlashVariant::MMA);
    FP_SKIP_WITHOUT_MFMA_KERNELS(v == FlashVariant::MFMA);
    FP_SKIP_WITHOUT_DOT2_KERNEL(v == FlashVariant::DOT2, c.dtype);
    FP_SKIP_WITHOUT_WGMMA(v == FlashVariant::WGMMA);
    if (!case_selected(c.name())) GTEST_SKIP() << "not selected by FLASHPORT_TEST_FILTER";
    ScopedFlashVariant scoped(v);
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
void check_prefill(const PagedCase& c, FlashVariant v) {
    FP_SKIP_WITHOUT_GPU();
    FP_SKIP_MMA_OFF_NVIDIA(v == FlashVariant::MMA);
    FP_SKIP_WITHOUT_MFMA_KERNELS(v == FlashVariant::MFMA);
    FP_SKIP_WITHOUT_DOT2_KERNEL(v == FlashVariant::DOT2, c.dtype);
    if (!case_selected(c.name())) GTEST_SKIP() << "not selected by FLASHPORT_TEST_FILTER";
    ScopedFlashVariant scoped(v);
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
INSTANTIATE_TEST_SUITE_P(Gpu, PagedPrefillGpu, ::testing::ValuesIn(prefill_grid()),
                         [](const ::testing::TestParamInfo<PagedCase>& i) { return i.param.name(); });

// Offsets the host cannot check without synchronising are checked in the kernel: a broken sequence's
// rows are NaN (all heads, and its LSE), every other sequence is right.
class VarlenGpuBadOffsets : public ::testing::TestWithParam<FlashVariant> {};
TEST_P(VarlenGpuBadOffsets, PoisonOnlyThatSequence) {
    FP_SKIP_WITHOUT_GPU();
    FP_SKIP_MMA_OFF_NVIDIA(GetParam() == FlashVariant::MMA);
    FP_SKIP_WITHOUT_MFMA_KERNELS(GetParam() == FlashVariant::MFMA);
    // bf16, except for the fp16-only dot2 kernel.
    const DType dt = GetParam() == FlashVariant::DOT2 ? DType::F16 : DType::BF16;
    FP_SKIP_WITHOUT_DOT2_KERNEL(GetParam() == FlashVariant::DOT2, dt);
    ScopedFlashVariant scoped(GetParam());
    constexpr int64_t H = 4, KVH = 2, D = 64, TQ = 30, TK = 30;
    // 1.0 in the dtype: every output row is v = 1
    std::vector<uint16_t> ones(size_t(TQ * H * D), dt == DType::F16 ? 0x3c00 : 0x3f80);
    Tensor q(dt, {TQ, H, D}, Device::gpu()), out(dt, {TQ, H, D}, Device::gpu());
    Tensor k(dt, {TK, KVH, D}, Device::gpu()), v(dt, {TK, KVH, D}, Device::gpu());
    Tensor lse(DType::F32, {H, TQ}, Device::gpu());
    for (Tensor* t : {&q, &k, &v}) copy_bytes(t->view.data, Device::gpu(), ones.data(), Device::cpu(), t->view.nbytes());
    Buffer cu(3 * 2 * 4, Device::gpu());
    // Each case: (cu_q, cu_k, max_seqlen_q) with sequence 1 (rows 10..30 where it claims them) broken.
    struct Bad {
        std::vector<int32_t> cu_q, cu_k;
        int64_t max_q;
        const char* what;
    };
    const Bad bad[] = {{{0, 10, 30}, {0, 10, 31}, 20, "cu_k past total_k"},
                       {{0, 10, 30}, {0, 10, 5}, 20, "cu_k decreasing"},
                       {{0, 10, 30}, {0, 10, 30}, 12, "a query length above max_seqlen_q"}};
    for (const Bad& b : bad) {
        copy_bytes(cu.data(), Device::gpu(), b.cu_q.data(), Device::cpu(), 12);
        copy_bytes(static_cast<char*>(cu.data()) + 12, Device::gpu(), b.cu_k.data(), Device::cpu(), 12);
        const VarlenSeqs seqs{cu.as<int32_t>(), reinterpret_cast<const int32_t*>(static_cast<char*>(cu.data()) + 12), 2,
                              b.max_q};
        AttentionParams p;
        p.causal = true;
        attention_varlen(out.view, q.view, k.view, v.view, seqs, &lse.view, p);
        synchronize(Device::gpu());
        std::vector<uint16_t> o(size_t(TQ * H * D));
        std::vector<float> l(size_t(H * TQ));
        copy_bytes(o.data(), Device::cpu(), out.view.data, Device::gpu(), o.size() * 2);
        copy_bytes(l.data(), Device::cpu(), lse.view.data, Device::gpu(), l.size() * 4);
        for (int64_t i = 0; i < TQ; ++i)
            for (int64_t n = 0; n < H * D; ++n) {
                const float x = load_as_float(&o[size_t(i * H * D + n)], dt);
                if (i < 10)
                    ASSERT_NEAR(x, 1.0f, 1e-2f) << b.what << ": row " << i;
                else
                    ASSERT_TRUE(std::isnan(x)) << b.what << ": row " << i << " is " << x;
            }
        for (int64_t h = 0; h < H; ++h)
            for (int64_t i = 10; i < TQ; ++i) ASSERT_TRUE(std::isnan(l[size_t(h * TQ + i)])) << b.what;
    }
}
INSTANTIATE_TEST_SUITE_P(Gpu, VarlenGpuBadOffsets,
                         ::testing::Values(FlashVariant::MMA, FlashVariant::PORTABLE, FlashVariant::MFMA,
                                           FlashVariant::DOT2),
                         [](const ::testing::TestParamInfo<FlashVariant>& i) { return flash_variant_label(i.param); });

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
