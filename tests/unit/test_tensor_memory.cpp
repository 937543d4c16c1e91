// Tensor views (shape, strides, transposes, contiguity, describe) and the tracked allocator (live,
// peak, count, Buffer ownership, FLASHPORT_MEMTRACE).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "flashport/device.h"
#include "common/error_text.h"
#include "flashport/error.h"
#include "flashport/memory.h"
#include "flashport/tensor.h"

using ::testing::HasSubstr;

namespace flashport {
namespace {

using test::error_of;

// ---- tensor views --------------------------------------------------------------------------------

TEST(TensorView, ContiguousStridesAreRowMajor) {
    float data[2 * 7 * 4 * 3];
    const TensorView t(data, DType::F32, {2, 7, 4, 3});
    EXPECT_EQ(t.ndim, 4);
    EXPECT_EQ(t.stride[0], 84);
    EXPECT_EQ(t.stride[1], 12);
    EXPECT_EQ(t.stride[2], 3);
    EXPECT_EQ(t.stride[3], 1);
    EXPECT_EQ(t.numel(), 168);
    EXPECT_EQ(t.nbytes(), 168u * 4);
    EXPECT_TRUE(t.is_contiguous());
    EXPECT_EQ(t.at(1, 2, 3, 1), static_cast<void*>(data + 84 + 24 + 9 + 1));
}

TEST(TensorView, Fp16ElementAddressesUseTwoBytes) {
    uint16_t data[24];
    const TensorView t(data, DType::F16, {2, 3, 4});
    EXPECT_EQ(t.nbytes(), 48u);
    EXPECT_EQ(t.at(1, 2, 3), static_cast<void*>(data + 23));
}

TEST(TensorView, TransposeSwapsShapeAndStrideWithoutMovingData) {
    float data[2 * 5 * 3 * 8];
    // PyTorch's [batch, heads, len, dim] buffer seen as [batch, len, heads, dim].
    const TensorView bhld(data, DType::F32, {2, 3, 5, 8});
    const TensorView t = bhld.transposed(1, 2);
    EXPECT_EQ(t.data, bhld.data);
    EXPECT_EQ(t.shape[1], 5);
    EXPECT_EQ(t.shape[2], 3);
    EXPECT_EQ(t.stride[1], 8);   // next position: next row of the [len, dim] matrix
    EXPECT_EQ(t.stride[2], 40);  // next head: the next [len, dim] matrix
    EXPECT_FALSE(t.is_contiguous());
    EXPECT_EQ(t.at(1, 4, 2, 7), bhld.at(1, 2, 4, 7)) << "same element through either view";
    const TensorView back = t.transposed(1, 2);
    EXPECT_TRUE(back.is_contiguous());
    EXPECT_EQ(back.shape, bhld.shape);
    EXPECT_EQ(back.stride, bhld.stride);
    EXPECT_EQ(t.numel(), bhld.numel());
}

TEST(TensorView, SizeOneDimensionsDoNotBreakContiguity) {
    float data[6];
    TensorView t(data, DType::F32, {1, 2, 1, 3});
    t.stride[0] = 999, t.stride[2] = 12345;  // never stepped over, so irrelevant
    EXPECT_TRUE(t.is_contiguous());
    t.stride[3] = 2;
    EXPECT_FALSE(t.is_contiguous()) << "a non-unit inner stride is not contiguous";
}

TEST(TensorView, DescribeShowsDtypeShapeStridesAndDevice) {
    const TensorView t(nullptr, DType::BF16, {2, 7, 4, 64});
    EXPECT_EQ(t.describe(), "bf16[2, 7, 4, 64] strides [1792, 256, 64, 1] on cpu");
    const TensorView g(nullptr, DType::F16, {3}, Device::gpu(1));
    EXPECT_EQ(g.describe(), "fp16[3] strides [1] on gpu:1");
}

TEST(TensorView, EmptyDimensionGivesZeroElements) {
    const TensorView t(nullptr, DType::F32, {2, 0, 4});
    EXPECT_EQ(t.numel(), 0);
    EXPECT_EQ(t.nbytes(), 0u);
}

TEST(TensorView, NarrowKeepsStridesAndMovesTheStart) {
    uint16_t data[4 * 12];
    // The k columns [8, 10) of a fused [tokens, q | k | v] projection.
    const TensorView qkv(data, DType::BF16, {4, 12});
    const TensorView k = qkv.narrowed(1, 8, 2);
    EXPECT_EQ(k.shape[0], 4);
    EXPECT_EQ(k.shape[1], 2);
    EXPECT_EQ(k.stride[0], 12);
    EXPECT_EQ(k.at(3, 1), qkv.at(3, 9)) << "same element through either view";
    EXPECT_EQ(qkv.narrowed(0, 4, 0).shape[0], 0) << "an empty range at the end is allowed";
    EXPECT_THAT(error_of([&] { qkv.narrowed(1, 8, 5); }), HasSubstr("narrow(1, 8, 5) out of range"));
    EXPECT_THAT(error_of([&] { qkv.narrowed(2, 0, 1); }), HasSubstr("out of range"));
    EXPECT_THAT(error_of([&] { qkv.narrowed(0, -1, 1); }), HasSubstr("out of range"));
}

TEST(TensorView, RejectsBadShapesAndTransposes) {
    EXPECT_THAT(error_of([] { TensorView(nullptr, DType::F32, {1, 2, 3, 4, 5}); }), HasSubstr("at most 4 dimensions"));
    EXPECT_THAT(error_of([] { TensorView(nullptr, DType::F32, {2, -1}); }), HasSubstr("negative dimension -1"));
    const TensorView t(nullptr, DType::F32, {2, 3});
    EXPECT_THAT(error_of([&] { t.transposed(0, 2); }), HasSubstr("out of range for 2 dimensions"));
}

TEST(Device, NamesAndParsing) {
    EXPECT_EQ(Device::cpu().name(), "cpu");
    EXPECT_EQ(Device::gpu(3).name(), "gpu:3");
    EXPECT_EQ(parse_device("cpu"), Device::cpu());
    EXPECT_EQ(parse_device("gpu"), Device::gpu(0));
    EXPECT_EQ(parse_device("cuda:1"), Device::gpu(1));
    EXPECT_EQ(parse_device("hip:2"), Device::gpu(2));
    EXPECT_TRUE(Device::cpu().is_cpu());
    EXPECT_FALSE(Device::gpu().is_cpu());
}

// ---- tracked allocator ---------------------------------------------------------------------------

TEST(TrackedAllocator, CountsLiveBytesPeakAndAllocations) {
    const MemoryStats base = memory_stats();
    {
        Buffer a(1000);
        MemoryStats s = memory_stats();
        EXPECT_EQ(s.live_bytes, base.live_bytes + 1000);
        EXPECT_EQ(s.alloc_count, base.alloc_count + 1);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 64, 0u) << "CPU buffers are 64-byte aligned";
        {
            Buffer b(3000);
            EXPECT_EQ(memory_stats().live_bytes, base.live_bytes + 4000);
        }
        s = memory_stats();
        EXPECT_EQ(s.live_bytes, base.live_bytes + 1000) << "freeing gives the bytes back";
        EXPECT_GE(s.peak_bytes, base.live_bytes + 4000) << "the peak remembers both buffers";
        EXPECT_EQ(s.alloc_count, base.alloc_count + 2) << "the count is of allocations, not of live buffers";
        reset_peak();
        EXPECT_EQ(memory_stats().peak_bytes, base.live_bytes + 1000) << "reset_peak sets the peak to live bytes";
        { Buffer c(500); }
        EXPECT_EQ(memory_stats().peak_bytes, base.live_bytes + 1500) << "a later call's peak is its own";
    }
    EXPECT_EQ(memory_stats().live_bytes, base.live_bytes);
}

TEST(TrackedAllocator, ZeroByteBufferIsDistinctAndFree) {
    const MemoryStats base = memory_stats();
    Buffer a(0), b(0);
    EXPECT_NE(a.data(), nullptr);
    EXPECT_NE(a.data(), b.data());
    EXPECT_EQ(memory_stats().live_bytes, base.live_bytes);
    EXPECT_EQ(memory_stats().alloc_count, base.alloc_count + 2);
}

TEST(TrackedAllocator, BufferMoveTransfersOwnership) {
    const int64_t base = memory_stats().live_bytes;
    Buffer a(256);
    void* p = a.data();
    Buffer b(std::move(a));
    EXPECT_EQ(b.data(), p);
    EXPECT_EQ(b.size(), 256u);
    EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state is the point
    EXPECT_EQ(a.size(), 0u);
    EXPECT_EQ(memory_stats().live_bytes, base + 256) << "a move allocates nothing";

    Buffer c(100);
    c = std::move(b);  // c's own 100 bytes are freed, b's 256 move in
    EXPECT_EQ(c.data(), p);
    EXPECT_EQ(memory_stats().live_bytes, base + 256);

    Buffer& alias = c;
    c = std::move(alias);  // self-move keeps the buffer
    EXPECT_EQ(c.data(), p);
    EXPECT_EQ(memory_stats().live_bytes, base + 256);

    c.reset();
    EXPECT_EQ(c.data(), nullptr);
    EXPECT_EQ(memory_stats().live_bytes, base) << "reset frees, and the destructors free nothing twice";
}

TEST(TrackedAllocator, TensorOwnsAContiguousBuffer) {
    const int64_t base = memory_stats().live_bytes;
    Tensor t(DType::BF16, {2, 3, 5});
    EXPECT_EQ(t.view.data, t.buffer.data());
    EXPECT_EQ(t.buffer.size(), 60u);
    EXPECT_TRUE(t.view.is_contiguous());
    EXPECT_EQ(t.view.nbytes(), 60u);
    EXPECT_EQ(memory_stats().live_bytes, base + 60);
}

TEST(TrackedAllocator, CountsExactlyUnderConcurrency) {
    const MemoryStats base = memory_stats();
    reset_peak();
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([t] {
            for (int i = 0; i < 2000; ++i) Buffer b(size_t(1 + (i * 7 + t) % 977));
        });
    for (auto& th : threads) th.join();
    const MemoryStats s = memory_stats();
    EXPECT_EQ(s.live_bytes, base.live_bytes) << "every add matched by its sub";
    EXPECT_EQ(s.alloc_count, base.alloc_count + 8000);
    EXPECT_LE(s.peak_bytes, base.live_bytes + 4 * 977) << "at most one buffer per thread was live at once";
    EXPECT_GE(s.peak_bytes, base.live_bytes + 1);
}

TEST(TrackedAllocator, GpuAllocationInCpuBuildFailsCleanly) {
    if (std::string(gpu_backend_name()) != "none") GTEST_SKIP() << "this build has a GPU backend";
    const MemoryStats cpu = memory_stats(), gpu = memory_stats(Device::gpu(0));
    EXPECT_THAT(error_of([] { Buffer b(16, Device::gpu(0)); }), HasSubstr("--preset cuda"));
    EXPECT_EQ(memory_stats(Device::gpu(0)).live_bytes, gpu.live_bytes) << "a failed allocation is not counted";
    EXPECT_EQ(memory_stats(Device::gpu(0)).alloc_count, gpu.alloc_count);
    EXPECT_EQ(memory_stats().live_bytes, cpu.live_bytes);
}

TEST(TrackedAllocator, RejectsAnOutOfRangeGpuIndex) {
    EXPECT_THAT(error_of([] { memory_stats(Device::gpu(99)); }), HasSubstr("GPU index 99 out of range"));
}

// ---- FLASHPORT_MEMTRACE --------------------------------------------------------------------------

struct ChildRun {
    int status = -1;
    std::string output;  // stdout and stderr
};

// Runs the helper with FLASHPORT_MEMTRACE set to `trace` (the variable is read at the first
// allocation, so it has to be set before the process starts: hence a child process).
ChildRun run_child(const std::string& trace) {
    const std::string cmd = "FLASHPORT_MEMTRACE='" + trace + "' '" MEMTRACE_CHILD_PATH "' 2>&1";
    ChildRun r;
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return r;
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) r.output += buf;
    r.status = pclose(p);
    return r;
}

std::vector<std::string> read_lines(const std::filesystem::path& path) {
    std::ifstream in(path);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

class MemTrace : public ::testing::Test {
protected:
    void SetUp() override {
        path_ = std::filesystem::temp_directory_path() /
                ("flashport_memtrace_" + std::to_string(getpid()) + "_" +
                 ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".log");
        std::filesystem::remove(path_);
    }
    void TearDown() override { std::filesystem::remove(path_); }
    std::filesystem::path path_;
};

// The child's source as its compiler named it in call sites: beside this file and spelled the same
// way (absolute, or relative where ccache's CCACHE_BASEDIR rewrote the paths).
std::string memtrace_child_source() {
    const std::string self = __FILE__;
    return self.substr(0, self.rfind('/') + 1) + "memtrace_child.cpp";
}

TEST_F(MemTrace, LogsEachAllocAndFreeWithSizeDeviceAndCallSite) {
    const ChildRun run = run_child(path_.string());
    ASSERT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) << run.output;
    // The child prints "<what> <pointer> line <n>" for each allocation.
    std::map<std::string, std::pair<std::string, int>> made;
    std::istringstream out(run.output);
    for (std::string what, ptr, word; out >> what >> ptr >> word;) {
        int line = 0;
        out >> line;
        made[what] = {ptr, line};
    }
    ASSERT_EQ(made.size(), 3u) << run.output;

    const std::vector<std::string> lines = read_lines(path_);
    ASSERT_FALSE(lines.empty()) << "no trace written to " << path_;
    auto find = [&](const std::string& prefix) {
        for (const std::string& l : lines)
            if (l.rfind(prefix, 0) == 0) return l;
        return std::string();
    };
    const auto& [buf_ptr, buf_line] = made["buffer"];
    EXPECT_EQ(find("alloc " + buf_ptr), "alloc " + buf_ptr + " 4096 cpu " + memtrace_child_source() + ":" +
                                            std::to_string(buf_line) + " int main()")
        << "alloc line: pointer, size, device, file:line and function of the call site";
    EXPECT_EQ(find("free " + buf_ptr), "free " + buf_ptr + " 4096 cpu");

    // The Tensor may reuse the freed Buffer's address, so its lines are found by pointer and size.
    const auto& [t_ptr, t_line] = made["tensor"];
    EXPECT_THAT(find("alloc " + t_ptr + " 210 cpu "), HasSubstr("memtrace_child.cpp:" + std::to_string(t_line)))
        << "a Tensor's allocation is attributed to the line that made the Tensor";
    EXPECT_EQ(find("free " + t_ptr + " 210"), "free " + t_ptr + " 210 cpu");

    const auto& [leak_ptr, leak_line] = made["leak"];
    EXPECT_THAT(find("alloc " + leak_ptr),
                HasSubstr(" 12345 cpu " + memtrace_child_source() + ":" + std::to_string(leak_line)));
    EXPECT_THAT(find("alloc " + leak_ptr), HasSubstr("leak_on_purpose"));
    EXPECT_EQ(find("free " + leak_ptr), "") << "the leaked buffer is never freed";
}

TEST_F(MemTrace, LeakReportListsWhatIsStillLive) {
    const ChildRun run = run_child(path_.string());
    ASSERT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) << run.output;
    const std::vector<std::string> lines = read_lines(path_);
    ASSERT_GE(lines.size(), 2u);
    // The report closes the file: the summary, then one line per leaked allocation.
    EXPECT_EQ(lines[lines.size() - 2], "leak-report 1 allocations, 12345 bytes still live");
    EXPECT_THAT(lines.back(), HasSubstr(" 12345 cpu "));
    EXPECT_THAT(lines.back(), HasSubstr("memtrace_child.cpp:"));
    EXPECT_THAT(lines.back(), HasSubstr("leak_on_purpose"));
    EXPECT_EQ(lines.back().rfind("leak 0x", 0), 0u) << lines.back();
}

TEST_F(MemTrace, UnwritablePathWarnsAndRunsOn) {
    const ChildRun run = run_child("/nonexistent-dir/trace.log");
    EXPECT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) << "tracing problems never stop the program";
    EXPECT_THAT(run.output, HasSubstr("cannot open FLASHPORT_MEMTRACE file '/nonexistent-dir/trace.log'"));
}

}  // namespace
}  // namespace flashport
