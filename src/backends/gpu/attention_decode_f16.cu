// The portable paged decode kernels (split + combine) for f16, head dims 64, 128 and 256: one file per
// dtype so the two compile in parallel. The kernels and the head-dim switches are in attention_decode.cuh.
#include "backends/gpu/attention_decode.cuh"

namespace flashport::gpu {
template void paged_decode_split_portable<DType::F16>(const PagedDecodeArgs& args, int head_dim, void* stream);
template void paged_decode_combine<DType::F16>(const PagedDecodeArgs& args, int head_dim, void* stream);
template int paged_decode_portable_blocks_per_sm<DType::F16>(int head_dim);
}  // namespace flashport::gpu
