// The MFMA paged decode split kernel for f16, every DecodeHeadDims entry (AMD CDNA; HIP builds only, one
// file per dtype so the two compile in parallel). The kernel is in paged_attention_decode_mfma.cuh.
#include "backends/gpu/paged_attention_decode_mfma.cuh"

namespace flashport::gpu {
template void paged_attention_decode_split_mfma<DType::F16>(const PagedAttentionDecodeArgs& args, int head_dim,
                                                            void* stream);
template int paged_attention_decode_mfma_blocks_per_sm<DType::F16>(int head_dim);
}  // namespace flashport::gpu
