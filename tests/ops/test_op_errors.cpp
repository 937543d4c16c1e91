// Bad requests to the ops: each gives a flashport::Error whose message names the op, the tensor and
// the limit, so the caller can fix the call from the message alone.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "common/error_text.h"
#include "flashport/error.h"
#include "flashport/ops.h"

using ::testing::HasSubstr;

namespace flashport {
namespace {

using test::error_of;

struct Buffers {
    std::vector<float> a = std::vector<float>(4096, 0.5f), b = std::vector<float>(4096, 0.5f),
                       c = std::vector<float>(4096, 0.5f), d = std::vector<float>(4096, 0.5f);
};

TEST(OpErrors, RmsNorm) {
    Buffers m;
    TensorView x(m.a.data(), DType::F32, {3, 8}), out(m.b.data(), DType::F32, {3, 8}), w(m.c.data(), DType::F32, {8});
    EXPECT_THAT(error_of([&] { rms_norm(out, x, TensorView(m.c.data(), DType::F32, {7}), 1e-6f); }),
                HasSubstr("rms_norm: weight must be [dim] = [8]"));
    EXPECT_THAT(error_of([&] { rms_norm(TensorView(m.b.data(), DType::F32, {3, 9}), x, w, 1e-6f); }),
                HasSubstr("rms_norm: out must have the shape of x"));
    EXPECT_THAT(error_of([&] { rms_norm(out, x, w, -1.0f); }), HasSubstr("eps must be finite and >= 0"));
    EXPECT_THAT(error_of([&] { rms_norm(out, x.transposed(0, 1), w, 1e-6f); }),
                HasSubstr("x must have a unit stride in its last dimension"));
    TensorView null_x = x;
    null_x.data = nullptr;
    EXPECT_THAT(error_of([&] { rms_norm(out, null_x, w, 1e-6f); }), HasSubstr("rms_norm: x has no data"));
    TensorView gpu_x = x, gpu_out = out, gpu_w = w;
    gpu_x.device = gpu_out.device = gpu_w.device = Device::gpu();
#ifdef FLASHPORT_GPU
    // A GPU build takes GPU views; one on a GPU that doesn't exist fails before any launch.
    gpu_x.device = gpu_out.device = gpu_w.device = Device::gpu(999);
    EXPECT_THAT(error_of([&] { rms_norm(gpu_out, gpu_x, gpu_w, 1e-6f); }), HasSubstr("rms_norm: gpu:999 does not exist"));
#else
    EXPECT_THAT(error_of([&] { rms_norm(gpu_out, gpu_x, gpu_w, 1e-6f); }),
                HasSubstr("rms_norm on gpu:0 needs a GPU build; configure with --preset cuda or --preset hip"));
#endif
    EXPECT_THAT(error_of([&] { rms_norm(out, gpu_x, w, 1e-6f); }), HasSubstr("all tensors must be on one device"));
}

TEST(OpErrors, AddRmsNorm) {
    Buffers m;
    TensorView x(m.a.data(), DType::F32, {3, 8}), r(m.b.data(), DType::F32, {3, 8}), out(m.c.data(), DType::F32, {3, 8}),
        w(m.d.data(), DType::F32, {8});
    EXPECT_THAT(error_of([&] { add_rms_norm(out, r, x, TensorView(m.b.data(), DType::F32, {3, 7}), w, 1e-6f); }),
                HasSubstr("add_rms_norm: residual must have the shape of x"));
    EXPECT_THAT(error_of([&] { add_rms_norm(out, TensorView(m.b.data(), DType::F32, {8}), x, r, w, 1e-6f); }),
                HasSubstr("add_rms_norm: residual_out must have the shape of x"));
    EXPECT_THAT(error_of([&] { add_rms_norm(out, out, x, r, w, 1e-6f); }),
                HasSubstr("add_rms_norm: out must not be residual_out"));
    EXPECT_THAT(error_of([&] { add_rms_norm(out, r, x, r, TensorView(m.d.data(), DType::F32, {9}), 1e-6f); }),
                HasSubstr("add_rms_norm: weight must be [dim] = [8]"));
    TensorView gpu_r = r;
    gpu_r.device = Device::gpu();
    EXPECT_THAT(error_of([&] { add_rms_norm(out, r, x, gpu_r, w, 1e-6f); }),
                HasSubstr("add_rms_norm: all tensors must be on one device"));
}

TEST(OpErrors, Rope) {
    Buffers m;
    TensorView x(m.a.data(), DType::F32, {3, 2, 8});
    std::vector<int64_t> pos = {0, 1, 2};
    EXPECT_THAT(error_of([&] { rope(x, x, IndexView(pos.data(), 2), {}); }),
                HasSubstr("positions must have one entry per token (3"));
    TensorView odd(m.a.data(), DType::F32, {3, 2, 7});
    EXPECT_THAT(error_of([&] { rope(odd, odd, IndexView(pos.data(), 3), {}); }), HasSubstr("head_dim must be even"));
    std::vector<int64_t> far = {0, 1, int64_t(1) << 24};
    EXPECT_THAT(error_of([&] { rope(x, x, IndexView(far.data(), 3), {}); }),
                HasSubstr("position 16777216 at index 2 is outside [0, 2^24)"));
    std::vector<int32_t> neg = {0, -1, 2};
    EXPECT_THAT(error_of([&] { rope(x, x, IndexView(neg.data(), 3), {}); }), HasSubstr("position -1"));
    EXPECT_THAT(error_of([&] { rope(x, x, IndexView(pos.data(), 3), {0.5, 0}); }), HasSubstr("theta must be"));
    TensorView packed(m.a.data(), DType::F32, {3, 16});
    EXPECT_THAT(error_of([&] { rope(packed, packed, IndexView(pos.data(), 3), {10000.0, 5}); }),
                HasSubstr("params.head_dim (5) must divide"));
    EXPECT_THAT(error_of([&] { rope(x, x, IndexView(pos.data(), 3), {10000.0, 4}); }),
                HasSubstr("packed heads"));
    TensorView flat(m.a.data(), DType::F32, {16});
    EXPECT_THAT(error_of([&] { rope(flat, flat, IndexView(pos.data(), 3), {}); }), HasSubstr("rope: x must be"));
}

TEST(OpErrors, SwigluAndAdd) {
    Buffers m;
    TensorView g(m.a.data(), DType::BF16, {2, 6}), u(m.b.data(), DType::BF16, {2, 5}), o(m.c.data(), DType::BF16, {2, 6});
    EXPECT_THAT(error_of([&] { swiglu(o, g, u); }), HasSubstr("swiglu: up must have the shape of gate"));
    EXPECT_THAT(error_of([&] { add(o, g, u); }), HasSubstr("add: b must have the shape of a"));
    TensorView five(m.a.data(), DType::F32, {1, 1, 1, 1});
    five.ndim = 5;  // more than MAX_DIMS
    EXPECT_THAT(error_of([&] { add(five, five, five); }), HasSubstr("must have 1 to 4 dimensions"));
}

TEST(OpErrors, Matmul) {
    Buffers m;
    TensorView x(m.a.data(), DType::F32, {2, 8}), w(m.b.data(), DType::BF16, {5, 8}), o(m.c.data(), DType::F32, {2, 5});
    EXPECT_THAT(error_of([&] { matmul(o, x, TensorView(m.b.data(), DType::BF16, {5, 7})); }),
                HasSubstr("matmul: weight must be [out, in] with in = x's last dimension (8)"));
    EXPECT_THAT(error_of([&] { matmul(TensorView(m.c.data(), DType::F32, {2, 4}), x, w); }),
                HasSubstr("matmul: out must be [tokens, out] = [2, 5]"));
    TensorView bias(m.d.data(), DType::F32, {4});
    EXPECT_THAT(error_of([&] { matmul(o, x, w, &bias); }), HasSubstr("bias must be [out] = [5]"));
    EXPECT_THAT(error_of([&] { matmul(TensorView(m.a.data(), DType::F32, {2, 5}), x, w); }),
                HasSubstr("must not alias x or weight"));
    EXPECT_THAT(error_of([&] { matmul(o, TensorView(m.a.data(), DType::F32, {2, 2, 4}), w); }),
                HasSubstr("matmul: x must have 2 dimensions"));
    // The weight transposed ([in, out] memory) has a non-unit inner stride: a copy is the caller's call.
    TensorView wt = TensorView(m.b.data(), DType::BF16, {8, 5}).transposed(0, 1);
    EXPECT_THAT(error_of([&] { matmul(o, x, wt); }), HasSubstr("weight must have a unit stride in its last dimension"));
}

TEST(OpErrors, Embedding) {
    Buffers m;
    TensorView table(m.a.data(), DType::BF16, {10, 4}), out(m.b.data(), DType::BF16, {3, 4});
    std::vector<int32_t> ids = {1, 10, 2};
    EXPECT_THAT(error_of([&] { embedding(out, table, IndexView(ids.data(), 3)); }),
                HasSubstr("token id 10 at position 1 is outside the vocabulary [0, 10)"));
    std::vector<int64_t> neg = {1, 2, -3};
    EXPECT_THAT(error_of([&] { embedding(out, table, IndexView(neg.data(), 3)); }), HasSubstr("token id -3"));
    EXPECT_THAT(error_of([&] { embedding(out, table, IndexView(ids.data(), 2)); }),
                HasSubstr("out must be [tokens, hidden] = [2, 4]"));
    EXPECT_THAT(error_of([&] { embedding(out, table, IndexView(static_cast<const int32_t*>(nullptr), 3)); }),
                HasSubstr("ids has no data"));
}

}  // namespace
}  // namespace flashport
