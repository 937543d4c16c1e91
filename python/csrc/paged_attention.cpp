// torch.ops.flashport.paged_attention: new query tokens against a paged KV cache in vLLM's block-table layout
// (flashport/paged_attention.h) on torch tensors.
//   q               [batch, q_len, n_heads, head_dim]        the newest q_len tokens of each sequence
//   k/v_cache       [num_blocks, block_size, n_kv_heads, head_dim]
//   block_table     int32 [batch, max_blocks_per_seq], contiguous, on the caches' device
//   seq_lens        int32 [batch], contiguous: tokens in the cache per sequence, the new ones included
//   out             [batch, q_len, n_heads, head_dim] contiguous, q's dtype;  lse fp32 [batch, n_heads, q_len]
// The GPU's split-KV decode kernel needs a workspace for its partial results (paged_attention_workspace_bytes).
// It is a uint8 tensor from torch's caching allocator, allocated on the current stream as part of the call and
// released when the call returns: the allocator reuses the block only for work queued after the kernel on that
// stream, and under CUDA-graph capture it comes from the graph's private pool, so the call stays capturable.
#include <torch/library.h>

#include "flashport/paged_attention.h"
#include "tensor_view.h"

namespace flashport::torch_ext {
namespace {

constexpr const char* OP = "paged_attention";

using Fn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                              const at::Tensor&, const at::Tensor&, bool, c10::optional<double>, bool,
                                              int64_t, int64_t);

std::tuple<at::Tensor, at::Tensor> paged_device(const at::Tensor& q, const at::Tensor& k_cache,
                                                const at::Tensor& v_cache, const at::Tensor& block_table,
                                                const at::Tensor& seq_lens, bool causal, c10::optional<double> scale,
                                                bool return_lse, int64_t num_splits, int64_t max_seq_len) {
    return guarded(q.device(), [&] {
        const TensorView qv = to_view(q, OP, "q");
        FP_CHECK(qv.ndim == 4, OP, ": q must be [batch, q_len, n_heads, head_dim], got ", qv.describe());
        PagedKVCache kv;
        kv.k_cache = to_view(k_cache, OP, "k_cache");
        kv.v_cache = to_view(v_cache, OP, "v_cache");
        kv.block_table = to_index(block_table, OP, "block_table", 2, k_cache.device());
        kv.max_blocks_per_seq = block_table.size(1);
        kv.seq_lens = to_index(seq_lens, OP, "seq_lens", 1, k_cache.device());
        FP_CHECK(block_table.size(0) == qv.dim(0) && seq_lens.size(0) == qv.dim(0), OP,
                 ": block_table must be [batch, max_blocks_per_seq] and seq_lens [batch] with q's batch ", qv.dim(0),
                 ", got ", block_table.size(0), " and ", seq_lens.size(0), " rows");
        PagedAttentionParams params;
        params.causal = causal;
        params.scale = resolve_scale(scale, OP);
        FP_CHECK(num_splits >= 0 && num_splits <= PAGED_MAX_SPLITS, OP, ": num_splits must be 0 (automatic) to ",
                 PAGED_MAX_SPLITS, ", got ", num_splits);
        params.num_splits = int(num_splits);
        params.max_seq_len = max_seq_len;
        // Checks first, against outputs that alias q (never written), then the allocations.
        const TensorView out_plan(qv.data, qv.dtype, {qv.dim(0), qv.dim(1), qv.dim(2), qv.dim(3)}, qv.device);
        const TensorView lse_plan(qv.data, DType::F32, {qv.dim(0), qv.dim(2), qv.dim(1)}, qv.device);
        const PagedAttentionPlan plan =
            plan_paged_attention(out_plan, qv, kv, return_lse ? &lse_plan : nullptr, params);

        at::Tensor out = at::empty(q.sizes(), q.options().memory_format(at::MemoryFormat::Contiguous));
        const std::vector<int64_t> lse_shape =
            return_lse ? std::vector<int64_t>{q.size(0), q.size(2), q.size(1)} : std::vector<int64_t>{0};
        at::Tensor lse = at::empty(lse_shape, q.options().dtype(at::kFloat));
        if (out.numel() == 0) return std::make_tuple(out, lse);
        at::Tensor workspace;
        if (plan.workspace_bytes > 0)
            workspace = at::empty({int64_t(plan.workspace_bytes)}, q.options().dtype(at::kByte));
        const TensorView out_v = to_view(out, OP, "out");
        const TensorView lse_v = return_lse ? to_view(lse, OP, "lse") : TensorView();
        paged_attention(out_v, qv, kv, return_lse ? &lse_v : nullptr, params,
                        workspace.defined() ? workspace.data_ptr() : nullptr, plan.workspace_bytes,
                        current_stream(q.device()));
        return std::make_tuple(out, lse);
    });
}

std::tuple<at::Tensor, at::Tensor> paged_meta(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                                              const at::Tensor& block_table, const at::Tensor& seq_lens, bool,
                                              c10::optional<double>, bool return_lse, int64_t, int64_t) {
    return guarded(c10::Device(c10::kCPU), [&] {
        check_meta(OP, {{"q", &q}, {"k_cache", &k_cache}, {"v_cache", &v_cache}}, 4);
        FP_CHECK(block_table.scalar_type() == at::kInt && seq_lens.scalar_type() == at::kInt, OP,
                 ": block_table and seq_lens must be int32");
        const std::vector<MetaSize> lse_shape =
            return_lse ? std::vector<MetaSize>{meta_size(q, 0), meta_size(q, 2), meta_size(q, 1)}
                       : std::vector<MetaSize>{0};
        return std::make_tuple(meta_empty(meta_sizes(q), q.options()),
                               meta_empty(lse_shape, q.options().dtype(at::kFloat)));
    });
}

std::tuple<at::Tensor, at::Tensor> paged_autograd(const at::Tensor& q, const at::Tensor& k_cache,
                                                  const at::Tensor& v_cache, const at::Tensor& block_table,
                                                  const at::Tensor& seq_lens, bool causal, c10::optional<double> scale,
                                                  bool return_lse, int64_t num_splits, int64_t max_seq_len) {
    refuse_grad(OP, {&q, &k_cache, &v_cache});
    return call_below_autograd<Fn>("flashport::paged_attention", q, k_cache, v_cache, block_table, seq_lens, causal,
                                   scale, return_lse, num_splits, max_seq_len);
}

}  // namespace
}  // namespace flashport::torch_ext

using namespace flashport::torch_ext;
TORCH_LIBRARY_IMPL(flashport, CPU, m) {
    m.impl("paged_attention", paged_device);
}
#ifdef FLASHPORT_TORCH_GPU
TORCH_LIBRARY_IMPL(flashport, CUDA, m) {
    m.impl("paged_attention", paged_device);
}
#endif
TORCH_LIBRARY_IMPL(flashport, Meta, m) {
    m.impl("paged_attention", paged_meta);
}
TORCH_LIBRARY_IMPL(flashport, Autograd, m) {
    m.impl("paged_attention", paged_autograd);
}
