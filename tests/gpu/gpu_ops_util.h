// Shared by the GPU op tests (test_gpu_ops.cpp, test_rope_cache_gpu.cpp): GPU copies of the op
// tests' HostTensors and index arrays, and the comparison of a GPU result with the CPU op's, with the
// tolerances test_gpu_ops.cpp's header explains.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "flashport/device.h"
#include "flashport/memory.h"
#include "flashport/ops.h"
#include "ops/ops_test_util.h"

namespace flashport::test {

// A GPU copy of a HostTensor: the same bytes (padding and poison included) and the same view.
struct GpuTensor {
    Buffer buffer;
    TensorView view;
    explicit GpuTensor(const HostTensor& h) : buffer(h.bytes.size(), Device::gpu()) {
        copy_bytes(buffer.data(), Device::gpu(), h.bytes.data(), Device::cpu(), h.bytes.size());
        view = h.view;
        view.data = static_cast<char*>(buffer.data()) +
                    (static_cast<char*>(h.view.data) - reinterpret_cast<const char*>(h.bytes.data()));
        view.device = Device::gpu();
    }
    // Waits for the GPU's work, then copies every byte back into h.
    void download(HostTensor& h) const {
        synchronize(Device::gpu());
        copy_bytes(h.bytes.data(), Device::cpu(), buffer.data(), Device::gpu(), h.bytes.size());
    }
};

template <typename T>
struct GpuIndices {
    Buffer buffer;
    IndexView view;
    explicit GpuIndices(const std::vector<T>& v) : buffer(std::max<size_t>(1, v.size()) * sizeof(T), Device::gpu()) {
        copy_bytes(buffer.data(), Device::gpu(), v.data(), Device::cpu(), v.size() * sizeof(T));
        view = IndexView(static_cast<const T*>(buffer.data()), int64_t(v.size()), Device::gpu());
    }
};

// The GPU result against the CPU's, by tests/support/tolerance.h's element-wise form with the CPU op
// as the reference: at most `ulps` units apart (plus rel_f32 · |cpu| for fp32 and
// abs_tol), and at least min_exact of the elements identical. Below 1, min_exact applies to 16-bit
// outputs only: there it tells a rounding point in the wrong place (~50% identical) from fp32
// intermediates that straddle one (rare); an fp32 output shows every last-bit difference, so the
// tolerance alone judges it.
inline void expect_matches_cpu(const HostTensor& gpu, const HostTensor& cpu, double ulps, double min_exact,
                               double rel_f32 = 0.0, const std::vector<double>* abs_tol = nullptr) {
    if (min_exact < 1.0 && gpu.view.dtype == DType::F32) min_exact = 0.0;
    EXPECT_TRUE(close_enough(compare(gpu, values(cpu), ulps, rel_f32, abs_tol), min_exact, "the CPU"));
    EXPECT_TRUE(gpu.padding_intact()) << "the GPU wrote outside the view";
}

constexpr double EXACT = 1.0, NEARLY = 0.999, NORM_EXACT = 0.97;
inline double ulps_for(DType dt, double ulps_f32, double ulps_16 = 2.0) {
    return dt == DType::F32 ? ulps_f32 : ulps_16;
}

}  // namespace flashport::test
