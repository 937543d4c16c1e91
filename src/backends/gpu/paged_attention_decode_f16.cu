// The portable paged decode kernels (split + combine) for f16, every DecodeHeadDims entry: one file per
// dtype so the two compile in parallel. The kernels and the head-dim dispatch are in paged_attention_decode.cuh.
#include "backends/gpu/paged_attention_decode.cuh"

namespace flashport::gpu {
template void paged_attention_decode_split_portable<DType::F16>(const PagedAttentionDecodeArgs& args, int head_dim,
                                                                void* stream);
template void paged_attention_decode_combine<DType::F16>(const PagedAttentionDecodeArgs& args, int head_dim,
                                                         void* stream);
template int paged_attention_decode_portable_blocks_per_sm<DType::F16>(int head_dim);
}  // namespace flashport::gpu
