// The GPU paged decode kernels (split-KV, the splits merged by each group's last block or by the separate
// combine kernel) against the float64 CPU reference through the paged harness
// (tests/ops/paged_attention_harness.h): shuffled block tables, NaN in every cache slot that holds no
// token, partial last blocks, mixed lengths in one batch; plus the agreement of one split with many,
// many splits on a reused, dirty workspace, the workspace contract, in-kernel detection of bad cache
// metadata, and no allocation in the call.
// Everything runs for each split kernel: the tensor-core one (MMA, NVIDIA sm_80+), the matrix-core one
// (MFMA, AMD CDNA; emulated on the CPU) and the portable one, selected with gpu::set_decode_variant.
// Every test skips with "no GPU present" where there is none.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "backends/gpu/paged_attention_decode.h"
#include "flashport/error.h"
#include "flashport/memory.h"
#include "flashport/paged_attention.h"
#include "flashport/paged_cache.h"
#include "gpu_test_util.h"
#include "paged_attention_case.h"

namespace flashport::test {
namespace {

using gpu::DecodeVariant;
constexpr DecodeVariant VARIANTS[] = {DecodeVariant::MMA, DecodeVariant::PORTABLE, DecodeVariant::MFMA};

// Sets whether the fused merge uses the op's own split counters for a scope (on again after it, as at start).
class ScopedOwnedCounters {
public:
    explicit ScopedOwnedCounters(bool on) { gpu::set_decode_owned_counters(on); }
    ~ScopedOwnedCounters() { gpu::set_decode_owned_counters(true); }
    ScopedOwnedCounters(const ScopedOwnedCounters&) = delete;
    ScopedOwnedCounters& operator=(const ScopedOwnedCounters&) = delete;
};

const char* variant_name(DecodeVariant v) {
    return v == DecodeVariant::MMA ? "mma" : v == DecodeVariant::MFMA ? "mfma" : "portable";
}

// The kernel name a plan must carry for variant v: MMA (the default) is the device's matrix-unit kernel,
// falling back to the portable one only where none can run (pre-sm_80, too little shared memory, an AMD
// chip without matrix cores for the dtype), so on the H200 a test that asks for MMA really runs it, and
// under the HIP CPU Runtime (a gfx90a) it runs the MFMA kernel.
std::string expected_prefix(DecodeVariant v, int64_t head_dim, DType dtype) {
    const char* kernel = "portable";
    if (v == DecodeVariant::MMA && gpu::paged_attention_decode_mma_available(int(head_dim)))
        kernel = "mma";
    else if (v != DecodeVariant::PORTABLE && gpu::paged_attention_decode_mfma_available(dtype))
        kernel = "mfma";
    return std::string("gpu.paged_attention.decode.") + kernel + ".";
}

// The MFMA kernel is built by HIP builds and runs where the device's matrix cores cover the dtype: the
// HIP CPU Runtime (scripts/gpu/wave64.sh, under the instruction emulation; it reports gfx90a) or a CDNA
// chip. No AMD GPU has run it.
#define FP_SKIP_WITHOUT_MFMA_DECODE(is_mfma, dtype)                      \
    if ((is_mfma) && !gpu::paged_attention_decode_mfma_available(dtype)) \
    GTEST_SKIP() << "no MFMA decode kernel on this build or device (AMD matrix cores only)"

PagedCase gpu_case() {
    PagedCase c;
    c.device = Device::gpu();
    return c;
}

// paged_attention_case.h's grid: lengths × GQA (1, 2, 7, 8) × q_len (1, 2, 8), every combination, with
// dtype, head dim, block size, LSE, causal, cache layout and split count rotating.
std::vector<PagedCase> grid() {
    PagedGridAxes a;
    a.lens = {{1}, {7}, {97}, {1023}, {1025}, {4097}, {1, 97, 1025, 7, 4097, 16}, {0, 33, 2}};
    a.heads = {{4, 4}, {4, 2}, {14, 2}, {8, 1}};
    a.q_lens = {1, 2, 8};
    a.dims = {128, 64, 256}, a.dim_step = 2;
    a.causal_period = 9;
    a.splits = {0, 1, 0, 13, 0, 256};
    a.device = Device::gpu();
    std::vector<PagedCase> cases = paged_grid(a);
    // Qwen2.5-7B's decode shape at both dtypes, every head dim, forced and automatic splits.
    for (DType dt : {DType::BF16, DType::F16})
        for (int64_t d : {64, 128, 256})
            for (int s : {0, 1, 3, 64}) {
                PagedCase c = gpu_case();
                c.seq_lens = {2049, 300}, c.n_heads = 28, c.n_kv_heads = 4, c.head_dim = d, c.dtype = dt;
                c.num_splits = s;
                cases.push_back(c);
            }
    PagedCase c = gpu_case();
    c.seq_lens = {500}, c.n_heads = 8, c.n_kv_heads = 2, c.scale = 2.5f;  // near one-hot softmax
    cases.push_back(c);
    c.scale = -0.125f;  // a negative scale is legal
    cases.push_back(c);
    return cases;
}

class PagedAttentionDecode : public ::testing::TestWithParam<PagedCase> {};
void check_variant(const PagedCase& c, DecodeVariant v) {
    if (!case_selected(c.name())) GTEST_SKIP() << "not selected by FLASHPORT_TEST_FILTER";
    ScopedDecodeVariant scoped(v);
    const PagedResult r = check_paged_case(c);
    if (c.num_splits > 0) {
        EXPECT_EQ(r.num_splits, c.num_splits);
    }
    EXPECT_EQ(r.kernel.rfind(expected_prefix(v, c.head_dim, c.dtype), 0), 0u) << r.kernel;
}
TEST_P(PagedAttentionDecode, Mma) {
    FP_SKIP_WITHOUT_GPU();
    FP_SKIP_MMA_OFF_NVIDIA(true);
    check_variant(GetParam(), DecodeVariant::MMA);
}
TEST_P(PagedAttentionDecode, Portable) {
    FP_SKIP_WITHOUT_GPU();
    check_variant(GetParam(), DecodeVariant::PORTABLE);
}
TEST_P(PagedAttentionDecode, Mfma) {
    FP_SKIP_WITHOUT_GPU();
    FP_SKIP_WITHOUT_MFMA_DECODE(true, GetParam().dtype);
    check_variant(GetParam(), DecodeVariant::MFMA);  // no AMD GPU has run it: emulated (wave64.sh)
}
std::vector<PagedCase> grid_and_nan_cases() {
    std::vector<PagedCase> cases = grid();
    for (const PagedCase& c : paged_nan_cases(Device::gpu())) cases.push_back(c);
    return cases;
}
INSTANTIATE_TEST_SUITE_P(Gpu, PagedAttentionDecode, ::testing::ValuesIn(grid_and_nan_cases()),
                         [](const ::testing::TestParamInfo<PagedCase>& i) { return i.param.name(); });

// The bench's problems (paged_attention_case.h: Qwen2.5-7B decode at 32k and batch 64 x 8k, chunked
// prefill), with the default kernel, as the bench runs them.
TEST(PagedAttentionGpuProblems, MatchReference) {
    FP_SKIP_WITHOUT_GPU();
    for (DType dt : {DType::BF16, DType::F16}) expect_bench_cases_pass(paged_attention_bench_cases(dt), Device::gpu());
}

// One split and many compute the same thing: the harness draws inputs independently of the split
// count, so the runs below see identical inputs; each passes the reference, and the outputs agree with
// each other within the reference bound.
// The tests below run once per variant (suffix /mma, /portable, /mfma).
class VariantTest : public ::testing::TestWithParam<DecodeVariant> {
  protected:
      void SetUp() override {
          FP_SKIP_MMA_OFF_NVIDIA(GetParam() == DecodeVariant::MMA);
          FP_SKIP_WITHOUT_MFMA_DECODE(GetParam() == DecodeVariant::MFMA, DType::F16);
          scoped_.emplace(GetParam());
      }
    void TearDown() override { scoped_.reset(); }
    std::optional<ScopedDecodeVariant> scoped_;
};
std::string variant_param_name(const ::testing::TestParamInfo<DecodeVariant>& i) { return variant_name(i.param); }
#define FP_VARIANT_SUITE(suite)                                                                        \
    class suite : public VariantTest {};                                                               \
    INSTANTIATE_TEST_SUITE_P(Gpu, suite, ::testing::ValuesIn(VARIANTS), variant_param_name)

FP_VARIANT_SUITE(PagedAttentionDecodeSplits);
TEST_P(PagedAttentionDecodeSplits, OneAndManyAgree) {
    FP_SKIP_WITHOUT_GPU();
    const DecodeVariant var = GetParam();
    for (DType dt : {DType::BF16, DType::F16}) {
        PagedCase c = gpu_case();
        c.seq_lens = {4097, 1025, 7}, c.n_heads = 28, c.n_kv_heads = 4, c.q_len = 2, c.dtype = dt;
        std::vector<PagedResult> runs;
        for (int s : {1, 7, 256}) {
            c.num_splits = s;
            runs.push_back(run_paged_case(c));
            ASSERT_TRUE(runs.back().ok()) << variant_name(var) << ": " << runs.back().summary();
            ASSERT_EQ(runs.back().num_splits, s);
        }
        for (size_t i = 1; i < runs.size(); ++i) {
            double num = 0.0, den = 0.0;
            for (size_t n = 0; n < runs[0].out.size(); ++n) {
                const double x = runs[i].out[n], y = runs[0].out[n];
                num += (x - y) * (x - y);
                den += y * y;
            }
            EXPECT_LE(std::sqrt(num / den), runs[0].bound)
                << variant_name(var) << ", " << dtype_name(dt) << ": splits 1 vs " << runs[i].num_splits;
        }
    }
}

// One kernel per decode: with several splits, the last split block of each (sequence, KV head, row
// chunk) to finish merges the group's partials and resets its counter. Many splits (forced, so most
// slices of the short lengths are empty and must still count in), odd lengths alone and mixed in one
// batch, GQA 1, 2 and 7, one and three query tokens; each case runs twice on one workspace that is
// filled with 0xff bytes (NaN partials, counters at UINT32_MAX) before each run, as a fresh one may be,
// with outputs poisoned before each run: both runs pass the float64 reference, the second gives the
// first's bits, and the counters are left at 0 (so the next launch or a replayed graph finds them
// there). Three ways of merging run: in the split kernel on the op's own counters (FUSED's usual path), in
// the split kernel on the workspace's counters (zeroed first: the path of a request with more groups
// than the op's buffer holds), and in the separate combine kernel (A/B fallback).
enum class Merge { OWN_COUNTERS, WORKSPACE_COUNTERS, SEPARATE };
FP_VARIANT_SUITE(PagedAttentionDecodeMerge);
TEST_P(PagedAttentionDecodeMerge, ManySplitsReusedDirtyWorkspace) {
    FP_SKIP_WITHOUT_GPU();
    const std::vector<std::vector<int32_t>> lens = {{1}, {7}, {97}, {1023}, {1025}, {1, 1025, 7, 97}};
    const std::pair<int64_t, int64_t> heads[] = {{2, 2}, {4, 2}, {14, 2}};
    const int splits[] = {256, 61, 200};
    const int64_t dims[] = {128, 64, 256};
    for (Merge merge : {Merge::OWN_COUNTERS, Merge::WORKSPACE_COUNTERS, Merge::SEPARATE}) {
        ScopedDecodeCombine scoped(merge == Merge::SEPARATE ? gpu::DecodeCombine::SEPARATE : gpu::DecodeCombine::FUSED);
        ScopedOwnedCounters owned(merge == Merge::OWN_COUNTERS);
        const bool fused = merge != Merge::SEPARATE;
        size_t n = 0;
        for (const auto& l : lens)
            for (auto [h, kvh] : heads) {
                PagedCase c = gpu_case();
                c.seq_lens = l, c.n_heads = h, c.n_kv_heads = kvh;
                c.q_len = n % 2 ? 3 : 1;
                c.dtype = n % 3 == 1 ? DType::F16 : DType::BF16;
                c.head_dim = dims[n % 3];
                c.block_size = n % 4 == 3 ? 48 : 16;
                c.lse = n % 5 != 4;
                c.num_splits = splits[n % 3];
                c.runs = 2, c.dirty_workspace = true;
                ++n;
                const char* how[] = {" own counters ", " workspace counters ", " separate "};
                const std::string what = std::string(variant_name(GetParam())) + how[int(merge)] + c.name();
                const PagedResult r = check_paged_case(c);
                if (!r.ok()) continue;  // check_paged_case reported it
                EXPECT_EQ(r.num_splits, c.num_splits) << what;
                const std::string suffix = fused ? ".splits" + std::to_string(c.num_splits)
                                                 : ".splits" + std::to_string(c.num_splits) + ".combine";
                EXPECT_TRUE(r.kernel.size() >= suffix.size() &&
                            r.kernel.compare(r.kernel.size() - suffix.size(), suffix.size(), suffix) == 0)
                    << what << ": " << r.kernel;
                if (merge == Merge::OWN_COUNTERS) {  // the harness runs on the default stream
                    std::vector<unsigned> counters(gpu::decode_owned_counters_size(), 1u);
                    copy_bytes(counters.data(), Device::cpu(), gpu::decode_owned_counters(nullptr), Device::gpu(),
                               counters.size() * 4);
                    for (size_t i = 0; i < counters.size(); ++i)
                        ASSERT_EQ(counters[i], 0u) << what << ": the op's split counter " << i << " not reset";
                }
                if (merge != Merge::WORKSPACE_COUNTERS) continue;  // the others leave the workspace's alone
                const size_t rows = c.seq_lens.size() * size_t(c.q_len * c.n_heads);
                const size_t at = gpu::paged_attention_decode_counters_offset(int64_t(rows), c.num_splits, c.head_dim);
                ASSERT_LT(at, r.workspace.size()) << what;
                for (size_t i = at; i < r.workspace.size(); ++i)
                    ASSERT_EQ(r.workspace[i], 0) << what << ": split counter byte " << i - at << " not reset";
            }
    }
}

// A request on the GPU that the tests below break in turn.
struct GpuRequest {
    int64_t B = 2, Q = 1, H = 8, KVH = 2, D = 128, BS = 16, NB = 16, MB = 8;
    Tensor k{DType::BF16, {NB, BS, KVH, D}, Device::gpu()}, v{DType::BF16, {NB, BS, KVH, D}, Device::gpu()};
    Tensor q{DType::BF16, {B, Q, H, D}, Device::gpu()}, out{DType::BF16, {B, Q, H, D}, Device::gpu()};
    Tensor lse{DType::F32, {B, H, Q}, Device::gpu()};
    Buffer table{size_t(B * MB) * 4, Device::gpu()}, lens{size_t(B) * 4, Device::gpu()};
    PagedKVCache kv;
    // q_len above PAGED_DECODE_MAX_Q_LEN runs the paged prefill kernel instead of split-KV decode.
    GpuRequest(std::vector<int32_t> t, std::vector<int32_t> l, int64_t q_len = 1) : Q(q_len) {
        std::vector<uint16_t> ones(size_t(NB * BS * KVH * D), 0x3f80);  // bf16 1.0
        copy_bytes(k.view.data, Device::gpu(), ones.data(), Device::cpu(), k.view.nbytes());
        copy_bytes(v.view.data, Device::gpu(), ones.data(), Device::cpu(), v.view.nbytes());
        copy_bytes(q.view.data, Device::gpu(), ones.data(), Device::cpu(), q.view.nbytes());
        copy_bytes(table.data(), Device::gpu(), t.data(), Device::cpu(), t.size() * 4);
        copy_bytes(lens.data(), Device::gpu(), l.data(), Device::cpu(), l.size() * 4);
        kv.k_cache = k.view, kv.v_cache = v.view;
        kv.block_table = table.as<int32_t>(), kv.max_blocks_per_seq = MB, kv.seq_lens = lens.as<int32_t>();
    }
    // Runs with a workspace of the size the plan asks for, and waits.
    void run(const PagedAttentionParams& p) {
        Buffer ws(std::max<size_t>(16, paged_attention_workspace_bytes(out.view, q.view, kv, &lse.view, p)),
                  Device::gpu());
        paged_attention(out.view, q.view, kv, &lse.view, p, ws.data(), ws.size());
        synchronize(Device::gpu());
    }
    std::vector<float> output() {
        std::vector<uint16_t> h(size_t(out.view.numel()));
        copy_bytes(h.data(), Device::cpu(), out.view.data, Device::gpu(), out.view.nbytes());
        std::vector<float> f(h.size());
        for (size_t i = 0; i < h.size(); ++i) f[i] = load_as_float(&h[i], DType::BF16);
        return f;
    }
};

PagedAttentionParams with_splits(int n) {
    PagedAttentionParams p;
    p.num_splits = n;
    return p;
}

std::vector<int32_t> good_table() {
    std::vector<int32_t> t(16);
    for (int i = 0; i < 16; ++i) t[size_t(i)] = (i * 7 + 3) % 16;  // a permutation
    return t;
}

FP_VARIANT_SUITE(PagedAttentionDecodeWorkspace);
TEST_P(PagedAttentionDecodeWorkspace, TooSmallIsAnError) {
    FP_SKIP_WITHOUT_GPU();
    GpuRequest r(good_table(), {100, 40});
    PagedAttentionParams p = with_splits(4);
    const size_t need = paged_attention_workspace_bytes(r.out.view, r.q.view, r.kv, &r.lse.view, p);
    EXPECT_GT(need, 0u);
    Buffer ws(need, Device::gpu());
    for (size_t have : {size_t(0), need - 1}) {
        try {
            paged_attention(r.out.view, r.q.view, r.kv, &r.lse.view, p, have ? ws.data() : nullptr, have);
            ADD_FAILURE() << "a workspace of " << have << " bytes (need " << need << ") was accepted";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("workspace is too small"), std::string::npos) << e.what();
        }
    }
    paged_attention(r.out.view, r.q.view, r.kv, &r.lse.view, p, ws.data(), need);
    synchronize(Device::gpu());
    for (float x : r.output()) ASSERT_NEAR(x, 1.0f, 1e-2f);  // every value is 1: the output is v = 1
    p.num_splits = 1;  // one split needs no workspace
    EXPECT_EQ(paged_attention_workspace_bytes(r.out.view, r.q.view, r.kv, &r.lse.view, p), 0u);
}

// A block id outside the pool, or a seq_len past the table's capacity, is caught in the kernel: that
// sequence's rows are NaN, the other sequence's are right. For decode (1 query) and prefill (20).
FP_VARIANT_SUITE(PagedAttentionDecodeBadMetadata);
TEST_P(PagedAttentionDecodeBadMetadata, PoisonsOnlyThatSequence) {
    FP_SKIP_WITHOUT_GPU();
    for (auto [s, q_len] : {std::pair{1, 1}, {5, 1}, {1, 20}}) {
        for (int what = 0; what < 2; ++what) {
            std::vector<int32_t> t = good_table(), l = {100, 40};
            if (what == 0) t[3] = 99;  // sequence 0, block 3 (tokens 48..63): out of range
            else l[0] = 8 * 16 + 1;    // past max_blocks_per_seq · block_size
            GpuRequest r(t, l, q_len);
            PagedAttentionParams p = with_splits(s);
            r.run(p);
            const std::vector<float> o = r.output();
            const size_t per_seq = o.size() / 2;
            for (size_t i = 0; i < per_seq; ++i)
                ASSERT_TRUE(std::isnan(o[i])) << "splits " << s << " q_len " << q_len << " case " << what;
            for (size_t i = per_seq; i < o.size(); ++i) ASSERT_NEAR(o[i], 1.0f, 1e-2f);
        }
    }
}

// The call allocates nothing after its first on a stream (the workspace is the caller's; the op's split
// counters for the stream are made once), so it can be captured in a graph.
FP_VARIANT_SUITE(PagedAttentionDecodeMemory);
TEST_P(PagedAttentionDecodeMemory, AllocatesNothing) {
    FP_SKIP_WITHOUT_GPU();
    for (auto [s, q_len] : {std::pair{0, 1}, {1, 1}, {6, 1}, {0, 20}}) {
        GpuRequest r(good_table(), {100, 40}, q_len);
        PagedAttentionParams p = with_splits(s);
        Buffer ws(std::max<size_t>(16, paged_attention_workspace_bytes(r.out.view, r.q.view, r.kv, &r.lse.view, p)),
                  Device::gpu());
        const auto call = [&] {
            paged_attention(r.out.view, r.q.view, r.kv, &r.lse.view, p, ws.data(), ws.size());
            synchronize(Device::gpu());
        };
        call();  // warm-up
        const MemoryStats before = memory_stats(Device::gpu());
        call();
        EXPECT_EQ(memory_stats(Device::gpu()).alloc_count, before.alloc_count);
    }
}

FP_VARIANT_SUITE(PagedAttentionDecodePlan);
TEST_P(PagedAttentionDecodePlan, NamesKernelAndRejectsClearly) {
    FP_SKIP_WITHOUT_GPU();
    GpuRequest r(good_table(), {100, 40});
    PagedAttentionParams p = with_splits(3);
    EXPECT_EQ(plan_paged_attention(r.out.view, r.q.view, r.kv, &r.lse.view, p).kernel,
              expected_prefix(GetParam(), 128, DType::BF16) + "d128.splits3" +
                  (gpu::decode_combine() == gpu::DecodeCombine::SEPARATE ? ".combine" : ""));
    p.num_splits = 0;  // room for long sequences, batch 2: the automatic choice splits
    PagedKVCache roomy = r.kv;
    roomy.max_blocks_per_seq = 1024;  // the plan reads no table, only its declared size
    EXPECT_GT(plan_paged_attention(r.out.view, r.q.view, roomy, &r.lse.view, p).params.num_splits, 1);
    p.max_seq_len = 64;  // ... unless told the sequences are short
    EXPECT_EQ(plan_paged_attention(r.out.view, r.q.view, roomy, &r.lse.view, p).params.num_splits, 1);
    Tensor k264(DType::BF16, {16, 16, 2, 264}, Device::gpu()), q264(DType::BF16, {2, 1, 8, 264}, Device::gpu());
    PagedKVCache kv = r.kv;
    kv.k_cache = kv.v_cache = k264.view;
    try {
        plan_paged_attention(q264.view, q264.view, kv, nullptr, {});
        ADD_FAILURE() << "head_dim 264 accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("supports head dims that are multiples of 8 up to 256"), std::string::npos)
            << e.what();
    }
}

}  // namespace
}  // namespace flashport::test

namespace flashport::test {
namespace {

// paged_cache_write on the GPU gives the CPU's bytes: rows in the named slots, negative slots skipped,
// and (GPU only, documented) slots past the cache skipped; int32 and int64 maps, strided rows.
TEST(PagedCacheWriteGpu, MatchesCpu) {
    FP_SKIP_WITHOUT_GPU();
    constexpr int64_t NB = 5, BS = 16, H = 4, D = 128, T = 37;
    const size_t cache_elems = size_t(NB * BS * H * D), row = size_t(H * D + 8);
    std::vector<uint16_t> src(size_t(T) * row);
    for (size_t i = 0; i < src.size(); ++i) src[i] = uint16_t(i * 2654435761u >> 16);
    std::vector<int32_t> slots(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) slots[size_t(t)] = int32_t((t * 7 + 3) % (NB * BS));  // distinct slots
    slots[4] = -1;
    const std::vector<int32_t> gpu_only_bad = {int32_t(NB * BS), 1 << 30};  // skipped on the GPU
    for (bool wide : {false, true}) {
        std::vector<uint16_t> expect_k(cache_elems, 0x7fc0), expect_v = expect_k;
        TensorView k(src.data(), DType::BF16, {T, H, D}), v = k;
        k.stride[0] = v.stride[0] = int64_t(row);
        paged_cache_write(TensorView(expect_k.data(), DType::BF16, {NB, BS, H, D}),
                          TensorView(expect_v.data(), DType::BF16, {NB, BS, H, D}), k, v, IndexView(slots));
        // The GPU run: the same slots plus two out-of-range ones on extra tokens (copies of token 0).
        std::vector<uint16_t> src2 = src;
        src2.insert(src2.end(), src.begin(), src.begin() + ptrdiff_t(2 * row));
        std::vector<int64_t> slots2(slots.begin(), slots.end());
        slots2.insert(slots2.end(), gpu_only_bad.begin(), gpu_only_bad.end());
        Tensor kc(DType::BF16, {NB, BS, H, D}, Device::gpu()), vc(DType::BF16, {NB, BS, H, D}, Device::gpu());
        const std::vector<uint16_t> nan(cache_elems, 0x7fc0);
        copy_bytes(kc.view.data, Device::gpu(), nan.data(), Device::cpu(), cache_elems * 2);
        copy_bytes(vc.view.data, Device::gpu(), nan.data(), Device::cpu(), cache_elems * 2);
        Buffer rows_dev(src2.size() * 2, Device::gpu()), slots_dev(slots2.size() * 8, Device::gpu());
        copy_bytes(rows_dev.data(), Device::gpu(), src2.data(), Device::cpu(), src2.size() * 2);
        std::vector<int32_t> slots2_32(slots2.begin(), slots2.end());
        if (wide)
            copy_bytes(slots_dev.data(), Device::gpu(), slots2.data(), Device::cpu(), slots2.size() * 8);
        else
            copy_bytes(slots_dev.data(), Device::gpu(), slots2_32.data(), Device::cpu(), slots2_32.size() * 4);
        TensorView kd(rows_dev.data(), DType::BF16, {T + 2, H, D}, Device::gpu()), vd = kd;
        kd.stride[0] = vd.stride[0] = int64_t(row);
        const IndexView map = wide ? IndexView(slots_dev.as<int64_t>(), T + 2, Device::gpu())
                                   : IndexView(slots_dev.as<int32_t>(), T + 2, Device::gpu());
        paged_cache_write(kc.view, vc.view, kd, vd, map);
        synchronize(Device::gpu());
        std::vector<uint16_t> got_k(cache_elems), got_v(cache_elems);
        copy_bytes(got_k.data(), Device::cpu(), kc.view.data, Device::gpu(), cache_elems * 2);
        copy_bytes(got_v.data(), Device::cpu(), vc.view.data, Device::gpu(), cache_elems * 2);
        EXPECT_EQ(got_k, expect_k) << (wide ? "int64" : "int32") << " slots";
        EXPECT_EQ(got_v, expect_v) << (wide ? "int64" : "int32") << " slots";
    }
}

}  // namespace
}  // namespace flashport::test
