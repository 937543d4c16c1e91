// The dot2 flash forward kernels for fp16, all head dims (AMD gfx906 and CDNA; fp16 only: there is no
// bf16 dot2 on gfx906). The kernel and its head-dim dispatch are in attention_flash_dot2.cuh.
#include "backends/gpu/attention_flash_dot2.cuh"
#include "backends/gpu/attention_kernels.h"

namespace flashport::gpu {
template void flash_fwd_dot2<DType::F16>(const AttentionArgs& args, int head_dim, void* stream);
}  // namespace flashport::gpu
