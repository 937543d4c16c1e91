// The varlen attention op (flashport/attention_varlen.h): the packed tensors are validated as batch-1
// views by the dense planner (one set of shape, dtype, device and kernel rules), then the CPU runs each
// sequence as its own dense call and the GPU runs one launch over all of them (the flash kernel, or
// split-KV's decode kernels for a few queries per sequence against long histories).
#include "flashport/attention_varlen.h"

#include <climits>

#include "flashport/error.h"
#include "ops/op_checks.h"
#ifdef FLASHPORT_GPU
#include "backends/gpu/attention_gpu.h"
#endif

namespace flashport {
namespace {

// [rows, heads, dim] (or lse's [heads, rows]) as the batch-1 4-D (3-D) view the dense API takes.
TensorView with_unit_batch(const TensorView& t, const char* name, int ndim) {
    ops_detail::check_view("attention_varlen", name, t, ndim);
    TensorView r = t;
    r.ndim = ndim + 1;
    for (int d = ndim; d > 0; --d) {
        r.shape[size_t(d)] = t.shape[size_t(d - 1)];
        r.stride[size_t(d)] = t.stride[size_t(d - 1)];
    }
    r.shape[0] = 1;
    r.stride[0] = t.shape[0] * t.stride[0];  // any value: there is one batch
    return r;
}

// Host-side check of one offsets array (CPU calls).
void check_offsets(const int32_t* cu, int64_t batch, int64_t total, const char* name) {
    FP_CHECK(cu[0] >= 0, "attention_varlen: ", name, "[0] must be >= 0, got ", cu[0]);
    for (int64_t b = 0; b < batch; ++b)
        FP_CHECK(cu[b] <= cu[b + 1], "attention_varlen: ", name, " must not decrease, got ", name, "[", b, "] = ", cu[b],
                 " > ", name, "[", b + 1, "] = ", cu[b + 1]);
    FP_CHECK(cu[batch] <= total, "attention_varlen: ", name, "[", batch, "] = ", cu[batch],
             " is past the packed tensor's ", total, " rows");
}

struct Batch1 {
    TensorView out, q, k, v, lse;
};

Batch1 batch1_views(const TensorView& out, const TensorView& q, const TensorView& k, const TensorView& v,
                    const TensorView* lse) {
    // The packed shapes in the varlen API's own words; the dense planner checks the rest (dtypes,
    // devices, GQA, head dims, kernel limits).
    for (auto [t, name] : {std::pair{&q, "q"}, {&k, "k"}, {&v, "v"}, {&out, "out"}})
        ops_detail::check_view("attention_varlen", name, *t, 3);
    if (lse) ops_detail::check_view("attention_varlen", "lse", *lse, 2);
    const int64_t total_k = k.dim(0), n_kv = k.dim(1), total_q = q.dim(0), n_heads = q.dim(1), d = q.dim(2);
    ops_detail::check_shape("attention_varlen", "k", "[total_k, n_kv_heads, head_dim]", k, {total_k, n_kv, d});
    ops_detail::check_shape("attention_varlen", "v", "[total_k, n_kv_heads, head_dim] (like k)", v, {total_k, n_kv, d});
    ops_detail::check_shape("attention_varlen", "out", "[total_q, n_heads, head_dim] (like q)", out,
                            {total_q, n_heads, d});
    if (lse) ops_detail::check_shape("attention_varlen", "lse", "[n_heads, total_q]", *lse, {n_heads, total_q});
    Batch1 r{with_unit_batch(out, "out", 3), with_unit_batch(q, "q", 3), with_unit_batch(k, "k", 3),
             with_unit_batch(v, "v", 3), {}};
    if (lse) r.lse = with_unit_batch(*lse, "lse", 2);
    return r;
}

// The plan for views already checked and made batch-1 by batch1_views.
AttentionPlan plan_batch1(const Batch1& b1, bool has_lse, const VarlenSeqs& seqs, const AttentionParams& params) {
    FP_CHECK(seqs.batch >= 0 && seqs.batch <= INT_MAX - 1, "attention_varlen: batch must be 0 to ", INT_MAX - 1,
             ", got ", seqs.batch);
    FP_CHECK(seqs.batch == 0 || (seqs.cu_seqlens_q && seqs.cu_seqlens_k),
             "attention_varlen: cu_seqlens_q and cu_seqlens_k must be set (batch ", seqs.batch, ")");
    FP_CHECK(seqs.max_seqlen_q >= 0 && seqs.max_seqlen_q <= INT_MAX, "attention_varlen: max_seqlen_q must be >= 0 ",
             "and fit in 32 bits, got ", seqs.max_seqlen_q);
    FP_CHECK(seqs.max_seqlen_k >= 0, "attention_varlen: max_seqlen_k must be >= 0 (0: unknown), got ",
             seqs.max_seqlen_k);
    AttentionParams p = params;
    // The GPU serves varlen with the flash kernel only: ask for it, so an unsupported request gets the
    // flash kernel's reason instead of a silent switch to an implementation that cannot run it.
    const bool cpu = b1.q.device.is_cpu();
    if (!cpu && p.impl == AttentionImpl::AUTO) p.impl = AttentionImpl::FLASH;
    AttentionPlan plan = plan_attention(b1.out, b1.q, b1.k, b1.v, has_lse ? &b1.lse : nullptr, p);
    FP_CHECK(cpu || plan.params.impl == AttentionImpl::FLASH,
             "attention_varlen on GPU runs the flash kernel only (fp16/bf16); impl=naive is not supported");
#ifdef FLASHPORT_GPU
    // The packed batch-1 views can look like a few queries against a long KV, but the dense split-KV
    // route reads one sequence; the varlen one is decided below, on the sequences' shape.
    if (plan.route == AttentionKernel::GPU_FLASH_SPLIT_KV) {
        plan.route = gpu::flash_kernel(b1.q.dtype, b1.q.dim(b1.q.ndim - 1));
        plan.kernel = gpu::attention_kernel_name(plan, b1.q.dtype);
    }
#endif
    plan.shape.batch = seqs.batch;
    plan.shape.q_len = seqs.max_seqlen_q;
#ifdef FLASHPORT_GPU
    // A few queries per sequence against long histories (a server's decode step): the keys are split.
    if (!cpu && gpu::split_kv_serves_varlen(plan, b1.k, b1.v))
        gpu::plan_split_kv_varlen(plan, b1.out, b1.q, b1.k, b1.v, has_lse ? &b1.lse : nullptr, seqs.max_seqlen_k);
#endif
    plan.kernel += ".varlen";
    return plan;
}

}  // namespace

AttentionPlan plan_attention_varlen(const TensorView& out, const TensorView& q, const TensorView& k,
                                    const TensorView& v, const VarlenSeqs& seqs, const TensorView* lse,
                                    const AttentionParams& params) {
    return plan_batch1(batch1_views(out, q, k, v, lse), lse != nullptr, seqs, params);
}

AttentionPlan attention_varlen(const TensorView& out, const TensorView& q, const TensorView& k, const TensorView& v,
                               const VarlenSeqs& seqs, const TensorView* lse, const AttentionParams& params,
                               void* stream) {
    const Batch1 b1 = batch1_views(out, q, k, v, lse);
    const AttentionPlan plan = plan_batch1(b1, lse != nullptr, seqs, params);
    if (!q.device.is_cpu()) {
#ifdef FLASHPORT_GPU
        gpu::run_attention_varlen(plan, b1.out, b1.q, b1.k, b1.v, lse ? &b1.lse : nullptr,
                                  {seqs.cu_seqlens_q, seqs.cu_seqlens_k, seqs.batch, seqs.max_seqlen_q,
                                   seqs.max_seqlen_k},
                                  stream);
#endif
        return plan;
    }
    (void)stream;
    if (seqs.batch == 0) return plan;
    const int32_t* cq = seqs.cu_seqlens_q;
    const int32_t* ck = seqs.cu_seqlens_k;
    check_offsets(cq, seqs.batch, q.dim(0), "cu_seqlens_q");
    check_offsets(ck, seqs.batch, k.dim(0), "cu_seqlens_k");
    for (int64_t b = 0; b < seqs.batch; ++b)
        FP_CHECK(cq[b + 1] - cq[b] <= seqs.max_seqlen_q, "attention_varlen: sequence ", b, " has ", cq[b + 1] - cq[b],
                 " queries, more than max_seqlen_q = ", seqs.max_seqlen_q);
    AttentionParams p = plan.params;  // resolved once: every sequence runs the same implementation
    for (int64_t b = 0; b < seqs.batch; ++b) {
        // Sequence b: positions [cq[b], cq[b + 1]) of the batch-1 views (keys: [ck[b], ck[b + 1])).
        const int64_t q0 = cq[b], nq = cq[b + 1] - cq[b], k0 = ck[b], nk = ck[b + 1] - ck[b];
        const TensorView lse_b = lse ? b1.lse.narrowed(2, q0, nq) : TensorView{};
        attention(b1.out.narrowed(1, q0, nq), b1.q.narrowed(1, q0, nq), b1.k.narrowed(1, k0, nk),
                  b1.v.narrowed(1, k0, nk), lse ? &lse_b : nullptr, p);
    }
    return plan;
}

}  // namespace flashport
