// The devices and streams of the extension: the one file that differs between a CPU build and a GPU build.
// FLASHPORT_TORCH_GPU is defined by python/csrc/CMakeLists.txt only when flashport is built with a GPU
// backend (FLASHPORT_CUDA / FLASHPORT_HIP) and the torch it builds against has that same backend, so a CPU
// torch never sees CUDA headers and a CPU-only flashport never gets a CUDA tensor.
#include "tensor_view.h"

#if defined(FLASHPORT_TORCH_GPU) && defined(FLASHPORT_TORCH_HIP)
// ROCm torch keeps the "cuda" device type and dispatch key; its streams come "masquerading as CUDA".
// Compile path only: no AMD GPU has run this.
#include <ATen/hip/impl/HIPStreamMasqueradingAsCUDA.h>
#elif defined(FLASHPORT_TORCH_GPU)
#include <ATen/cuda/CUDAContext.h>
#endif

namespace flashport::torch_ext {

Device to_device(c10::Device device, const char* op, const char* name) {
    if (device.is_cpu()) return Device::cpu();
#ifdef FLASHPORT_TORCH_GPU
    if (device.is_cuda()) return Device::gpu(device.has_index() ? device.index() : 0);
#endif
    throw_value_error(concat(op, ": ", name, " is on ", device.str(), ", which this build of flashport does not ",
                             "serve (", gpu_build_name(), ")"));
}

void* current_stream(c10::Device device) {
    if (device.is_cpu()) return nullptr;
#if defined(FLASHPORT_TORCH_GPU) && defined(FLASHPORT_TORCH_HIP)
    return c10::hip::getCurrentHIPStreamMasqueradingAsCUDA(device.index()).stream();
#elif defined(FLASHPORT_TORCH_GPU)
    return at::cuda::getCurrentCUDAStream(device.index()).stream();
#else
    throw_value_error(concat("flashport: no stream for ", device.str(), " in a CPU-only build"));
#endif
}

const char* gpu_build_name() {
#if defined(FLASHPORT_TORCH_GPU) && defined(FLASHPORT_TORCH_HIP)
    return "CPU and HIP";
#elif defined(FLASHPORT_TORCH_GPU)
    return "CPU and CUDA";
#else
    return "CPU only";
#endif
}

}  // namespace flashport::torch_ext
