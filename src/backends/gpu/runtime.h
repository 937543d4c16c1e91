// Internal helpers of the GPU backend shared by launchers: checking runtime calls and launches, the
// stream cast, and device properties cached per device (so launchers never query the driver twice).
#pragma once

#include <string>

#include "backends/gpu/common.cuh"
#include "flashport/error.h"

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

struct DeviceInfo {
    int sm_count = 0;
    int max_smem_optin = 0;  // bytes of shared memory a block may use after opting in
    int major = 0, minor = 0;
};
// Properties of the current device, queried once per device.
const DeviceInfo& current_device_info();

}  // namespace flashport::gpu
