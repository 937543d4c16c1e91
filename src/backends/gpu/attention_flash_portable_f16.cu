// Instances of the portable flash forward kernel for f16 (one file per dtype so the two compile in
// parallel). The kernel itself is in attention_flash_portable.cuh.
#include "backends/gpu/attention_flash_portable.cuh"
#include "backends/gpu/attention_kernels.h"

namespace flashport::gpu {

template <>
void flash_fwd_portable<DType::F16>(const AttentionArgs& args, int head_dim, void* stream) {
    const cudaStream_t st = as_stream(stream);
    switch (head_dim) {
        case 40: return launch_flash_fwd_portable<DType::F16, 40>(args, st);
        case 64: return launch_flash_fwd_portable<DType::F16, 64>(args, st);
        case 80: return launch_flash_fwd_portable<DType::F16, 80>(args, st);
        case 96: return launch_flash_fwd_portable<DType::F16, 96>(args, st);
        case 128: return launch_flash_fwd_portable<DType::F16, 128>(args, st);
        case 160: return launch_flash_fwd_portable<DType::F16, 160>(args, st);
        case 256: return launch_flash_fwd_portable<DType::F16, 256>(args, st);
    }
    fail("flash attention (portable): head_dim ", head_dim, " has no instance");
}

}  // namespace flashport::gpu
