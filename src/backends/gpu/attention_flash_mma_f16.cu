// The mma flash forward kernels for f16, all head dims: one file per dtype so the two compile
// in parallel. The kernel and its head-dim dispatch are in attention_flash_mma.cuh. CUDA builds only.
#include "backends/gpu/attention_flash_mma.cuh"
#include "backends/gpu/attention_kernels.h"

namespace flashport::gpu {
template void flash_fwd_mma<DType::F16>(const AttentionArgs& args, int head_dim, void* stream);
}  // namespace flashport::gpu
