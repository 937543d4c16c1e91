// Sizes that would overflow, and the memory figures requests are checked against (issue 11): the
// checked-arithmetic helper, tensor shapes whose element or byte count overflows int64, allocations
// no machine could make, the NaN/Inf scan, and require_memory's refusal.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/error_text.h"
#include "flashport/checked.h"
#include "flashport/dtype.h"
#include "flashport/error.h"
#include "flashport/memory.h"
#include "flashport/tensor.h"

namespace flashport {
namespace {

using test::error_of;

constexpr int64_t BIG = int64_t(1) << 40;

TEST(Checked, ArithmeticThrowsWithWhatWasComputed) {
    EXPECT_EQ(checked_mul(int64_t(3), int64_t(4), "x"), 12);
    EXPECT_EQ(checked_add(uint64_t(3), uint64_t(4), "x"), 7u);
    EXPECT_EQ(checked_product({2, 3, 4}, "x"), 24);
    EXPECT_EQ(error_of([] { checked_mul(BIG, BIG, "the pool of ", 7, " layers"); }),
              "the pool of 7 layers: 1099511627776 x 1099511627776 overflows int64");
    EXPECT_EQ(error_of([] { checked_add(std::numeric_limits<uint64_t>::max(), uint64_t(1), "n"); }),
              "n: 18446744073709551615 + 1 overflows 64 bits");
    EXPECT_NE(error_of([] {
                  checked_product({BIG, BIG, 0}, "p");
              }).find("overflows int64"),
              std::string::npos)
        << "checked at every step, even before a zero";
}

TEST(Checked, ShapesThatOverflowAreRefusedBeforeAllocating) {
    // 2^58 + 1 rows of 64: the product wraps to 64, which once sized an allocation of 128 bytes.
    const int64_t rows = (int64_t(1) << 58) + 1;
    const std::string msg = error_of([&] { Tensor t(DType::F16, {rows, 1, 1, 64}); });
    EXPECT_NE(msg.find("a tensor of shape [288230376151711745, 1, 1, 64]: 64 x 288230376151711745 overflows"),
              std::string::npos)
        << msg;
    EXPECT_NE(error_of([] {
                  TensorView v(nullptr, DType::F32, {int64_t(1) << 31, int64_t(1) << 31});
              }).find("the byte size of a fp32 tensor"),
              std::string::npos)
        << "the element count fits, its bytes do not";
    TensorView by_hand;  // filled in field by field, as a binding would
    by_hand.ndim = 2;
    by_hand.shape = {BIG, BIG, 0, 0};
    EXPECT_NE(error_of([&] { (void)by_hand.numel(); }).find("the element count of fp32[1099511627776, 1099511627776]"),
              std::string::npos);
    EXPECT_NE(error_of([] {
                  (void)tracked_alloc(std::numeric_limits<size_t>::max() - 10, Device::cpu());
              }).find("larger than any address space"),
              std::string::npos);
}

TEST(FindNonFinite, EveryDtypeAndTheFirstIndex) {
    const int64_t n = 300000;  // several parallel chunks
    for (const DType dtype : {DType::F32, DType::F16, DType::BF16}) {
        std::vector<unsigned char> buf(size_t(n) * dtype_size(dtype));
        const auto put = [&](int64_t i, float x) {
            store_from_float(buf.data() + size_t(i) * dtype_size(dtype), dtype, x);
        };
        for (int64_t i = 0; i < n; ++i) put(i, float(i % 97) - 48.0f);
        EXPECT_EQ(find_non_finite(buf.data(), dtype, n), -1) << dtype_name(dtype);
        put(n - 1, -INFINITY);
        EXPECT_EQ(find_non_finite(buf.data(), dtype, n), n - 1) << dtype_name(dtype);
        put(200001, NAN);
        put(131073, INFINITY);
        EXPECT_EQ(find_non_finite(buf.data(), dtype, n), 131073) << dtype_name(dtype);
        put(0, NAN);
        EXPECT_EQ(find_non_finite(buf.data(), dtype, n), 0) << dtype_name(dtype);
        EXPECT_EQ(find_non_finite(buf.data(), dtype, 0), -1);
    }
    const float largest[] = {std::numeric_limits<float>::max(), -std::numeric_limits<float>::max()};
    EXPECT_EQ(find_non_finite(largest, DType::F32, 2), -1) << "large is not infinite";
}

TEST(AvailableMemory, RequestsThatCannotFitAreRefusedWithTheFigures) {
    const int64_t host = available_memory(Device::cpu());
    EXPECT_GT(host, 0);
    EXPECT_NO_THROW(require_memory(Device::cpu(), 1 << 20, "a small request"));
    const std::string msg = error_of([] { require_memory(Device::cpu(), BIG * 1024, "a 1 PiB pool"); });
    EXPECT_NE(msg.find("a 1 PiB pool needs 1048576.00 GiB (1125899906842624 bytes) on cpu, but only "),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("is available (MemAvailable)"), std::string::npos) << msg;
}

}  // namespace
}  // namespace flashport
