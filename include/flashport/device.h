// The GPU runtime as the rest of flashport sees it: discovery, copies and synchronisation. A CPU-only
// build links the "none" implementation, which reports no devices and refuses GPU work clearly.
#pragma once

#include <cstddef>
#include <string>

#include "flashport/tensor.h"

namespace flashport {

// "CUDA", "HIP" or "none": what this build's GPU backend is compiled as.
const char* gpu_backend_name();
// Number of usable GPUs; 0 when the build has no GPU backend or the driver finds none.
int gpu_device_count();
// A one-line description: name, compute capability / gfx arch, memory. Throws for a bad index.
std::string gpu_device_description(int index);
// Bytes the driver reports in use on the device (for peak-memory cross-checks in bench).
size_t gpu_driver_used_bytes(int index);

// Copies nbytes between any two devices (host<->GPU or GPU<->GPU), synchronously.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes);
// Waits for all work on the device.
void synchronize(Device device);

}  // namespace flashport
