// Bad attention requests: one test per broken limit, each checking that the error message names the
// limit (and what was given), so a user can fix the call from the message alone.
//
// A non-unit stride on head_dim is not an error: both CPU kernels support it (the op harness tests
// the Layout::DIM_STRIDED layout), so there is no limit to report.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "flashport/attention.h"
#include "flashport/device.h"
#include "common/error_text.h"
#include "flashport/error.h"

using ::testing::AllOf;
using ::testing::HasSubstr;

namespace flashport {
namespace {

// A valid request (batch 2, q_len 5, kv_len 7, 4 heads over 2 KV heads, head_dim 16, fp32, with
// LSE) that each test breaks in one way.
struct Request {
    int64_t batch = 2, q_len = 5, kv_len = 7, n_heads = 4, n_kv_heads = 2, head_dim = 16;
    std::vector<float> qb, kb, vb, ob, lb;
    TensorView q, k, v, out, lse;
    AttentionParams params;
    bool with_lse = true;

    Request() { rebuild(); }
    Request(const Request&) = delete;  // the views point into this object's vectors
    Request& operator=(const Request&) = delete;
    // Re-derives the views (and enough storage) from the dimensions above.
    void rebuild() {
        qb.assign(size_t(batch * q_len * n_heads * head_dim), 0.1f);
        ob.assign(qb.size(), 0.0f);
        kb.assign(size_t(batch * kv_len * n_kv_heads * head_dim), 0.2f);
        vb.assign(kb.size(), 0.3f);
        lb.assign(size_t(batch * n_heads * q_len), 0.0f);
        q = TensorView(qb.data(), DType::F32, {batch, q_len, n_heads, head_dim});
        out = TensorView(ob.data(), DType::F32, {batch, q_len, n_heads, head_dim});
        k = TensorView(kb.data(), DType::F32, {batch, kv_len, n_kv_heads, head_dim});
        v = TensorView(vb.data(), DType::F32, {batch, kv_len, n_kv_heads, head_dim});
        lse = TensorView(lb.data(), DType::F32, {batch, n_heads, q_len});
    }
    // The message attention() throws, or a marker when it does not throw.
    std::string error() const {
        try {
            attention(out, q, k, v, with_lse ? &lse : nullptr, params);
        } catch (const Error& e) {
            return e.what();
        }
        return "(attention did not throw)";
    }
};

using test::error_of;

// The message of the valid request with dimension d of one of its tensors set to n.
std::string shape_error(TensorView Request::*tensor, int d, int64_t n) {
    Request r;
    (r.*tensor).shape[size_t(d)] = n;
    return r.error();
}

TEST(AttentionErrors, ValidRequestRuns) {
    Request r;  // the baseline every other test breaks: it must itself be accepted
    EXPECT_EQ(r.error(), "(attention did not throw)");
    EXPECT_FLOAT_EQ(r.ob[0], 0.3f) << "all values equal: the output is v's value";
}

TEST(AttentionErrors, HeadDimAboveTheCpuLimit) {
    Request r;
    r.head_dim = 300;
    r.rebuild();
    EXPECT_THAT(r.error(), AllOf(HasSubstr("head_dim 300"), HasSubstr("CPU"), HasSubstr("1 to 256")));
}

TEST(AttentionErrors, HeadDimZero) {
    Request r;
    r.head_dim = 0;
    r.rebuild();
    r.q.data = r.out.data = r.k.data = r.v.data = r.lse.data;  // keep the pointers non-null
    EXPECT_THAT(r.error(), HasSubstr("head_dim must be at least 1, got 0"));
}

TEST(AttentionErrors, HeadsNotAMultipleOfKvHeads) {
    Request r;
    r.n_heads = 6, r.n_kv_heads = 4;
    r.rebuild();
    EXPECT_THAT(r.error(), HasSubstr("n_heads (6) must be a multiple of n_kv_heads (4)"));
}

TEST(AttentionErrors, KShapeDisagreesWithQ) {
    const char* want = "k must be [batch, kv_len, n_kv_heads, head_dim] = [2, 7, 2, 16]";
    EXPECT_THAT(shape_error(&Request::k, 3, 8), AllOf(HasSubstr(want), HasSubstr("got fp32[2, 7, 2, 8]")));  // head_dim
    EXPECT_THAT(shape_error(&Request::k, 0, 1), HasSubstr(want));                                            // batch
}

TEST(AttentionErrors, VShapeDisagreesWithK) {
    EXPECT_THAT(shape_error(&Request::v, 1, 6),  // kv_len 6 against k's 7
                AllOf(HasSubstr("v must be [batch, kv_len, n_kv_heads, head_dim] (like k) = [2, 7, 2, 16]"),
                      HasSubstr("got fp32[2, 6, 2, 16]")));
}

TEST(AttentionErrors, OutShapeDisagreesWithQ) {
    EXPECT_THAT(shape_error(&Request::out, 2, 2),  // n_heads 2 against q's 4
                HasSubstr("out must be [batch, q_len, n_heads, head_dim] (like q) = [2, 5, 4, 16]"));
}

TEST(AttentionErrors, DtypesDisagree) {
    Request r;
    r.k.dtype = DType::BF16;
    EXPECT_THAT(r.error(), AllOf(HasSubstr("must share one dtype"), HasSubstr("q fp32, k bf16, v fp32, out fp32")));
    Request r2;
    r2.out.dtype = DType::F16;
    EXPECT_THAT(r2.error(), HasSubstr("out fp16"));
}

TEST(AttentionErrors, LseWrongShape) {
    EXPECT_THAT(shape_error(&Request::lse, 2, 6),
                AllOf(HasSubstr("lse must be [batch, n_heads, q_len] = [2, 4, 5]"), HasSubstr("got fp32[2, 4, 6]")));
}

TEST(AttentionErrors, LseWrongDtype) {
    Request r;
    r.lse.dtype = DType::F16;
    EXPECT_THAT(r.error(), HasSubstr("lse must be fp32, got fp16"));
}

TEST(AttentionErrors, LseWrongRank) {
    Request r;
    r.lse = TensorView(r.lb.data(), DType::F32, {2, 20});
    EXPECT_THAT(r.error(), HasSubstr("lse must have 3 dimensions, got fp32[2, 20]"));
}

TEST(AttentionErrors, WindowLeftBelowMinusOne) {
    Request r;
    r.params.window_left = -2;
    EXPECT_THAT(r.error(), HasSubstr("window_left must be -1 (no window) or >= 0, got -2"));
}

TEST(AttentionErrors, NullDataNamesTheTensor) {
    const std::pair<const char*, TensorView Request::*> tensors[] = {
        {"q", &Request::q}, {"k", &Request::k}, {"v", &Request::v}, {"out", &Request::out}, {"lse", &Request::lse}};
    for (const auto& [name, member] : tensors) {
        Request r;
        (r.*member).data = nullptr;
        EXPECT_THAT(r.error(), HasSubstr(std::string("attention: ") + name + " has no data (null pointer)")) << name;
    }
}

TEST(AttentionErrors, WrongRank) {
    Request r;
    r.q = TensorView(r.qb.data(), DType::F32, {2, 5, 64});  // [batch, len, heads · dim]: not split into heads
    EXPECT_THAT(r.error(), HasSubstr("q must have 4 dimensions, got fp32[2, 5, 64]"));
}

TEST(AttentionErrors, NegativeDimension) {
    EXPECT_THAT(shape_error(&Request::v, 1, -7), HasSubstr("v has a negative dimension"));
}

TEST(AttentionErrors, NonFiniteScale) {
    for (float scale : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity()}) {
        Request r;
        r.params.scale = scale;
        EXPECT_THAT(r.error(), HasSubstr("scale must be finite")) << scale;
    }
}

TEST(AttentionErrors, GpuTensorsInACpuBuildNameThePreset) {
    if (std::string(gpu_backend_name()) != "none") GTEST_SKIP() << "this build has a GPU backend";
    Request r;
    for (TensorView* t : {&r.q, &r.k, &r.v, &r.out, &r.lse}) t->device = Device::gpu(0);
    EXPECT_THAT(r.error(), AllOf(HasSubstr("attention on gpu:0 needs a GPU build"), HasSubstr("--preset cuda"),
                                 HasSubstr("--preset hip")));
}

TEST(AttentionErrors, TensorsOnDifferentDevices) {
    Request r;
    r.k.device = Device::gpu(0);
    EXPECT_THAT(r.error(), HasSubstr("must be on one device, got q on cpu, k on gpu:0"));
    Request r2;
    r2.lse.device = Device::gpu(1);
    EXPECT_THAT(r2.error(), HasSubstr("lse must be on cpu, got gpu:1"));
}

TEST(AttentionErrors, RejectedCallLeavesOutputUntouched) {
    Request r;
    std::fill(r.ob.begin(), r.ob.end(), -42.0f);
    r.params.window_left = -5;
    EXPECT_THAT(r.error(), HasSubstr("window_left"));
    EXPECT_TRUE(std::all_of(r.ob.begin(), r.ob.end(), [](float x) { return x == -42.0f; }))
        << "validation happens before any kernel writes";
}

TEST(ParseErrors, UnknownDtype) {
    EXPECT_THAT(error_of([] { parse_dtype("fp8"); }),
                AllOf(HasSubstr("unknown dtype 'fp8'"), HasSubstr("expected fp32, fp16 or bf16")));
}

TEST(ParseErrors, UnknownImpl) {
    EXPECT_THAT(error_of([] { parse_impl("fastest"); }),
                AllOf(HasSubstr("unknown attention implementation 'fastest'"), HasSubstr("auto, naive or flash")));
    EXPECT_EQ(parse_impl("naive"), AttentionImpl::NAIVE);
    EXPECT_EQ(parse_impl("flash"), AttentionImpl::FLASH);
    EXPECT_EQ(parse_impl("auto"), AttentionImpl::AUTO);
}

TEST(ParseErrors, UnknownDevice) {
    EXPECT_THAT(error_of([] { parse_device("tpu"); }),
                AllOf(HasSubstr("unknown device 'tpu'"), HasSubstr("expected cpu, gpu, gpu:N")));
}

TEST(ParseErrors, BadDeviceIndex) {
    for (const char* name : {"gpu:x", "gpu:", "cuda:-1", "gpu:99999"})
        EXPECT_THAT(error_of([&] { parse_device(name); }),
                    AllOf(HasSubstr(std::string("bad device '") + name + "'"),
                          HasSubstr("small non-negative integer")))
            << name;
}

}  // namespace
}  // namespace flashport
