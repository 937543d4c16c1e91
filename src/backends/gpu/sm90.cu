// sm90.h in every GPU build: on CUDA the sm_90a objects' launchers behind a compute-capability check,
// elsewhere a clear error.
#include "backends/gpu/sm90.h"

#include "backends/gpu/runtime.h"
#include "flashport/device.h"

namespace flashport::gpu {

#if defined(FLASHPORT_GPU_CUDA)
namespace nvidia_only {
void launch_wgmma_probe(const void* a, const void* b, float* d, DType dtype, cudaStream_t stream);  // wgmma_probe.cu
void launch_wgmma_probe_mn_major(const void* a, const void* b, float* d, DType dtype, const WgmmaMnLayout& layout,
                                 cudaStream_t stream);
}
#endif

bool sm90_available() {
#if defined(FLASHPORT_GPU_CUDA)
    if (gpu_device_count() == 0) return false;
    const DeviceInfo& d = current_device_info();
    return d.major == 9 && d.minor == 0;
#else
    return false;
#endif
}

void wgmma_probe([[maybe_unused]] const void* a, [[maybe_unused]] const void* b, [[maybe_unused]] float* d, DType dtype,
                 [[maybe_unused]] void* stream) {
    FP_CHECK(sm90_available(), "wgmma_probe: needs an NVIDIA GPU of compute capability 9.0 in a CUDA build");
    FP_CHECK(dtype == DType::F16 || dtype == DType::BF16, "wgmma_probe: fp16 or bf16 operands, got ",
             dtype_name(dtype));
#if defined(FLASHPORT_GPU_CUDA)
    nvidia_only::launch_wgmma_probe(a, b, d, dtype, as_stream(stream));
#endif
}

void wgmma_probe_mn_major([[maybe_unused]] const void* a, [[maybe_unused]] const void* b, [[maybe_unused]] float* d,
                          DType dtype, [[maybe_unused]] const WgmmaMnLayout& layout, [[maybe_unused]] void* stream) {
    FP_CHECK(sm90_available(), "wgmma_probe_mn_major: needs an NVIDIA GPU of compute capability 9.0 in a CUDA build");
    FP_CHECK(dtype == DType::F16 || dtype == DType::BF16, "wgmma_probe_mn_major: fp16 or bf16 operands, got ",
             dtype_name(dtype));
    for (unsigned x : {layout.k_group_bytes, layout.n_group_bytes, layout.lbo, layout.sbo})
        FP_CHECK(x % 16 == 0 && x >= 16 && x <= 2048, "wgmma_probe_mn_major: offsets are multiples of 16 bytes in ",
                 "[16, 2048], got ", x);
    FP_CHECK(!layout.swizzle128 || layout.k_group_bytes % 1024 == 0,
             "wgmma_probe_mn_major: swizzled k groups sit a multiple of 1024 bytes apart, got ", layout.k_group_bytes);
#if defined(FLASHPORT_GPU_CUDA)
    nvidia_only::launch_wgmma_probe_mn_major(a, b, d, dtype, layout, as_stream(stream));
#endif
}

}  // namespace flashport::gpu
