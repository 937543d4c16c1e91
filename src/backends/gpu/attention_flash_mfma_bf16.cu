// The MFMA flash forward kernels for bf16, all head dims (AMD CDNA; one file per dtype so the two
// compile in parallel). The kernel and its head-dim dispatch are in attention_flash_mfma.cuh.
#include "backends/gpu/attention_flash_mfma.cuh"
#include "backends/gpu/attention_kernels.h"

namespace flashport::gpu {
template void flash_fwd_mfma_cdna<DType::BF16>(const AttentionArgs& args, int head_dim, void* stream);
}  // namespace flashport::gpu
