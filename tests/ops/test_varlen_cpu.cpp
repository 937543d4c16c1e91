// Varlen attention on the CPU (each packed sequence as its own dense call, naive and flash) against the
// float64 reference through the varlen harness (varlen_harness.h, the grid and problems of
// attention_varlen_case.h: spare NaN rows around the packed
// sequences, empty sequences, q < kv and q > kv), and the API's validation: each bad request gets an
// error that names the broken limit.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "attention_varlen_case.h"
#include "flashport/attention_varlen.h"
#include "flashport/error.h"

namespace flashport::test {
namespace {

std::vector<VarlenCase> cpu_cases() {
    std::vector<VarlenCase> cases = varlen_grid(Device::cpu());
    for (VarlenCase c : varlen_grid(Device::cpu())) {  // the naive path too, on a few of them
        if (c.head_dim != 64 && c.head_dim != 80) continue;
        c.impl = AttentionImpl::NAIVE;
        cases.push_back(c);
    }
    return cases;
}

class VarlenCpu : public ::testing::TestWithParam<VarlenCase> {};
TEST_P(VarlenCpu, MatchesReference) {
    if (!case_selected(GetParam().name())) GTEST_SKIP() << "not selected by FLASHPORT_TEST_FILTER";
    const VarlenResult r = check_varlen_case(GetParam());
    EXPECT_NE(r.kernel.find(".varlen"), std::string::npos) << r.kernel;
}
INSTANTIATE_TEST_SUITE_P(Cpu, VarlenCpu, ::testing::ValuesIn(cpu_cases()),
                         [](const ::testing::TestParamInfo<VarlenCase>& i) { return i.param.name(); });

// The bench's small problems (attention_varlen_case.h), as the bench runs them.
TEST(VarlenCpuProblems, MatchReference) {
    for (DType dt : {DType::BF16, DType::F16}) expect_bench_cases_pass(attention_varlen_bench_cases(dt), Device::cpu());
}

// A small valid request (two sequences of 3+2 queries, 4+4 keys) whose parts each test breaks in turn.
struct Request {
    std::vector<float> qbuf = std::vector<float>(5 * 4 * 64, 0.5f), obuf = qbuf;
    std::vector<float> kbuf = std::vector<float>(8 * 2 * 64, 0.25f), vbuf = kbuf;
    std::vector<float> lbuf = std::vector<float>(4 * 5);
    std::vector<int32_t> cu_q{0, 3, 5}, cu_k{0, 4, 8};
    TensorView q{qbuf.data(), DType::F32, {5, 4, 64}}, out{obuf.data(), DType::F32, {5, 4, 64}};
    TensorView k{kbuf.data(), DType::F32, {8, 2, 64}}, v{vbuf.data(), DType::F32, {8, 2, 64}};
    TensorView lse{lbuf.data(), DType::F32, {4, 5}};
    int64_t max_q = 3, max_k = 0;
    std::string run() {
        VarlenSeqs s{cu_q.data(), cu_k.data(), int64_t(cu_q.size()) - 1, max_q, max_k};
        try {
            attention_varlen(out, q, k, v, s, &lse);
        } catch (const Error& e) {
            return e.what();
        }
        return "ok";
    }
};

TEST(VarlenCpuErrors, ValidRequestRuns) { EXPECT_EQ(Request().run(), "ok"); }

TEST(VarlenCpuErrors, NamesTheBrokenLimit) {
    auto expect = [](Request& r, const std::string& want) {
        const std::string got = r.run();
        EXPECT_NE(got.find(want), std::string::npos) << "want '" << want << "' in: " << got;
    };
    {
        Request r;
        r.q = TensorView(r.qbuf.data(), DType::F32, {1, 5, 4, 64});
        expect(r, "attention_varlen: q must have 3 dimensions");
    }
    {
        Request r;
        r.v = TensorView(r.vbuf.data(), DType::F32, {7, 2, 64});
        expect(r, "v must be [total_k, n_kv_heads, head_dim] (like k)");
    }
    {
        Request r;
        r.lse = TensorView(r.lbuf.data(), DType::F32, {5, 4});
        expect(r, "lse must be [n_heads, total_q]");
    }
    {
        Request r;
        r.cu_q = {0, 4, 3};
        expect(r, "cu_seqlens_q must not decrease");
    }
    {
        Request r;
        r.cu_k = {0, 4, 9};
        expect(r, "cu_seqlens_k[2] = 9 is past the packed tensor's 8 rows");
    }
    {
        Request r;
        r.cu_q = {-1, 3, 5};
        expect(r, "cu_seqlens_q[0] must be >= 0");
    }
    {
        Request r;
        r.max_q = 2;
        expect(r, "sequence 0 has 3 queries, more than max_seqlen_q = 2");
    }
    {
        Request r;
        r.max_q = -1;
        expect(r, "max_seqlen_q must be >= 0");
    }
    {
        Request r;
        r.max_k = -1;
        expect(r, "max_seqlen_k must be >= 0");
    }
    {
        Request r;
        r.k = TensorView(r.kbuf.data(), DType::F32, {8, 3, 64});
        r.v = r.k;
        expect(r, "multiple of n_kv_heads");
    }
}

TEST(VarlenCpuErrors, NullOffsets) {
    Request r;
    VarlenSeqs s{nullptr, r.cu_k.data(), 2, 3};
    try {
        attention_varlen(r.out, r.q, r.k, r.v, s);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("cu_seqlens_q and cu_seqlens_k must be set"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace flashport::test
