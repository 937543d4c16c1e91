// Paged-KV prefill on the GPU, host side: the limits, the kernel name and the argument block for the
// flash kernels' paged layout (attention_common.cuh, attention_sequence.cuh).
#include "backends/gpu/paged_attention_prefill.h"

#include <climits>
#include <string>

#include "backends/gpu/attention_common.cuh"
#include "backends/gpu/attention_gpu.h"
#include "backends/gpu/head_dim_switch.h"
#include "backends/gpu/paged_attention_decode.h"
#include "backends/gpu/runtime.h"

namespace flashport::gpu {

namespace {

// A paged prefill route and the flash kernel behind it, both ways.
PagedAttentionKernel prefill_route_of(AttentionKernel flash) {
    switch (flash) {
        case AttentionKernel::GPU_FLASH_MMA:
            return PagedAttentionKernel::GPU_PREFILL_MMA;
        case AttentionKernel::GPU_FLASH_WGMMA:
            return PagedAttentionKernel::GPU_PREFILL_WGMMA;
        case AttentionKernel::GPU_FLASH_MFMA:
            return PagedAttentionKernel::GPU_PREFILL_MFMA;
        case AttentionKernel::GPU_FLASH_DOT2:
            return PagedAttentionKernel::GPU_PREFILL_DOT2;
        default:
            return PagedAttentionKernel::GPU_PREFILL_PORTABLE;
    }
}
AttentionKernel flash_route_of(PagedAttentionKernel route) {
    switch (route) {
        case PagedAttentionKernel::GPU_PREFILL_MMA:
            return AttentionKernel::GPU_FLASH_MMA;
        case PagedAttentionKernel::GPU_PREFILL_MFMA:
            return AttentionKernel::GPU_FLASH_MFMA;
        case PagedAttentionKernel::GPU_PREFILL_DOT2:
            return AttentionKernel::GPU_FLASH_DOT2;
        case PagedAttentionKernel::GPU_PREFILL_WGMMA:
            return AttentionKernel::GPU_FLASH_WGMMA;
        case PagedAttentionKernel::GPU_PREFILL_PORTABLE:
            return AttentionKernel::GPU_FLASH_PORTABLE;
        default:
            fail("paged_attention: route ", int(route), " is not a GPU prefill kernel");
    }
}

}  // namespace

bool paged_attention_prefill_serves(const PagedAttentionPlan& plan) {
    return plan.q_len > PAGED_DECODE_MAX_Q_LEN || !DecodeHeadDims::contains(plan.head_dim);
}

void plan_paged_attention_prefill(PagedAttentionPlan& plan, const TensorView& out, const TensorView& q,
                                  const PagedKVCache& kv, const TensorView* lse) {
    check_paged_gpu_views(out, q, kv);
    FP_CHECK(plan.head_dim % 8 == 0 && FlashHeadDims::at_least(plan.head_dim) != 0,
             "paged_attention on GPU supports head dims that are multiples of 8 up to ",
             FlashHeadDims::values[FlashHeadDims::count - 1], " (", DecodeHeadDims::text(),
             " in the decode kernel, the others in the prefill kernel), got ", plan.head_dim);
    (void)lse;  // any strides
    FP_CHECK(plan.batch <= 65535 && plan.n_heads <= 65535, "paged_attention on GPU: batch (", plan.batch,
             ") and n_heads (", plan.n_heads, ") must each be at most 65535 (grid limits)");
    FP_CHECK(plan.q_len <= INT_MAX && plan.num_blocks <= INT_MAX && plan.max_blocks_per_seq * plan.block_size <= INT_MAX,
             "paged_attention on GPU: q_len (", plan.q_len, "), num_blocks (", plan.num_blocks,
             ") and max_blocks_per_seq · block_size (", plan.max_blocks_per_seq * plan.block_size,
             ") must fit in 32 bits");
    plan.params.num_splits = 1;  // query tiles fill the GPU; no split-KV, no workspace
    plan.workspace_bytes = 0;
    // The flash kernel dense attention would run for this dtype on this device, reading K/V through
    // the block table. That includes the wgmma kernel under AUTO (wgmma_beats_mma, on compute capability
    // 9.0): its paged prefill cases passed on the H200 (h200.sh wgmma-check, 2026-12-05), and with the
    // TMA route on it reads the cache's blocks as TMA boxes.
    const AttentionKernel flash = flash_kernel(q.dtype, plan.head_dim);
    plan.route = prefill_route_of(flash);
    plan.kernel =
        std::string("gpu.paged_attention.prefill.") + flash_route_name(flash) + ".d" + std::to_string(plan.head_dim);
}

void run_paged_attention_prefill(const PagedAttentionPlan& plan, const TensorView& out, const TensorView& q,
                                 const PagedKVCache& kv, const TensorView* lse, void* stream) {
    check_current_device("paged_attention", q.device);
    AttentionArgs a = attention_args(out, q, kv.k_cache, kv.v_cache, lse, plan.params.scale, plan.params.causal, -1);
    a.batch = int(plan.batch);
    a.q_len = int(plan.q_len);
    a.n_heads = int(plan.n_heads);
    a.n_kv_heads = int(plan.n_kv_heads);
    a.block_table = kv.block_table;
    a.seq_lens_k = kv.seq_lens;
    a.max_blocks = int(plan.max_blocks_per_seq);
    a.block_size = int(plan.block_size);
    a.num_blocks = int(plan.num_blocks);
    launch_flash_route(a, q.dtype, int(plan.head_dim), flash_route_of(plan.route), stream);
}

}  // namespace flashport::gpu
