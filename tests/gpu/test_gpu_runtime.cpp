// The GPU runtime and BLAS wrapper: device discovery, the tracked allocator on the GPU, copies, and
// the strided-batched GEMM (vendor and portable) against a float64 host product.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/gpu/blas.h"
#include "flashport/device.h"
#include "flashport/error.h"
#include "flashport/memory.h"
#include "flashport/ops.h"
#include "gpu_test_util.h"

namespace flashport {
namespace {

namespace blas = gpu::blas;

TEST(GpuRuntime, DescribesDevices) {
    FP_SKIP_WITHOUT_GPU();
    const std::string d = gpu_device_description(0);
    EXPECT_FALSE(d.empty());
    std::printf("%s backend, device 0: %s\n", gpu_backend_name(), d.c_str());
    EXPECT_THROW(gpu_device_description(gpu_device_count()), Error) << "an index past the last GPU must throw";
}

TEST(GpuRuntime, TrackedAllocatorCountsGpuBytes) {
    FP_SKIP_WITHOUT_GPU();
    const MemoryStats before = memory_stats(Device::gpu());
    {
        Buffer a(1 << 20, Device::gpu());
        const MemoryStats during = memory_stats(Device::gpu());
        EXPECT_EQ(during.live_bytes - before.live_bytes, 1 << 20);
        EXPECT_EQ(during.alloc_count - before.alloc_count, 1);
        EXPECT_GE(during.peak_bytes, during.live_bytes);
    }
    EXPECT_EQ(memory_stats(Device::gpu()).live_bytes, before.live_bytes) << "freeing must be counted";
    EXPECT_EQ(memory_stats(Device::cpu()).live_bytes, memory_stats(Device::cpu()).live_bytes);
}

TEST(GpuRuntime, CopiesRoundTrip) {
    FP_SKIP_WITHOUT_GPU();
    std::vector<uint8_t> src(12345), back(12345, 0);
    for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 7 + 3);
    Buffer g(src.size(), Device::gpu()), g2(src.size(), Device::gpu());
    copy_bytes(g.data(), Device::gpu(), src.data(), Device::cpu(), src.size());
    copy_bytes(g2.data(), Device::gpu(), g.data(), Device::gpu(), src.size());
    copy_bytes(back.data(), Device::cpu(), g2.data(), Device::gpu(), src.size());
    synchronize(Device::gpu());
    EXPECT_EQ(src, back);
}

TEST(GpuRuntime, AllocationFailureThrows) {
    FP_SKIP_WITHOUT_GPU();
    EXPECT_THROW(Buffer(size_t(1) << 60, Device::gpu()), Error) << "an impossible allocation must throw, not abort";
}

// A graph records work enqueued on a stream and replays it: the replays see the buffers' current
// contents (x is changed between replays), and a capture whose body throws leaves the stream usable.
TEST(GpuRuntime, GraphCapturesAndReplays) {
    FP_SKIP_WITHOUT_GPU();
    FP_SKIP_WITHOUT_GRAPHS();
    const Device gpu = Device::gpu();
    const GpuStream stream(gpu);
    constexpr int64_t N = 1000;
    Tensor x(DType::F32, {N}, gpu), acc(DType::F32, {N}, gpu);
    std::vector<float> ones(N, 1.0f), zeros(N, 0.0f), twos(N, 2.0f), back(N);
    copy_bytes(x.view.data, gpu, ones.data(), Device::cpu(), N * 4);
    copy_bytes(acc.view.data, gpu, zeros.data(), Device::cpu(), N * 4);
    // Two adds per replay: acc += x, twice.
    const GpuGraph graph = GpuGraph::capture(stream, [&] {
        add(acc.view, acc.view, x.view, stream.get());
        add(acc.view, acc.view, x.view, stream.get());
    });
    copy_bytes(back.data(), Device::cpu(), acc.view.data, gpu, N * 4);
    EXPECT_EQ(back, zeros) << "capturing must not run the work";
    graph.replay(stream);
    stream.synchronize();
    copy_bytes(x.view.data, gpu, twos.data(), Device::cpu(), N * 4);
    graph.replay(stream);
    stream.synchronize();
    copy_bytes(back.data(), Device::cpu(), acc.view.data, gpu, N * 4);
    EXPECT_EQ(back, std::vector<float>(N, 6.0f)) << "2 × 1 then 2 × 2";

    EXPECT_THROW(GpuGraph::capture(stream, [&] { add(acc.view, acc.view, TensorView(), stream.get()); }), Error);
    add(acc.view, acc.view, x.view, stream.get());
    stream.synchronize();
    copy_bytes(back.data(), Device::cpu(), acc.view.data, gpu, N * 4);
    EXPECT_EQ(back, std::vector<float>(N, 8.0f)) << "the stream works after a failed capture";
}

// C = alpha op(A) op(B) for random odd-sized batched problems, every transpose combination, every
// dtype, through each available backend. Tolerance: inputs are exact in the dtype, products
// accumulate in fp32 (k <= 300 terms: relative error ~1e-6) and C is rounded once to the dtype, so
// the error per element is within one rounding of the dtype (2^-8 bf16, 2^-11 fp16) of |C| plus
// fp32 accumulation error on sum |a||b|.
struct GemmCase {
    DType dtype;
    DType c_dtype;
    int64_t m, n, k, batch;
    bool ta, tb;
    blas::Backend backend;
};

void run_gemm_case(const GemmCase& g) {
    std::mt19937 rng(uint32_t(g.m * 131 + g.n * 17 + g.k));
    std::normal_distribution<float> dist(0.0f, 1.0f);
    const size_t es = dtype_size(g.dtype);
    const int64_t lda = (g.ta ? g.m : g.k) + 3, ldb = (g.tb ? g.k : g.n) + 5, ldc = g.n + 2;  // padded rows
    const int64_t sa = (g.ta ? g.k : g.m) * lda, sb = (g.tb ? g.n : g.k) * ldb, sc = g.m * ldc;
    const size_t ces = dtype_size(g.c_dtype);
    std::vector<uint8_t> a(size_t(sa * g.batch) * es), b(size_t(sb * g.batch) * es), c(size_t(sc * g.batch) * ces);
    std::vector<float> af(size_t(sa * g.batch)), bf(size_t(sb * g.batch));
    for (size_t i = 0; i < af.size(); ++i) {
        store_from_float(a.data() + i * es, g.dtype, dist(rng));
        af[i] = load_as_float(a.data() + i * es, g.dtype);
    }
    for (size_t i = 0; i < bf.size(); ++i) {
        store_from_float(b.data() + i * es, g.dtype, dist(rng));
        bf[i] = load_as_float(b.data() + i * es, g.dtype);
    }
    for (size_t i = 0; i < c.size() / ces; ++i) store_from_float(c.data() + i * ces, g.c_dtype, NAN);  // poison

    Buffer da(a.size(), Device::gpu()), db(b.size(), Device::gpu()), dc(c.size(), Device::gpu());
    copy_bytes(da.data(), Device::gpu(), a.data(), Device::cpu(), a.size());
    copy_bytes(db.data(), Device::gpu(), b.data(), Device::cpu(), b.size());
    copy_bytes(dc.data(), Device::gpu(), c.data(), Device::cpu(), c.size());
    const float alpha = 0.75f;
    blas::set_backend(g.backend);
    blas::gemm(dc.data(), ldc, sc, g.c_dtype, g.dtype, g.m, g.n, g.k, alpha, 0.0f, {da.data(), lda, sa, g.ta}, {db.data(), ldb, sb, g.tb},
               g.batch, nullptr);
    synchronize(Device::gpu());
    copy_bytes(c.data(), Device::cpu(), dc.data(), Device::gpu(), c.size());

    const double unit = g.c_dtype == DType::F32 ? 0x1.0p-23 : g.c_dtype == DType::F16 ? 0x1.0p-11 : 0x1.0p-8;
    for (int64_t z = 0; z < g.batch; ++z)
        for (int64_t i = 0; i < g.m; ++i)
            for (int64_t j = 0; j < g.n; ++j) {
                double ref = 0.0, mag = 0.0;
                for (int64_t p = 0; p < g.k; ++p) {
                    const double x = af[size_t(z * sa + (g.ta ? p * lda + i : i * lda + p))];
                    const double y = bf[size_t(z * sb + (g.tb ? j * ldb + p : p * ldb + j))];
                    ref += x * y;
                    mag += std::fabs(x * y);
                }
                ref *= alpha;
                const double got = load_as_float(c.data() + size_t(z * sc + i * ldc + j) * ces, g.c_dtype);
                const double tol = unit * std::fabs(ref) + 1e-5 * alpha * mag + 1e-30;
                ASSERT_TRUE(std::isfinite(got)) << "C[" << z << "," << i << "," << j << "] not written";
                ASSERT_LE(std::fabs(got - ref), tol)
                    << dtype_name(g.dtype) << "->" << dtype_name(g.c_dtype) << " " << blas::backend_name(g.backend)
                    << " got " << got << " ref " << ref << " tol " << tol << " m=" << g.m << " n=" << g.n
                    << " k=" << g.k << " ta=" << g.ta << " tb=" << g.tb << " at (" << z << "," << i << "," << j << ")";
            }
}

TEST(GpuBlas, StridedBatchedGemmMatchesHost) {
    FP_SKIP_WITHOUT_GPU();
    std::vector<blas::Backend> backends{blas::Backend::PORTABLE};
    if (blas::vendor_available()) backends.push_back(blas::Backend::VENDOR);
    const blas::Backend saved = blas::backend();
    for (blas::Backend be : backends)
        for (DType dt : {DType::F32, DType::F16, DType::BF16})
            for (bool ta : {false, true})
                for (bool tb : {false, true})
                    for (DType ct : {dt, DType::F32}) {  // fp32 twice for fp32 inputs: harmless
                        SCOPED_TRACE(std::string(dtype_name(dt)) + "->" + dtype_name(ct) + " " + blas::backend_name(be) +
                                     " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb));
                        run_gemm_case({dt, ct, 1, 1, 1, 1, ta, tb, be});
                        run_gemm_case({dt, ct, 67, 33, 97, 3, ta, tb, be});
                        run_gemm_case({dt, ct, 130, 65, 300, 2, ta, tb, be});
                    }
    blas::set_backend(saved);
}

}  // namespace
}  // namespace flashport
