// The tensor-core paged decode split kernel for bf16, every DecodeHeadDims entry (CUDA builds only; the
// portable kernels are in paged_attention_decode_bf16.cu). One file per dtype so the two compile in parallel.
#include "backends/gpu/paged_attention_decode_mma.cuh"

namespace flashport::gpu {
template void paged_attention_decode_split_mma<DType::BF16>(const PagedAttentionDecodeArgs& args, int head_dim,
                                                            void* stream);
template int paged_attention_decode_mma_blocks_per_sm<DType::BF16>(int head_dim);
}  // namespace flashport::gpu
