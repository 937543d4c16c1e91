// `flashport doctor --model`: whether models/tiny-kjv's weights and KV cache fit, against a fake
// /proc/meminfo and fake GPU free memory; bad folders and overflowing --ctx values are one-line errors.
#include <gtest/gtest.h>

#include "doctor_machine.h"
#include "engine/kv_cache.h"
#include "flashport/error.h"

namespace flashport::doctor::test {
namespace {

const fs::path TINY_KJV = FP_TINY_KJV_DIR;

// tiny-kjv: qwen3, fp32, 4 layers, 2 KV heads of 32: 2 (K, V) x 4 x 2 x 32 x 4 bytes per token.
constexpr int64_t KV_BYTES_PER_TOKEN = 2 * 4 * 2 * 32 * 4;

TEST(DoctorModel, KvCacheBytesIsTheEnginesArithmetic) {
    EXPECT_EQ(engine::kv_cache_bytes(4, 2, 32, DType::F32, 256), 256 * KV_BYTES_PER_TOKEN);
    EXPECT_EQ(engine::kv_cache_bytes(4, 2, 32, DType::F32, 17), 32 * KV_BYTES_PER_TOKEN);  // whole blocks of 16
    EXPECT_EQ(engine::kv_cache_bytes(4, 2, 32, DType::BF16, 16), 16 * KV_BYTES_PER_TOKEN / 2);
    EXPECT_THROW(engine::kv_cache_bytes(4, 2, 32, DType::F32, INT64_MAX), Error);
}

// (h) It fits in 1 GiB of MemAvailable, with the margin stated.
TEST(DoctorModel, TinyKjvFitsOnTheCpu) {
    FakeMachine m;
    m.meminfo_kb(1 << 20);
    m.inputs().model = ModelQuery{TINY_KJV, std::nullopt};
    const Report r = m.run();
    const Check config = find_check(r, "model.config");
    EXPECT_EQ(config.status, Status::OK);
    EXPECT_NE(config.found.find("qwen3, 4 layers, 2 KV heads, head_dim 32, context 256 tokens"), std::string::npos)
        << config.found;
    const Check fit = find_check(r, "model.fit_cpu");
    EXPECT_EQ(fit.status, Status::OK) << fit.found;
    EXPECT_NE(fit.found.find("(fp32 compute) + KV cache 512.0 KiB for 256 tokens"), std::string::npos) << fit.found;
    EXPECT_NE(fit.found.find("1.00 GiB free (MemAvailable)"), std::string::npos) << fit.found;
    EXPECT_NE(fit.found.find("to spare"), std::string::npos) << fit.found;
    EXPECT_EQ(r.exit_status(), 0);
}

// A context no memory holds: the shortfall, and the longest --ctx that fits.
TEST(DoctorModel, HugeContextDoesNotFit) {
    FakeMachine m;
    m.meminfo_kb(1 << 20);
    const int64_t ctx = int64_t(1) << 20;  // 1 Mi tokens x 2 KiB = 2 GiB of cache
    m.inputs().model = ModelQuery{TINY_KJV, ctx};
    const Report r = m.run();
    EXPECT_EQ(find_check(r, "model.config").status, Status::WARN);  // beyond max_position_embeddings
    const Check fit = find_check(r, "model.fit_cpu");
    EXPECT_EQ(fit.status, Status::FAIL);
    EXPECT_NE(fit.found.find("KV cache 2.00 GiB for 1048576 tokens"), std::string::npos) << fit.found;
    EXPECT_NE(fit.found.find("short by 1.0"), std::string::npos) << fit.found;  // 2 GiB + weights - 1 GiB
    // The advice: the most tokens that fit beside the weights, in whole blocks.
    ASSERT_EQ(fit.fix.rfind("use --ctx ", 0), 0u) << fit.fix;
    const int64_t advised = std::stoll(fit.fix.substr(10));
    EXPECT_EQ(advised % 16, 0);
    EXPECT_GT(advised, 400000);  // 1 GiB less ~7 MiB of weights, at 2 KiB a token
    EXPECT_LT(advised, 524288);
    EXPECT_EQ(r.exit_status(), 1);
}

TEST(DoctorModel, GpuFitUsesTheGpuDtypeAndFreeMemory) {
    FakeMachine m;
    m.meminfo_kb(1 << 20);
    m.runtime().backend = "CUDA";
    m.runtime().gpus = {{"GPU 0", "sm_90", int64_t(1) << 30}, {"GPU 1", "sm_90", int64_t(1) << 20}};
    m.inputs().model = ModelQuery{TINY_KJV, std::nullopt};
    const Report r = m.run();
    const Check gpu0 = find_check(r, "model.fit_gpu0");
    EXPECT_EQ(gpu0.status, Status::OK);
    // An fp32 folder computes in bf16 on a GPU: half the cache.
    EXPECT_NE(gpu0.found.find("(bf16 compute) + KV cache 256.0 KiB"), std::string::npos) << gpu0.found;
    EXPECT_NE(gpu0.found.find("the driver's free memory"), std::string::npos);
    const Check gpu1 = find_check(r, "model.fit_gpu1");
    EXPECT_EQ(gpu1.status, Status::FAIL);  // 3.4 MiB of bf16 weights in 1 MiB
    EXPECT_NE(gpu1.fix.find("the weights alone need"), std::string::npos) << gpu1.fix;
}

TEST(DoctorModel, UnknownMemoryWarns) {
    FakeMachine m;
    m.inputs().model = ModelQuery{TINY_KJV, int64_t(64)};
    const Check fit = find_check(m.run(), "model.fit_cpu");
    EXPECT_EQ(fit.status, Status::WARN);
    EXPECT_NE(fit.found.find("free memory unknown"), std::string::npos) << fit.found;
}

TEST(DoctorModel, OverflowingContextIsAnError) {
    FakeMachine m;
    m.meminfo_kb(1 << 20);
    m.inputs().model = ModelQuery{TINY_KJV, INT64_MAX};
    try {
        m.run();
        FAIL() << "no error";
    } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("with --ctx 9223372036854775807: a KV cache of 9223372036854775807 tokens"),
                  std::string::npos)
            << what;
        EXPECT_NE(what.find("overflows int64"), std::string::npos) << what;
        EXPECT_EQ(what.find('\n'), std::string::npos);
    }
    // Large but representable: 2^52 tokens x 2 KiB overflows the byte count, not the token count.
    m.inputs().model->ctx = int64_t(1) << 52;
    EXPECT_THROW(m.run(), Error);
}

TEST(DoctorModel, BadFolderIsAnError) {
    FakeMachine m;
    m.inputs().model = ModelQuery{m.root() / "no-such-model", std::nullopt};
    EXPECT_THROW(m.run(), Error);
    m.file("model/config.json", "{\"model_type\": \"qwen2\"");  // cut short
    m.inputs().model = ModelQuery{m.root() / "model", std::nullopt};
    EXPECT_THROW(m.run(), Error);
}

}  // namespace
}  // namespace flashport::doctor::test
