// The paged-KV attention op (flashport/paged_attention.h): one place that validates a request, picks
// the kernel and dispatches to the CPU (gather + dense flash) or the GPU split-KV decode kernel.
#include "flashport/paged_attention.h"

#include <cmath>
#include <initializer_list>

#include "backends/cpu/attention_cpu.h"
#include "backends/cpu/paged_attention.h"
#include "flashport/error.h"
#include "ops/op_checks.h"
#ifdef FLASHPORT_GPU
#include "backends/gpu/paged_attention_decode.h"
#include "backends/gpu/paged_attention_prefill.h"
#endif

namespace flashport {
using ops_detail::CPU_MAX_HEAD_DIM;

PagedAttentionPlan plan_paged_attention(const TensorView& out, const TensorView& q, const PagedKVCache& kv,
                                        const TensorView* lse, const PagedAttentionParams& params) {
    ops_detail::check_view("paged_attention", "q", q, 4);
    ops_detail::check_view("paged_attention", "out", out, 4);
    ops_detail::check_view("paged_attention", "k_cache", kv.k_cache, 4);
    ops_detail::check_view("paged_attention", "v_cache", kv.v_cache, 4);

    PagedAttentionPlan plan;
    plan.batch = q.dim(0);
    plan.q_len = q.dim(1);
    plan.n_heads = q.dim(2);
    plan.head_dim = q.dim(3);
    plan.num_blocks = kv.k_cache.dim(0);
    plan.block_size = kv.k_cache.dim(1);
    plan.n_kv_heads = kv.k_cache.dim(2);
    plan.max_blocks_per_seq = kv.max_blocks_per_seq;

    ops_detail::check_shape("paged_attention", "k_cache", "[num_blocks, block_size, n_kv_heads, head_dim]", kv.k_cache,
                            {plan.num_blocks, plan.block_size, plan.n_kv_heads, plan.head_dim});
    ops_detail::check_shape("paged_attention", "v_cache",
                            "[num_blocks, block_size, n_kv_heads, head_dim] (like k_cache)", kv.v_cache,
                            {plan.num_blocks, plan.block_size, plan.n_kv_heads, plan.head_dim});
    ops_detail::check_shape("paged_attention", "out", "[batch, q_len, n_heads, head_dim] (like q)", out,
                            {plan.batch, plan.q_len, plan.n_heads, plan.head_dim});
    FP_CHECK(plan.q_len >= 1, "paged_attention: q_len must be at least 1, got ", plan.q_len);
    FP_CHECK(plan.head_dim >= 1, "paged_attention: head_dim must be at least 1, got ", plan.head_dim);
    FP_CHECK(plan.n_kv_heads >= 1 && plan.n_heads % plan.n_kv_heads == 0, "paged_attention: n_heads (", plan.n_heads,
             ") must be a multiple of n_kv_heads (", plan.n_kv_heads, ") for GQA/MQA");
    FP_CHECK(plan.block_size >= PAGED_BLOCK_SIZE_STEP && plan.block_size % PAGED_BLOCK_SIZE_STEP == 0,
             "paged_attention: block_size must be a positive multiple of ", PAGED_BLOCK_SIZE_STEP, ", got ",
             plan.block_size);
    FP_CHECK(plan.num_blocks >= 1, "paged_attention: the cache has no blocks (num_blocks = 0)");
    if (plan.batch > 0) {
        FP_CHECK(kv.block_table != nullptr, "paged_attention: block_table is null");
        FP_CHECK(kv.seq_lens != nullptr, "paged_attention: seq_lens is null");
        FP_CHECK(kv.max_blocks_per_seq >= 1, "paged_attention: max_blocks_per_seq must be at least 1, got ",
                 kv.max_blocks_per_seq);
    }
    FP_CHECK(kv.k_cache.dtype == q.dtype && kv.v_cache.dtype == q.dtype && out.dtype == q.dtype,
             "paged_attention: q, k_cache, v_cache and out must share one dtype, got q ", dtype_name(q.dtype),
             ", k_cache ", dtype_name(kv.k_cache.dtype), ", v_cache ", dtype_name(kv.v_cache.dtype), ", out ",
             dtype_name(out.dtype));
    FP_CHECK(kv.k_cache.device == q.device && kv.v_cache.device == q.device && out.device == q.device,
             "paged_attention: q, k_cache, v_cache and out must be on one device, got q on ", q.device.name(),
             ", k_cache on ", kv.k_cache.device.name(), ", v_cache on ", kv.v_cache.device.name(), ", out on ",
             out.device.name());
    if (lse) {
        ops_detail::check_view("paged_attention", "lse", *lse, 3);
        ops_detail::check_shape("paged_attention", "lse", "[batch, n_heads, q_len]", *lse,
                                {plan.batch, plan.n_heads, plan.q_len});
        FP_CHECK(lse->dtype == DType::F32, "paged_attention: lse must be fp32, got ", dtype_name(lse->dtype));
        FP_CHECK(lse->device == q.device, "paged_attention: lse must be on ", q.device.name(), ", got ",
                 lse->device.name());
    }
    FP_CHECK(std::isfinite(params.scale), "paged_attention: scale must be finite, got ", params.scale);
    FP_CHECK(params.num_splits >= 0 && params.num_splits <= PAGED_MAX_SPLITS,
             "paged_attention: num_splits must be 0 (automatic) or 1 to ", PAGED_MAX_SPLITS, ", got ",
             params.num_splits);
    FP_CHECK(params.max_seq_len >= 0, "paged_attention: max_seq_len must be >= 0 (0: the table's capacity), got ",
             params.max_seq_len);

    plan.device = q.device;
    plan.params = params;
    if (params.scale == 0.0f) plan.params.scale = float(1.0 / std::sqrt(double(plan.head_dim)));
    if (q.device.is_cpu()) {
        FP_CHECK(plan.head_dim <= CPU_MAX_HEAD_DIM, "paged_attention: head_dim ", plan.head_dim,
                 " is not supported on the CPU (1 to ", CPU_MAX_HEAD_DIM, ")");
        plan.params.num_splits = 1;
        if (cpu::paged_attention_decode_serves(plan)) {
            plan.route = PagedAttentionKernel::CPU_DECODE;
            plan.kernel = cpu::paged_attention_decode_name();
        } else {
            plan.route = PagedAttentionKernel::CPU_GATHER;
            plan.kernel = "cpu.paged_attention.gather+" + cpu::flash_kernel_name();
        }
    } else {
#ifdef FLASHPORT_GPU
        if (gpu::paged_attention_prefill_serves(plan))
            gpu::plan_paged_attention_prefill(plan, out, q, kv, lse);
        else
            gpu::plan_paged_attention_decode(plan, out, q, kv, lse);
#else
        fail("paged_attention on ", q.device.name(),
             " needs a GPU build; configure with --preset cuda or --preset hip");
#endif
    }
    return plan;
}

size_t paged_attention_workspace_bytes(const TensorView& out, const TensorView& q, const PagedKVCache& kv,
                                       const TensorView* lse, const PagedAttentionParams& params) {
    return plan_paged_attention(out, q, kv, lse, params).workspace_bytes;
}

PagedAttentionPlan paged_attention(const TensorView& out, const TensorView& q, const PagedKVCache& kv,
                                   const TensorView* lse, const PagedAttentionParams& params, void* workspace,
                                   size_t workspace_bytes, void* stream) {
    const PagedAttentionPlan plan = plan_paged_attention(out, q, kv, lse, params);
    if (plan.workspace_bytes > 0) {
        FP_CHECK(workspace != nullptr && workspace_bytes >= plan.workspace_bytes,
                 "paged_attention: the workspace is too small: this call (", plan.kernel, ") needs ",
                 plan.workspace_bytes, " bytes (paged_attention_workspace_bytes), got ",
                 workspace ? workspace_bytes : 0, workspace ? "" : " (null)");
        FP_CHECK(reinterpret_cast<uintptr_t>(workspace) % 16 == 0,
                 "paged_attention: the workspace must be 16-byte aligned, got ", workspace);
    }
    if (plan.batch == 0 || plan.n_heads == 0) return plan;
    switch (plan.route) {
        case PagedAttentionKernel::CPU_DECODE:
            cpu::paged_attention_decode(plan, out, q, kv, lse);
            break;
        case PagedAttentionKernel::CPU_GATHER:
            cpu::paged_attention(plan, out, q, kv, lse);
            break;
#ifdef FLASHPORT_GPU
        case PagedAttentionKernel::GPU_DECODE_PORTABLE:
        case PagedAttentionKernel::GPU_DECODE_MMA:
        case PagedAttentionKernel::GPU_DECODE_MFMA:
            gpu::run_paged_attention_decode(plan, out, q, kv, lse, workspace, stream);
            break;
        case PagedAttentionKernel::GPU_PREFILL_PORTABLE:
        case PagedAttentionKernel::GPU_PREFILL_MMA:
        case PagedAttentionKernel::GPU_PREFILL_MFMA:
        case PagedAttentionKernel::GPU_PREFILL_DOT2:
        case PagedAttentionKernel::GPU_PREFILL_WGMMA:
            gpu::run_paged_attention_prefill(plan, out, q, kv, lse, stream);
            break;
#else
        default:
            break;  // a CPU-only build plans no GPU route
#endif
    }
    (void)stream;
    return plan;
}

}  // namespace flashport
