// The attention op: one place that validates a request, picks the implementation and dispatches.
#include "flashport/attention.h"

#include <cmath>

#include "backends/cpu/attention_cpu.h"
#include "flashport/error.h"
#include "ops/op_checks.h"
#ifdef FLASHPORT_GPU
#include "backends/gpu/attention_gpu.h"
#endif

namespace flashport {
using ops_detail::CPU_MAX_HEAD_DIM;

const char* impl_name(AttentionImpl impl) {
    switch (impl) {
        case AttentionImpl::AUTO:
            return "auto";
        case AttentionImpl::NAIVE:
            return "naive";
        case AttentionImpl::FLASH:
            return "flash";
    }
    return "?";
}

AttentionImpl parse_impl(const std::string& name) {
    if (name == "auto") return AttentionImpl::AUTO;
    if (name == "naive") return AttentionImpl::NAIVE;
    if (name == "flash") return AttentionImpl::FLASH;
    fail("unknown attention implementation '", name, "': expected auto, naive or flash");
}

AttentionPlan plan_attention(const TensorView& out, const TensorView& q, const TensorView& k, const TensorView& v,
                             const TensorView* lse, const AttentionParams& params) {
    ops_detail::check_sizes("attention", "q", q, 4);
    ops_detail::check_sizes("attention", "k", k, 4);
    ops_detail::check_sizes("attention", "v", v, 4);
    ops_detail::check_sizes("attention", "out", out, 4);

    AttentionPlan plan;
    AttentionShape& s = plan.shape;
    s.batch = q.dim(0);
    s.q_len = q.dim(1);
    s.n_heads = q.dim(2);
    s.head_dim = q.dim(3);
    s.kv_len = k.dim(1);
    s.n_kv_heads = k.dim(2);

    ops_detail::check_shape("attention", "k", "[batch, kv_len, n_kv_heads, head_dim]", k,
                            {s.batch, s.kv_len, s.n_kv_heads, s.head_dim});
    ops_detail::check_shape("attention", "v", "[batch, kv_len, n_kv_heads, head_dim] (like k)", v,
                            {s.batch, s.kv_len, s.n_kv_heads, s.head_dim});
    ops_detail::check_shape("attention", "out", "[batch, q_len, n_heads, head_dim] (like q)", out,
                            {s.batch, s.q_len, s.n_heads, s.head_dim});
    FP_CHECK(s.head_dim >= 1, "attention: head_dim must be at least 1, got ", s.head_dim);
    FP_CHECK(s.n_kv_heads >= 1 && s.n_heads % s.n_kv_heads == 0, "attention: n_heads (", s.n_heads,
             ") must be a multiple of n_kv_heads (", s.n_kv_heads, ") for GQA/MQA");
    FP_CHECK(k.dtype == q.dtype && v.dtype == q.dtype && out.dtype == q.dtype,
             "attention: q, k, v and out must share one dtype, got q ", dtype_name(q.dtype), ", k ",
             dtype_name(k.dtype), ", v ", dtype_name(v.dtype), ", out ", dtype_name(out.dtype));
    FP_CHECK(k.device == q.device && v.device == q.device && out.device == q.device,
             "attention: q, k, v and out must be on one device, got q on ", q.device.name(), ", k on ", k.device.name(),
             ", v on ", v.device.name(), ", out on ", out.device.name());
    if (lse) {
        ops_detail::check_sizes("attention", "lse", *lse, 3);
        ops_detail::check_shape("attention", "lse", "[batch, n_heads, q_len]", *lse, {s.batch, s.n_heads, s.q_len});
        FP_CHECK(lse->dtype == DType::F32, "attention: lse must be fp32, got ", dtype_name(lse->dtype));
        FP_CHECK(lse->device == q.device, "attention: lse must be on ", q.device.name(), ", got ", lse->device.name());
    }
    FP_CHECK(params.window_left >= -1, "attention: window_left must be -1 (no window) or >= 0, got ",
             params.window_left);
    FP_CHECK(std::isfinite(params.scale), "attention: scale must be finite, got ", params.scale);

    plan.device = q.device;
    plan.params = params;
    if (params.scale == 0.0f) plan.params.scale = float(1.0 / std::sqrt(double(s.head_dim)));
    AttentionImpl& impl = plan.params.impl;

    if (q.device.is_cpu()) {
        FP_CHECK(s.head_dim <= CPU_MAX_HEAD_DIM, "attention: head_dim ", s.head_dim, " is not supported on the CPU (",
                 "1 to ", CPU_MAX_HEAD_DIM, ")");
        // auto: flash, which serves everything naive does, in O(N) memory.
        if (impl == AttentionImpl::AUTO) impl = AttentionImpl::FLASH;
        plan.route = impl == AttentionImpl::NAIVE ? AttentionKernel::CPU_NAIVE : AttentionKernel::CPU_FLASH;
        plan.kernel = impl == AttentionImpl::NAIVE ? "cpu.naive.blas" : cpu::flash_kernel_name();
        return plan;
    }
#ifdef FLASHPORT_GPU
    gpu::check_attention_views(plan, out, q, k, v, lse);
    const std::string flash_limit = gpu::flash_limit(plan, out, q, k, v);
    // auto: the flash kernels wherever they serve the request (fp16/bf16, their head dims, 16-byte rows),
    // naive otherwise (fp32, other head dims, unaligned views). Asked for by name, flash must serve.
    if (impl == AttentionImpl::AUTO) impl = flash_limit.empty() ? AttentionImpl::FLASH : AttentionImpl::NAIVE;
    FP_CHECK(impl != AttentionImpl::FLASH || flash_limit.empty(), flash_limit);
    plan.route =
        impl == AttentionImpl::FLASH ? gpu::flash_kernel(q.dtype, q.dim(q.ndim - 1)) : AttentionKernel::GPU_NAIVE;
    plan.kernel = gpu::attention_kernel_name(plan, q.dtype);
    // Few query rows against a long KV: the flash grid (a block per query tile and head) would leave
    // most SMs idle while each block walks the whole KV, so the keys are split instead.
    if (impl == AttentionImpl::FLASH && gpu::split_kv_serves(plan, out, q, k, v)) gpu::plan_split_kv(plan, out, q, k, v, lse);
    return plan;
#else
    fail("attention on ", q.device.name(), " needs a GPU build; configure with --preset cuda or --preset hip");
#endif
}

AttentionPlan attention(const TensorView& out, const TensorView& q, const TensorView& k, const TensorView& v,
                        const TensorView* lse, const AttentionParams& params, void* stream) {
    const AttentionPlan plan = plan_attention(out, q, k, v, lse, params);
    switch (plan.route) {
        case AttentionKernel::CPU_NAIVE:
            cpu::attention_naive(plan, out, q, k, v, lse);
            break;
        case AttentionKernel::CPU_FLASH:
            cpu::attention_flash(plan, out, q, k, v, lse);
            break;
        case AttentionKernel::GPU_NAIVE:
        case AttentionKernel::GPU_FLASH_PORTABLE:
        case AttentionKernel::GPU_FLASH_MMA:
        case AttentionKernel::GPU_FLASH_MFMA:
        case AttentionKernel::GPU_FLASH_DOT2:
        case AttentionKernel::GPU_FLASH_WGMMA:
#ifdef FLASHPORT_GPU
            gpu::run_attention(plan, out, q, k, v, lse, stream);
#endif
            break;
        case AttentionKernel::GPU_FLASH_SPLIT_KV:
#ifdef FLASHPORT_GPU
            gpu::run_split_kv(plan, out, q, k, v, lse, stream);
#endif
            break;
    }
    (void)stream;
    return plan;
}

}  // namespace flashport
