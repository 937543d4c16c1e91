// Internal helpers of the GPU backend shared by launchers: checking runtime calls and launches, the
// stream cast, and device properties cached per device (so launchers never query the driver twice).
#pragma once

#include <cstdint>
#include <string>

#include "backends/gpu/common.cuh"
#include "backends/gpu/dependent_launch.h"
#include "backends/gpu/gpu_arch.h"
#include "flashport/error.h"
#include "flashport/tensor.h"

namespace flashport::gpu {

// Throws flashport::Error with the driver's message when a runtime call fails.
#define FP_GPU_CHECK(call, ...)                                                                          \
    do {                                                                                                 \
        const cudaError_t fp_err_ = (call);                                                              \
        if (fp_err_ != cudaSuccess)                                                                      \
            ::flashport::fail(__VA_ARGS__, ": ", cudaGetErrorName(fp_err_), " (", cudaGetErrorString(fp_err_), \
                              ") at ", __FILE__, ":", __LINE__);                                         \
    } while (0)

// Checks that the kernel just launched was accepted (bad configuration, missing image for this GPU).
// Asynchronous faults surface at the next synchronising call, as usual.
#define FP_GPU_CHECK_LAUNCH(kernel_name) FP_GPU_CHECK(cudaGetLastError(), "launching ", kernel_name)

inline cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

// Kernels that move [.., .., .., head_dim] rows in 16-byte vectors need each row to start on a
// 16-byte boundary: a 16-byte aligned base and outer strides that are multiples of 16 bytes.
// misaligned_16_byte_rows says why `t` breaks that ("" if it does not); `what` names the op in the
// message, e.g. "attention (flash, GPU)". check_16_byte_rows throws it.
inline std::string misaligned_16_byte_rows(const char* what, const TensorView& t, const char* name) {
    const int64_t elems16 = int64_t(16 / dtype_size(t.dtype));
    if (reinterpret_cast<uintptr_t>(t.data) % 16 != 0)
        return concat(what, ": ", name, " must start on a 16-byte boundary, got ", t.data);
    for (int d = 0; d < 3; ++d)
        if (t.shape[size_t(d)] > 1 && t.stride[size_t(d)] % elems16 != 0)
            return concat(what, ": ", name, " stride ", d, " must be a multiple of ", elems16,
                          " elements (16 bytes), got ", t.describe());
    return {};
}
inline void check_16_byte_rows(const char* what, const TensorView& t, const char* name) {
    const std::string why = misaligned_16_byte_rows(what, t, name);
    FP_CHECK(why.empty(), why);
}

// The GPU precondition of every launcher (attention and the ops of flashport/ops.h): `device` exists
// and is the current GPU, where the kernels will launch. Cheap (no synchronisation), so it may run
// during graph capture.
void check_current_device(const char* op, Device device);

struct DeviceInfo {
    int sm_count = 0;
    int max_smem_optin = 0;  // bytes of shared memory a block may use after opting in
    int l2_bytes = 0;        // the L2 cache's size
    int major = 0, minor = 0;
    std::string arch;                              // "sm_90", "gfx90a" (HIP's gcnArchName, flags dropped)
    MatrixCores matrix_cores = MatrixCores::NONE;  // AMD MFMA (gpu_arch.h); NONE on NVIDIA
};
// Properties of the current device, queried once per device.
const DeviceInfo& current_device_info();

// A transient device buffer in stream order (matmul's fp32 staging, split-KV's table and partials):
// allocated from the current device's default memory pool on `stream`, freed on it when the object
// goes out of scope (after the launches that use it were issued, also when one throws). Needs no
// synchronisation and records into a graph capture. Outside the tracked allocator's counts.
// The pool is asked, once per device and outside any stream capture, to keep up to POOL_KEEP_BYTES of
// freed memory across synchronisations (its release threshold; a hint, never an error). CUDA's default,
// 0, hands the pool's memory back to the driver at every synchronise, so a call made between two
// synchronisations (a request's prefill, a host-timed benchmark) mapped fresh pages for its buffers
// every time.
class StreamBuffer {
  public:
    static constexpr uint64_t POOL_KEEP_BYTES = uint64_t(64) << 20;
    StreamBuffer(size_t bytes, cudaStream_t stream, const char* what);
    ~StreamBuffer();
    StreamBuffer(const StreamBuffer&) = delete;
    StreamBuffer& operator=(const StreamBuffer&) = delete;
    void* data() const { return p_; }

  private:
    void* p_ = nullptr;
    cudaStream_t stream_;
};

// launch_kernel for a kernel that keeps the dependent-launch contract (common.cuh: it calls
// wait_for_prior_grid() before touching anything an earlier kernel writes): where
// dependent_launches() holds, it may start before the previous kernel on `stream` has finished
// (inside a graph capture too, where it becomes a programmatic edge). Elsewhere a plain launch.
template <typename... Params, typename... Args>
void launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                      Args&&... args) {
#if defined(FLASHPORT_GPU_CUDA)
    if (dependent_launches()) {
        cudaLaunchAttribute attribute{};
        attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attribute.val.programmaticStreamSerializationAllowed = 1;
        cudaLaunchConfig_t config{};
        config.gridDim = grid;
        config.blockDim = block;
        config.dynamicSmemBytes = smem;
        config.stream = stream;
        config.attrs = &attribute;
        config.numAttrs = 1;
        const cudaError_t err = cudaLaunchKernelEx(&config, kernel, Params(std::forward<Args>(args))...);
        if (err != cudaSuccess) (void)cudaGetLastError();  // not sticky: leave no stale error for the next check
        FP_GPU_CHECK(err, "launching a kernel with programmatic dependent launch");
        return;
    }
#endif
    launch_kernel(kernel, grid, block, smem, stream, std::forward<Args>(args)...);
}

}  // namespace flashport::gpu
