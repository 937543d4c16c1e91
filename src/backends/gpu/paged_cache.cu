// paged_cache_write on the GPU: one block per token copies its K and V rows (all KV heads) into the
// cache slot the slot map names. Bandwidth-trivial (a decode step writes a few KB per layer); what it
// saves is a driver copy per run of tokens, and it can be captured in a graph.
#include "backends/gpu/paged_cache.h"

#include "backends/gpu/common.cuh"
#include "backends/gpu/runtime.h"
#include "backends/gpu/view_strides.h"

namespace flashport::gpu {
namespace {

constexpr int THREADS = 128;

struct CacheWriteArgs {
    char* k_cache;
    char* v_cache;
    const char* k;
    const char* v;
    const void* slots;
    bool slots64;
    int64_t kc_stride[3], vc_stride[3], k_stride[2], v_stride[2];  // bytes: (block, slot, head), (token, head)
    int64_t capacity, block_size;
    int heads, row_bytes;
};

// Copies one row of `bytes` bytes with the widest access both addresses allow.
__device__ __forceinline__ void copy_row(char* dst, const char* src, int bytes) {
    if (((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src) | uintptr_t(bytes)) & 15) == 0) {
        for (int i = int(threadIdx.x) * 16; i < bytes; i += THREADS * 16)
            *reinterpret_cast<uint4*>(dst + i) = *reinterpret_cast<const uint4*>(src + i);
    } else {
        for (int i = int(threadIdx.x) * 2; i < bytes; i += THREADS * 2)  // every dtype is a multiple of 2 bytes
            *reinterpret_cast<uint16_t*>(dst + i) = *reinterpret_cast<const uint16_t*>(src + i);
    }
}

__global__ void __launch_bounds__(THREADS) paged_cache_write_kernel(CacheWriteArgs a) {
    const int64_t t = blockIdx.x;
    const int64_t slot = a.slots64 ? static_cast<const int64_t*>(a.slots)[t] : static_cast<const int32_t*>(a.slots)[t];
    if (slot < 0 || slot >= a.capacity) return;  // padding, or a slot the op documents as skipped
    const int64_t blk = slot / a.block_size, off = slot % a.block_size;
    for (int h = 0; h < a.heads; ++h) {
        copy_row(a.k_cache + blk * a.kc_stride[0] + off * a.kc_stride[1] + h * a.kc_stride[2],
                 a.k + t * a.k_stride[0] + h * a.k_stride[1], a.row_bytes);
        copy_row(a.v_cache + blk * a.vc_stride[0] + off * a.vc_stride[1] + h * a.vc_stride[2],
                 a.v + t * a.v_stride[0] + h * a.v_stride[1], a.row_bytes);
    }
}

}  // namespace

void paged_cache_write(const TensorView& k_cache, const TensorView& v_cache, const TensorView& k, const TensorView& v,
                       const IndexView& slots, void* stream) {
    check_current_device("paged_cache_write", k_cache.device);
    const int64_t es = int64_t(dtype_size(k.dtype));
    CacheWriteArgs a{};
    a.k_cache = static_cast<char*>(k_cache.data);
    a.v_cache = static_cast<char*>(v_cache.data);
    a.k = static_cast<const char*>(k.data);
    a.v = static_cast<const char*>(v.data);
    a.slots = slots.data;
    a.slots64 = slots.type == IndexView::Type::I64;
    copy_strides(a.kc_stride, &k_cache, es);
    copy_strides(a.vc_stride, &v_cache, es);
    copy_strides(a.k_stride, &k, es);
    copy_strides(a.v_stride, &v, es);
    a.block_size = k_cache.dim(1);
    a.capacity = k_cache.dim(0) * a.block_size;
    a.heads = int(k.dim(1));
    a.row_bytes = int(k.dim(2) * es);
    FP_CHECK(k.dim(0) <= 2147483647, "paged_cache_write on GPU: at most 2^31 - 1 tokens per call, got ", k.dim(0));
    launch_kernel(paged_cache_write_kernel, unsigned(k.dim(0)), THREADS, 0, as_stream(stream), a);
    FP_GPU_CHECK_LAUNCH("paged_cache_write_kernel");
}

}  // namespace flashport::gpu
