// GPU attention (naive, flash portable, flash mma) against the float64 CPU reference, through the
// shared op harness (tests/ops/op_harness.h): fresh random inputs, NaN-poisoned outputs, and the
// tolerance ||out - ref|| / ||ref|| <= 2 x (naive same-precision emulation's error) + floor.
//
// Suites (each skips with "no GPU present" where there is none):
//   FlashSubset / NaiveSubset (label gpu): pairwise covering selections plus edge cases; run per
//     flash variant (mma, portable; the AMD-only mfma and dot2, which run under the HIP CPU Runtime's
//     emulation and skip elsewhere; dot2 is fp16 only) and per GEMM backend (vendor BLAS, portable GEMM).
//   FlashFullGrid (label gpu_full): every dtype x length x head dim x GQA ratio x mask for both flash
//     variants; scripts/gpu/h200.sh test runs it in parallel shards.
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "backends/gpu/attention_gpu.h"
#include "backends/gpu/blas.h"
#include "flashport/attention.h"
#include "flashport/error.h"
#include "flashport/memory.h"
#include "gpu_test_util.h"
#include "op_grid.h"
#include "op_harness.h"

namespace flashport::test {
namespace {

using gpu::FlashVariant;

// The lengths the issue names (1, 7, 97, 1023, 1025), equal and unequal, both sides of each.
std::vector<LengthPair> gpu_lengths() {
    return {{1, 1}, {7, 7}, {97, 97}, {1023, 1023}, {1025, 1025}, {1, 1025}, {7, 1023}, {97, 7}, {1025, 97}};
}

GridAxes flash_axes() {
    GridAxes a;
    a.impls = {AttentionImpl::FLASH};
    a.dtypes = {DType::F16, DType::BF16};
    a.lengths = gpu_lengths();
    a.head_dims = {16, 32, 40, 64, 80, 96, 128, 160, 256};
    a.gqa_ratios = {1, 2, 7};
    a.masks = {Mask::NONE, Mask::CAUSAL, Mask::WINDOW, Mask::CAUSAL_WINDOW};
    a.layouts = {Layout::BLHD, Layout::BHLD};  // flash needs 16-byte aligned rows: see FlashRejects
    a.lse = {false, true};
    a.device = Device::gpu();
    return a;
}

GridAxes naive_axes() {
    GridAxes a = flash_axes();
    a.impls = {AttentionImpl::NAIVE};
    a.dtypes = {DType::F32, DType::F16, DType::BF16};
    a.head_dims = {1, 17, 40, 64, 128, 256};
    a.layouts = {Layout::BLHD, Layout::BHLD, Layout::BLHD_PADDED};
    return a;
}

std::vector<AttentionCase> flash_edge_cases() {
    std::vector<AttentionCase> cases;
    AttentionCase c;
    c.impl = AttentionImpl::FLASH;
    c.device = Device::gpu();
    c.batch = 2, c.q_len = 33, c.kv_len = 33, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 64;
    for (DType dt : {DType::F16, DType::BF16}) {
        c.dtype = dt;
        AttentionCase e = c;
        e.kv_len = 0, e.lse = true;  // no keys: zeros and LSE -inf
        cases.push_back(e);
        e = c;
        e.scale = 2.5f, e.lse = true;  // near one-hot softmax: the running max must be subtracted
        cases.push_back(e);
        e = c;
        e.scale = -0.125f;  // a negative scale is legal
        cases.push_back(e);
        e = c;
        e.causal = true, e.window_left = 0, e.q_len = 20, e.lse = true;  // exactly one key per row
        cases.push_back(e);
        e = c;
        e.n_heads = 7, e.n_kv_heads = 1, e.q_len = 1, e.kv_len = 1025, e.head_dim = 128;  // MQA decode-like
        cases.push_back(e);
        for (int64_t len : {63, 64, 65, 127, 128, 129}) {  // around the 64-row and 32/64-key tiles
            e = c;
            e.batch = 1, e.q_len = e.kv_len = len, e.causal = true, e.lse = true, e.head_dim = 80;
            cases.push_back(e);
        }
        e = c;
        e.q_len = 300, e.kv_len = 2000, e.causal = true, e.window_left = 100, e.head_dim = 160;  // window tiles skipped
        e.layout = Layout::BHLD;
        cases.push_back(e);
    }
    return cases;
}

// Head dims that are multiples of 8 with no instance of their own (the kernels round them up to the
// next instance, zero-filling the extra columns): each against the float64 reference, with GQA, a
// causal mask and the LSE, at lengths on both sides of the tiles.
std::vector<AttentionCase> flash_odd_head_dims() {
    std::vector<AttentionCase> cases;
    AttentionCase c;
    c.impl = AttentionImpl::FLASH;
    c.device = Device::gpu();
    c.batch = 1, c.n_heads = 4, c.n_kv_heads = 2, c.lse = true;
    for (DType dt : {DType::F16, DType::BF16})
        for (int64_t d : {8, 24, 48, 72, 104, 136, 200, 248})
            for (auto [q_len, kv_len, causal] : {std::tuple{97, 97, true}, {1, 1025, false}, {7, 65, true}}) {
                c.dtype = dt, c.head_dim = d, c.q_len = q_len, c.kv_len = kv_len, c.causal = causal;
                cases.push_back(c);
            }
    return cases;
}

std::vector<AttentionCase> flash_subset() {
    std::vector<AttentionCase> cases = pairwise_grid(flash_axes());
    for (const AttentionCase& c : flash_edge_cases()) cases.push_back(c);
    return cases;
}

std::vector<AttentionCase> naive_subset() {
    std::vector<AttentionCase> cases = pairwise_grid(naive_axes());
    AttentionCase c;
    c.impl = AttentionImpl::NAIVE, c.device = Device::gpu(), c.dtype = DType::F16, c.lse = true;
    c.batch = 2, c.q_len = 33, c.kv_len = 0, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 64;
    cases.push_back(c);  // kv_len 0
    return cases;
}

std::string case_name(const ::testing::TestParamInfo<AttentionCase>& info) { return info.param.name(); }

// Runs every case once per flash variant (ScopedFlashVariant, gpu_test_util.h).
class ScopedBlas {
public:
    explicit ScopedBlas(gpu::blas::Backend b) : saved_(gpu::blas::backend()) { gpu::blas::set_backend(b); }
    ~ScopedBlas() { gpu::blas::set_backend(saved_); }

private:
    gpu::blas::Backend saved_;
};

// tma: the wgmma kernel's TMA route; false: its all-thread cp.async instance (pinned either way, whatever the default).
void check_flash(const AttentionCase& c, FlashVariant v, bool tma = false) {
    FP_SKIP_WITHOUT_GPU();
    FP_SKIP_MMA_OFF_NVIDIA(v == FlashVariant::MMA);
    FP_SKIP_WITHOUT_MFMA_KERNELS(v == FlashVariant::MFMA);  // no AMD GPU has run it: emulated (wave64.sh)
    FP_SKIP_WITHOUT_DOT2_KERNEL(v == FlashVariant::DOT2, c.dtype);
    FP_SKIP_WITHOUT_WGMMA(v == FlashVariant::WGMMA);
    ScopedFlashVariant scoped(v);
    ScopedWgmmaTma scoped_tma(tma);
    check_case(c);
}
// The wgmma kernel with its TMA route on: dense calls with a positive scale run the TMA producer
// (partial tiles zero-filled by the copy engine, GQA through the KV head coordinate, d40/d80 at 64/128);
// the rest, the all-thread instance, as without it.
void check_flash_tma(const AttentionCase& c) { check_flash(c, FlashVariant::WGMMA, true); }

class FlashSubset : public ::testing::TestWithParam<AttentionCase> {};
TEST_P(FlashSubset, Mma) { check_flash(GetParam(), FlashVariant::MMA); }
TEST_P(FlashSubset, Portable) { check_flash(GetParam(), FlashVariant::PORTABLE); }
TEST_P(FlashSubset, Mfma) {
    check_flash(GetParam(), FlashVariant::MFMA);
}
TEST_P(FlashSubset, Dot2) {
    check_flash(GetParam(), FlashVariant::DOT2);
}
TEST_P(FlashSubset, Wgmma) { check_flash(GetParam(), FlashVariant::WGMMA); }  // sm_90 only
TEST_P(FlashSubset, WgmmaTma) { check_flash_tma(GetParam()); }                 // sm_90 only
INSTANTIATE_TEST_SUITE_P(Gpu, FlashSubset, ::testing::ValuesIn(flash_subset()), case_name);

class FlashOddHeadDims : public ::testing::TestWithParam<AttentionCase> {};
TEST_P(FlashOddHeadDims, Mma) { check_flash(GetParam(), FlashVariant::MMA); }
TEST_P(FlashOddHeadDims, Portable) { check_flash(GetParam(), FlashVariant::PORTABLE); }
TEST_P(FlashOddHeadDims, Mfma) { check_flash(GetParam(), FlashVariant::MFMA); }
TEST_P(FlashOddHeadDims, Dot2) { check_flash(GetParam(), FlashVariant::DOT2); }
TEST_P(FlashOddHeadDims, Wgmma) { check_flash(GetParam(), FlashVariant::WGMMA); }
TEST_P(FlashOddHeadDims, WgmmaTma) { check_flash_tma(GetParam()); }  // sm_90 only
INSTANTIATE_TEST_SUITE_P(Gpu, FlashOddHeadDims, ::testing::ValuesIn(flash_odd_head_dims()), case_name);

// Split-KV: a few query rows (1 to 8) against 256 keys or more, under the default variant, run the
// paged decode kernels over the dense K and V. Against the float64 reference like every flash case:
// fp16/bf16, the decode head dims, GQA 1/2/7, causal and full, both layouts, batch 1 and 3, LSE; kv
// lengths off the 16-key step so the last block's rounded-up tail is never read.
std::vector<AttentionCase> split_kv_cases() {
    std::vector<AttentionCase> cases;
    AttentionCase c;
    c.impl = AttentionImpl::FLASH;
    c.device = Device::gpu();
    c.lse = true;
    int n = 0;
    for (DType dt : {DType::F16, DType::BF16})
        for (int64_t d : {64, 128, 256})
            for (auto [q_len, kv_len, causal] :
                 {std::tuple{1, 256, false}, {2, 1025, true}, {8, 4097, true}, {7, 301, false}}) {
                c.dtype = dt, c.head_dim = d, c.q_len = q_len, c.kv_len = kv_len, c.causal = causal;
                c.n_kv_heads = n % 2 ? 2 : 1;
                c.n_heads = c.n_kv_heads * (n % 3 == 0 ? 1 : n % 3 == 1 ? 2 : 7);
                c.batch = n % 4 == 3 ? 3 : 1;
                c.layout = n % 2 ? Layout::BHLD : Layout::BLHD;
                cases.push_back(c);
                ++n;
            }
    return cases;
}

class FlashSplitKv : public ::testing::TestWithParam<AttentionCase> {};
TEST_P(FlashSplitKv, Default) {
    FP_SKIP_WITHOUT_GPU();
    const CaseResult r = run_case(GetParam());
    if (r.skipped) GTEST_SKIP() << r.skip_reason;
    EXPECT_TRUE(r.ok()) << r.summary();
    EXPECT_EQ(r.kernel.rfind("gpu.flash.split_kv.", 0), 0u) << r.kernel;
}
INSTANTIATE_TEST_SUITE_P(Gpu, FlashSplitKv, ::testing::ValuesIn(split_kv_cases()), case_name);

// When split-KV serves: the default variant, q_len <= 8, kv_len >= SPLIT_KV_MIN_KV_LEN, a decode head
// dim and no window; anything else keeps the flash kernel.
TEST(GpuAttentionPlan, SplitKvOnlyWhereItServes) {
    FP_SKIP_WITHOUT_GPU();
    const auto kernel = [](int64_t q_len, int64_t kv_len, int64_t d, int64_t window) {
        Tensor q(DType::BF16, {1, q_len, 8, d}, Device::gpu()), o(DType::BF16, {1, q_len, 8, d}, Device::gpu());
        Tensor kv(DType::BF16, {1, kv_len, 2, d}, Device::gpu());
        AttentionParams p;
        p.causal = true;
        p.window_left = window;
        return plan_attention(o.view, q.view, kv.view, kv.view, nullptr, p).kernel;
    };
    const int64_t min_kv = gpu::SPLIT_KV_MIN_KV_LEN;
    EXPECT_EQ(kernel(1, 4096, 128, -1).rfind("gpu.flash.split_kv.", 0), 0u) << kernel(1, 4096, 128, -1);
    EXPECT_EQ(kernel(8, min_kv, 64, -1).rfind("gpu.flash.split_kv.", 0), 0u) << kernel(8, min_kv, 64, -1);
    for (auto [q_len, kv_len, d, window] : {std::tuple{9, 4096, 128, -1}, {1, min_kv - 1, 128, -1},
                                            {1, 4096, 96, -1}, {1, 4096, 128, 100}})
        EXPECT_EQ(kernel(q_len, kv_len, d, window).rfind("gpu.flash.split_kv.", 0), std::string::npos)
            << q_len << " " << kv_len << " " << d << " " << window;
    ScopedFlashVariant forced(FlashVariant::PORTABLE);  // a forced variant means that flash kernel
    EXPECT_EQ(kernel(1, 4096, 128, -1), "gpu.flash.portable.d128");
}

class FlashFullGrid : public ::testing::TestWithParam<AttentionCase> {};
TEST_P(FlashFullGrid, Mma) { check_flash(GetParam(), FlashVariant::MMA); }
TEST_P(FlashFullGrid, Portable) { check_flash(GetParam(), FlashVariant::PORTABLE); }
INSTANTIATE_TEST_SUITE_P(Gpu, FlashFullGrid, ::testing::ValuesIn(full_grid(flash_axes())), case_name);

// A planted NaN propagates as in PyTorch (op_harness.h, NanAt), through every GPU kernel.
class FlashNan : public ::testing::TestWithParam<AttentionCase> {};
TEST_P(FlashNan, Mma) {
    check_flash(GetParam(), FlashVariant::MMA);
}
TEST_P(FlashNan, Portable) {
    check_flash(GetParam(), FlashVariant::PORTABLE);
}
TEST_P(FlashNan, Mfma) {
    check_flash(GetParam(), FlashVariant::MFMA);
}
TEST_P(FlashNan, Dot2) {
    check_flash(GetParam(), FlashVariant::DOT2);
}
TEST_P(FlashNan, Wgmma) { check_flash(GetParam(), FlashVariant::WGMMA); }
TEST_P(FlashNan, WgmmaTma) { check_flash_tma(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Gpu, FlashNan,
                         ::testing::ValuesIn(nan_cases(AttentionImpl::FLASH, {DType::F16, DType::BF16}, Device::gpu())),
                         case_name);

class NaiveSubset : public ::testing::TestWithParam<AttentionCase> {};
TEST_P(NaiveSubset, VendorBlas) {
    FP_SKIP_WITHOUT_GPU();
    if (!gpu::blas::vendor_available()) GTEST_SKIP() << "this build has no cuBLAS/hipBLAS";
    ScopedBlas scoped(gpu::blas::Backend::VENDOR);
    check_case(GetParam());
}
TEST_P(NaiveSubset, PortableGemm) {
    FP_SKIP_WITHOUT_GPU();
    ScopedBlas scoped(gpu::blas::Backend::PORTABLE);
    check_case(GetParam());
}
// The MFMA GEMM (AMD matrix cores: a CDNA chip, or the HIP CPU Runtime's emulation); fp32 cases run
// the portable GEMM under this backend.
TEST_P(NaiveSubset, MfmaGemm) {
    FP_SKIP_WITHOUT_GPU();
    if (!gpu::blas::mfma_available()) GTEST_SKIP() << "no MFMA GEMM in this build or on this device";
    ScopedBlas scoped(gpu::blas::Backend::MFMA);
    check_case(GetParam());
}
std::vector<AttentionCase> naive_cases() {
    std::vector<AttentionCase> cases = naive_subset();
    for (const AttentionCase& c : nan_cases(AttentionImpl::NAIVE, {DType::F32, DType::BF16}, Device::gpu()))
        cases.push_back(c);
    return cases;
}
INSTANTIATE_TEST_SUITE_P(Gpu, NaiveSubset, ::testing::ValuesIn(naive_cases()), case_name);

// The variant rules for every arch, without a device: AUTO follows the arch (MFMA on CDNA, dot2 for fp16
// on gfx906/gfx1030), MFMA forced on a chip without matrix cores (or bf16 on gfx908) and dot2 forced on
// a chip without it (or for bf16) are errors naming the chip or the dtype, and a CUDA build is unchanged.
TEST(FlashSelection, FollowsTheArch) {
    const auto pick = [](FlashVariant v, DType dt, const char* arch, bool built = true) {
        gpu::FlashTarget t;
        t.mfma_built = built;
        t.matrix_cores = gpu::matrix_cores_of_arch(arch);
        t.dot2_f16 = gpu::dot2_f16_of_arch(arch);
        t.arch = arch;
        return gpu::select_flash_kernel(v, dt, 64, t);
    };
    EXPECT_EQ(pick(FlashVariant::AUTO, DType::BF16, "gfx90a:sramecc+:xnack-"), AttentionKernel::GPU_FLASH_MFMA);
    EXPECT_EQ(pick(FlashVariant::AUTO, DType::F16, "gfx942"), AttentionKernel::GPU_FLASH_MFMA);
    EXPECT_EQ(pick(FlashVariant::AUTO, DType::F16, "gfx908"), AttentionKernel::GPU_FLASH_MFMA);
    EXPECT_EQ(pick(FlashVariant::AUTO, DType::BF16, "gfx908"), AttentionKernel::GPU_FLASH_PORTABLE);
    // gfx906 (and gfx1030) have no matrix cores: fp16 runs on dot2, bf16 on the portable kernel.
    EXPECT_EQ(pick(FlashVariant::AUTO, DType::F16, "gfx906"), AttentionKernel::GPU_FLASH_DOT2);
    EXPECT_EQ(pick(FlashVariant::AUTO, DType::F16, "gfx906:sramecc+:xnack-"), AttentionKernel::GPU_FLASH_DOT2);
    EXPECT_EQ(pick(FlashVariant::AUTO, DType::BF16, "gfx906"), AttentionKernel::GPU_FLASH_PORTABLE);
    EXPECT_EQ(pick(FlashVariant::AUTO, DType::F16, "gfx1030"), AttentionKernel::GPU_FLASH_DOT2);
    EXPECT_EQ(pick(FlashVariant::AUTO, DType::BF16, "gfx1030"), AttentionKernel::GPU_FLASH_PORTABLE);
    EXPECT_EQ(pick(FlashVariant::AUTO, DType::F16, "gfx1100"), AttentionKernel::GPU_FLASH_PORTABLE);  // not built
    EXPECT_EQ(pick(FlashVariant::AUTO, DType::F16, "gfx906", false), AttentionKernel::GPU_FLASH_PORTABLE);
    // DOT2 forced: served where the chip has the instruction (CDNA too), fp16 only.
    for (const char* arch : {"gfx906", "gfx908", "gfx90a", "gfx942", "gfx1030"})
        EXPECT_EQ(pick(FlashVariant::DOT2, DType::F16, arch), AttentionKernel::GPU_FLASH_DOT2) << arch;
    EXPECT_EQ(pick(FlashVariant::PORTABLE, DType::F16, "gfx906"), AttentionKernel::GPU_FLASH_PORTABLE);
    try {
        pick(FlashVariant::DOT2, DType::F16, "gfx1100");
        ADD_FAILURE() << "dot2 forced on gfx1100 was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("gfx1100"), std::string::npos) << e.what();
    }
    try {
        pick(FlashVariant::DOT2, DType::BF16, "gfx906");
        ADD_FAILURE() << "dot2 forced for bf16 was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("fp16 only"), std::string::npos) << e.what();
    }
    EXPECT_EQ(pick(FlashVariant::PORTABLE, DType::F16, "gfx90a"), AttentionKernel::GPU_FLASH_PORTABLE);
    EXPECT_EQ(pick(FlashVariant::MMA, DType::F16, "gfx90a"), AttentionKernel::GPU_FLASH_PORTABLE);
    EXPECT_EQ(pick(FlashVariant::MFMA, DType::F16, "gfx90a"), AttentionKernel::GPU_FLASH_MFMA);
    for (const char* arch : {"gfx906", "gfx1030"}) {
        try {
            pick(FlashVariant::MFMA, DType::F16, arch);
            ADD_FAILURE() << "MFMA forced on " << arch << " was accepted";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(arch), std::string::npos) << e.what();
        }
    }
    EXPECT_THROW(pick(FlashVariant::MFMA, DType::BF16, "gfx908"), Error);
    // A CUDA build: no MFMA kernels (forcing them gives the portable one, as before), mma on sm_80+.
    gpu::FlashTarget cuda;
    cuda.nvidia_mma = true;
    cuda.arch = "sm_90";
    EXPECT_EQ(gpu::select_flash_kernel(FlashVariant::AUTO, DType::F16, 64, cuda), AttentionKernel::GPU_FLASH_MMA);
    EXPECT_EQ(gpu::select_flash_kernel(FlashVariant::MFMA, DType::F16, 64, cuda), AttentionKernel::GPU_FLASH_PORTABLE);
    EXPECT_EQ(pick(FlashVariant::MFMA, DType::F16, "sm_90", false), AttentionKernel::GPU_FLASH_PORTABLE);
    EXPECT_EQ(gpu::select_flash_kernel(FlashVariant::DOT2, DType::F16, 64, cuda), AttentionKernel::GPU_FLASH_PORTABLE);
    EXPECT_EQ(gpu::select_flash_kernel(FlashVariant::DOT2, DType::BF16, 64, cuda), AttentionKernel::GPU_FLASH_PORTABLE);
    // wgmma: on compute capability 9.0; elsewhere as MMA.
    EXPECT_EQ(gpu::select_flash_kernel(FlashVariant::WGMMA, DType::BF16, 64, cuda), AttentionKernel::GPU_FLASH_MMA);
    gpu::FlashTarget hopper = cuda;
    hopper.sm90_wgmma = true;
    EXPECT_EQ(gpu::select_flash_kernel(FlashVariant::WGMMA, DType::BF16, 64, hopper), AttentionKernel::GPU_FLASH_WGMMA);
    // AUTO on compute capability 9.0: wgmma at the 128 tile whatever the route; with the TMA route also at
    // the 40, 64 and 256 tiles (where it was measured ahead); never where wgmma pads more than mma.sync.
    EXPECT_EQ(gpu::select_flash_kernel(FlashVariant::AUTO, DType::BF16, 64, hopper), AttentionKernel::GPU_FLASH_MMA);
    EXPECT_EQ(gpu::select_flash_kernel(FlashVariant::AUTO, DType::BF16, 128, hopper), AttentionKernel::GPU_FLASH_WGMMA);
    EXPECT_EQ(gpu::select_flash_kernel(FlashVariant::AUTO, DType::F16, 128, hopper), AttentionKernel::GPU_FLASH_WGMMA);
    for (int64_t d : {40, 136, 256})
        EXPECT_EQ(gpu::select_flash_kernel(FlashVariant::AUTO, DType::F16, d, hopper), AttentionKernel::GPU_FLASH_MMA);
    gpu::FlashTarget hopper_tma = hopper;
    hopper_tma.wgmma_tma = true;
    for (int64_t d : {40, 48, 64, 104, 120, 128, 168, 256})
        EXPECT_EQ(gpu::select_flash_kernel(FlashVariant::AUTO, DType::BF16, d, hopper_tma),
                  AttentionKernel::GPU_FLASH_WGMMA) << d;
    for (int64_t d : {8, 16, 32, 72, 80, 88, 96, 136, 160})
        EXPECT_EQ(gpu::select_flash_kernel(FlashVariant::AUTO, DType::BF16, d, hopper_tma),
                  AttentionKernel::GPU_FLASH_MMA) << d;
    EXPECT_EQ(gpu::select_flash_kernel(FlashVariant::AUTO, DType::BF16, 64, cuda), AttentionKernel::GPU_FLASH_MMA);
    for (int64_t d : {104, 120})
        EXPECT_TRUE(gpu::wgmma_beats_mma(d, false)) << d;
    EXPECT_FALSE(gpu::wgmma_beats_mma(264, true));  // past every tile
    EXPECT_EQ(gpu::select_flash_kernel(FlashVariant::AUTO, DType::BF16, 128, cuda), AttentionKernel::GPU_FLASH_MMA);
    EXPECT_EQ(pick(FlashVariant::WGMMA, DType::F16, "gfx90a"), AttentionKernel::GPU_FLASH_PORTABLE);
}

// Under FLASHPORT_GPU_FLASH=wgmma on an sm_90 GPU the plan names the wgmma kernel, with the head dim asked
// for (the instance may round it up).
TEST(GpuAttentionPlan, WgmmaNamesItsKernel) {
    FP_SKIP_WITHOUT_GPU();
    FP_SKIP_WITHOUT_WGMMA(true);
    ScopedFlashVariant scoped(FlashVariant::WGMMA);
    for (int64_t d : {40, 64, 128, 200}) {
        Tensor q(DType::BF16, {1, 130, 2, d}, Device::gpu()), o(DType::BF16, {1, 130, 2, d}, Device::gpu());
        AttentionParams p;
        p.impl = AttentionImpl::FLASH;
        EXPECT_EQ(plan_attention(o.view, q.view, q.view, q.view, nullptr, p).kernel,
                  "gpu.flash.wgmma.d" + std::to_string(d));
    }
}

// The plan names the kernel, and unsupported requests fail with a message naming the limit.
TEST(GpuAttentionPlan, NamesKernelsAndRejectsClearly) {
    FP_SKIP_WITHOUT_GPU();
    Tensor q(DType::F16, {1, 8, 2, 64}, Device::gpu()), o(DType::F16, {1, 8, 2, 64}, Device::gpu());
    AttentionParams p;
    {
        ScopedFlashVariant scoped(FlashVariant::PORTABLE);
        EXPECT_EQ(plan_attention(o.view, q.view, q.view, q.view, nullptr, p).kernel, "gpu.flash.portable.d64");
    }
    {
        // Forced: the portable kernel in a build without MFMA (CUDA), an error on an AMD chip without it.
        ScopedFlashVariant scoped(FlashVariant::MFMA);
        if (gpu::mfma_flash_available(DType::F16) || !gpu::mfma_kernels_built()) {
            EXPECT_EQ(plan_attention(o.view, q.view, q.view, q.view, nullptr, p).kernel,
                      gpu::mfma_kernels_built() ? "gpu.flash.mfma.d64" : "gpu.flash.portable.d64");
        } else {
            EXPECT_THROW(plan_attention(o.view, q.view, q.view, q.view, nullptr, p), Error);
        }
    }
    {
        // dot2 forced: its name where the build and device have it, the portable kernel in a CUDA build.
        ScopedFlashVariant scoped(FlashVariant::DOT2);
        if (gpu::dot2_flash_available() || !gpu::mfma_kernels_built()) {
            EXPECT_EQ(plan_attention(o.view, q.view, q.view, q.view, nullptr, p).kernel,
                      gpu::mfma_kernels_built() ? "gpu.flash.dot2.d64" : "gpu.flash.portable.d64");
        } else {
            EXPECT_THROW(plan_attention(o.view, q.view, q.view, q.view, nullptr, p), Error);
        }
    }
    {
        // The default follows the device's arch: matrix cores where it has them (the emulator: gfx90a).
        ScopedFlashVariant scoped(FlashVariant::AUTO);
        if (gpu::mfma_flash_available(DType::F16)) {
            EXPECT_EQ(plan_attention(o.view, q.view, q.view, q.view, nullptr, p).kernel, "gpu.flash.mfma.d64");
        }
    }
    p.impl = AttentionImpl::NAIVE;
    EXPECT_EQ(plan_attention(o.view, q.view, q.view, q.view, nullptr, p).kernel.rfind("gpu.naive.", 0), 0u);

    auto message = [&](const TensorView& qq, const TensorView& oo, AttentionImpl impl) {
        AttentionParams pp;
        pp.impl = impl;
        try {
            plan_attention(oo, qq, qq, qq, nullptr, pp);
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    Tensor q32(DType::F32, {1, 8, 2, 64}, Device::gpu()), o32(DType::F32, {1, 8, 2, 64}, Device::gpu());
    EXPECT_NE(message(q32.view, o32.view, AttentionImpl::FLASH).find("fp16 or bf16"), std::string::npos);
    // Head dims: a multiple of 8 without an instance of its own runs rounded up (FlashOddHeadDims checks
    // the values); others are refused.
    Tensor q48(DType::F16, {1, 8, 2, 48}, Device::gpu()), o48(DType::F16, {1, 8, 2, 48}, Device::gpu());
    EXPECT_EQ(message(q48.view, o48.view, AttentionImpl::FLASH), "no error");
    for (int64_t d : {44, 264}) {
        Tensor qd(DType::F16, {1, 8, 2, d}, Device::gpu()), od(DType::F16, {1, 8, 2, d}, Device::gpu());
        EXPECT_NE(message(qd.view, od.view, AttentionImpl::FLASH).find("multiples of 8 up to 256"), std::string::npos)
            << d;
    }
    TensorView strided = q.view;  // every other element of head_dim
    strided.shape[3] = 32, strided.stride[3] = 2;
    TensorView ostrided = o.view;
    ostrided.shape[3] = 32, ostrided.stride[3] = 2;
    EXPECT_NE(message(strided, ostrided, AttentionImpl::NAIVE).find("contiguous head_dim"), std::string::npos);
}

// Flash allocates nothing: the tracked GPU allocator sees no allocation during the call.
TEST(GpuAttentionMemory, FlashAllocatesNothing) {
    FP_SKIP_WITHOUT_GPU();
    Tensor q(DType::BF16, {2, 300, 4, 128}, Device::gpu()), o(DType::BF16, {2, 300, 4, 128}, Device::gpu());
    Tensor lse(DType::F32, {2, 4, 300}, Device::gpu());
    std::vector<uint16_t> ones(size_t(q.view.numel()), 0x3f80);  // bf16 1.0
    copy_bytes(q.view.data, Device::gpu(), ones.data(), Device::cpu(), q.view.nbytes());
    for (FlashVariant v : {FlashVariant::MMA, FlashVariant::PORTABLE}) {
        ScopedFlashVariant scoped(v);
        AttentionParams p;
        p.causal = true;
        attention(o.view, q.view, q.view, q.view, &lse.view, p);  // warm-up (one-time attribute set-up)
        synchronize(Device::gpu());
        const MemoryStats before = memory_stats(Device::gpu());
        attention(o.view, q.view, q.view, q.view, &lse.view, p);
        synchronize(Device::gpu());
        EXPECT_EQ(memory_stats(Device::gpu()).alloc_count, before.alloc_count);
    }
}

}  // namespace
}  // namespace flashport::test
