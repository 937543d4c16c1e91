// Dense attention for a few query rows against a long KV (AttentionKernel::GPU_FLASH_SPLIT_KV): the
// paged decode kernels (paged_attention_decode.h: each KV head's keys cut into slices processed in
// parallel, the slices merged by their LSEs) over the dense K and V seen as a paged cache.
//
// The view: k [batch, kv_len, n_kv_heads, head_dim] with strides (sb, sl, sh, 1) is the cache
// [num_blocks = batch, block_size = kv_len rounded up to 16, n_kv_heads, head_dim] with the same
// strides, block b holding sequence b (block table row b = {b}, seq_lens[b] = kv_len). The kernels read
// no slot at or past seq_lens[b], so the rounded-up tail of the last block is never touched, and
// nothing is copied. Why not the flash kernels: their grid is a block per (query tile, head), so one
// query row against 64k keys runs batch · n_heads blocks that each walk every key, and a GQA group's
// heads each read its K and V again; the decode kernel serves a whole group per block and splits the
// keys until the SMs are full.
#include <string>

#include "backends/gpu/attention_gpu.h"
#include "backends/gpu/common.cuh"
#include "backends/gpu/head_dim_switch.h"
#include "backends/gpu/paged_attention_decode.h"
#include "backends/gpu/runtime.h"
#include "flashport/paged_attention.h"

namespace flashport::gpu {
namespace {

constexpr int64_t round_up_16(int64_t n) {
    return (n + PAGED_BLOCK_SIZE_STEP - 1) / PAGED_BLOCK_SIZE_STEP * PAGED_BLOCK_SIZE_STEP;
}
constexpr size_t align256(size_t n) { return (n + 255) / 256 * 256; }
// The decode kernels index a sequence's keys with 32-bit positions up to 2^30 (their MAX_CAPACITY).
constexpr int64_t MAX_BLOCK_SIZE = int64_t(1) << 30;

// k or v as the cache's [batch, block_size, n_kv_heads, head_dim] view (same data and strides).
TensorView as_blocks(const TensorView& t, int64_t block_size) {
    TensorView blocks = t;
    blocks.shape[1] = block_size;
    return blocks;
}

// The paged view of the dense call; its block table and lengths are set by run_split_kv.
PagedKVCache dense_cache(const AttentionPlan& plan, const TensorView& k, const TensorView& v) {
    const int64_t block_size = round_up_16(plan.shape.kv_len);
    return {as_blocks(k, block_size), as_blocks(v, block_size), nullptr, 1, nullptr};
}

// What plan_paged_attention would produce for the paged view, without its host-side checks of the
// table pointers (set at run time): the split count, the decode variant and the workspace.
PagedAttentionPlan decode_plan(const AttentionPlan& plan, const TensorView& out, const TensorView& q,
                               const PagedKVCache& kv, const TensorView* lse) {
    const AttentionShape& s = plan.shape;
    PagedAttentionPlan p;
    p.batch = s.batch;
    p.q_len = s.q_len;
    p.n_heads = s.n_heads;
    p.n_kv_heads = s.n_kv_heads;
    p.head_dim = s.head_dim;
    p.num_blocks = s.batch;
    p.block_size = kv.k_cache.dim(1);
    p.max_blocks_per_seq = 1;
    p.params.scale = plan.params.scale;
    p.params.causal = plan.params.causal;
    p.params.max_seq_len = s.kv_len;
    p.device = plan.device;
    plan_paged_attention_decode(p, out, q, kv, lse);
    return p;
}

// Block table row b = {b} and seq_lens[b] = kv_len, for b < batch.
__global__ void dense_blocks_kernel(int32_t* table, int32_t* seq_lens, int batch, int kv_len) {
    const int b = int(blockIdx.x * blockDim.x + threadIdx.x);
    if (b < batch) {
        table[b] = b;
        seq_lens[b] = kv_len;
    }
}

}  // namespace

bool split_kv_serves(const AttentionPlan& plan, const TensorView& out, const TensorView& q, const TensorView& k,
                     const TensorView& v) {
    const AttentionShape& s = plan.shape;
    (void)out, (void)q;
    const FlashVariant variant = flash_variant();  // the split-KV kernels are the mma family's
    return (variant == FlashVariant::AUTO || variant == FlashVariant::MMA) && s.batch > 0 && s.n_heads > 0 &&
           s.q_len <= PAGED_DECODE_MAX_Q_LEN && s.kv_len >= SPLIT_KV_MIN_KV_LEN &&
           DecodeHeadDims::contains(s.head_dim) && plan.params.window_left < 0 && k.stride[3] == 1 &&
           v.stride[3] == 1 && s.n_kv_heads <= 65535 && round_up_16(s.kv_len) <= MAX_BLOCK_SIZE;
}

void plan_split_kv(AttentionPlan& plan, const TensorView& out, const TensorView& q, const TensorView& k,
                   const TensorView& v, const TensorView* lse) {
    const PagedAttentionPlan p = decode_plan(plan, out, q, dense_cache(plan, k, v), lse);
    plan.route = AttentionKernel::GPU_FLASH_SPLIT_KV;
    // "gpu.paged_attention.decode.mma.d128.splits66" -> "gpu.flash.split_kv.mma.d128.splits66"
    const std::string decode = "gpu.paged_attention.decode.";
    plan.kernel = "gpu.flash.split_kv." + p.kernel.substr(p.kernel.rfind(decode, 0) == 0 ? decode.size() : 0);
}

void run_split_kv(const AttentionPlan& plan, const TensorView& out, const TensorView& q, const TensorView& k,
                  const TensorView& v, const TensorView* lse, void* stream) {
    check_current_device("attention", q.device);
    PagedKVCache kv = dense_cache(plan, k, v);
    const PagedAttentionPlan p = decode_plan(plan, out, q, kv, lse);
    const int batch = int(plan.shape.batch);
    // [table: batch int32][seq_lens: batch int32][the decode's workspace], each part 256-byte aligned.
    const size_t table_bytes = align256(size_t(batch) * 4), bytes = 2 * table_bytes + p.workspace_bytes;
    const cudaStream_t s = as_stream(stream);
    const StreamBuffer ws(bytes, s, "attention (split-KV): the block table and partials");
    char* base = static_cast<char*>(ws.data());
    int32_t* table = reinterpret_cast<int32_t*>(base);
    int32_t* seq_lens = reinterpret_cast<int32_t*>(base + table_bytes);
    constexpr int THREADS = 256;
    launch_kernel(dense_blocks_kernel, dim3(unsigned((batch + THREADS - 1) / THREADS)), dim3(THREADS), 0, s, table,
                  seq_lens, batch, int(plan.shape.kv_len));
    kv.block_table = table;
    kv.seq_lens = seq_lens;
    run_paged_attention_decode(p, out, q, kv, lse, p.workspace_bytes > 0 ? base + 2 * table_bytes : nullptr, stream);
}

}  // namespace flashport::gpu
