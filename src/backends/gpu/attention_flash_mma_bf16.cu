// Instances of the NVIDIA tensor-core flash forward kernel for bf16 (one file per dtype so the two
// compile in parallel). The kernel is in attention_flash_mma.cuh. CUDA builds only.
#include "backends/gpu/attention_flash_mma.cuh"
#include "backends/gpu/attention_kernels.h"

namespace flashport::gpu {

template <>
void flash_fwd_mma<DType::BF16>(const AttentionArgs& args, int head_dim, void* stream) {
    const cudaStream_t st = as_stream(stream);
    switch (head_dim) {
        case 40: return nvidia_only::launch_flash_fwd_mma<DType::BF16, 40>(args, st);
        case 64: return nvidia_only::launch_flash_fwd_mma<DType::BF16, 64>(args, st);
        case 80: return nvidia_only::launch_flash_fwd_mma<DType::BF16, 80>(args, st);
        case 96: return nvidia_only::launch_flash_fwd_mma<DType::BF16, 96>(args, st);
        case 128: return nvidia_only::launch_flash_fwd_mma<DType::BF16, 128>(args, st);
        case 160: return nvidia_only::launch_flash_fwd_mma<DType::BF16, 160>(args, st);
        case 256: return nvidia_only::launch_flash_fwd_mma<DType::BF16, 256>(args, st);
    }
    fail("flash attention (mma): head_dim ", head_dim, " has no instance");
}

}  // namespace flashport::gpu
