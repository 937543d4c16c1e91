// torch.ops.flashport.attention_varlen: packed sequences with FlashAttention's cu_seqlens
// (flashport/attention_varlen.h) on torch tensors.
//   q    [total_q, n_heads,    head_dim]      sequence b: rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1]
//   k, v [total_k, n_kv_heads, head_dim]      sequence b: rows cu_seqlens_k[b] .. cu_seqlens_k[b + 1]
//   cu_seqlens_q, cu_seqlens_k  int32 [batch + 1], contiguous, on q's device
//   out  [total_q, n_heads, head_dim] contiguous, q's dtype;  lse fp32 [n_heads, total_q] or empty
// Rows no sequence claims are not written by the kernel, so out starts as zeros and lse as -inf (a GPU call
// cannot read cu_seqlens on the host to know whether any are left over without synchronising).
#include <torch/library.h>

#include <limits>

#include "flashport/attention_varlen.h"
#include "tensor_view.h"

namespace flashport::torch_ext {
namespace {

constexpr const char* OP = "attention_varlen";

using Fn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                              const at::Tensor&, const at::Tensor&, int64_t, int64_t, bool,
                                              c10::optional<double>, int64_t, bool, c10::string_view);

std::tuple<at::Tensor, at::Tensor> varlen_device(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                 const at::Tensor& cu_seqlens_q, const at::Tensor& cu_seqlens_k,
                                                 int64_t max_seqlen_q, int64_t max_seqlen_k, bool causal,
                                                 c10::optional<double> scale, int64_t window_left, bool return_lse,
                                                 c10::string_view impl) {
    return guarded(q.device(), [&] {
        const TensorView qv = to_view(q, OP, "q"), kv = to_view(k, OP, "k"), vv = to_view(v, OP, "v");
        FP_CHECK(qv.ndim == 3, OP, ": q must be [total_q, n_heads, head_dim], got ", qv.describe());
        FP_CHECK(max_seqlen_k >= 0, OP, ": max_seqlen_k must be >= 0, got ", max_seqlen_k);
        VarlenSeqs seqs;
        seqs.cu_seqlens_q = to_index(cu_seqlens_q, OP, "cu_seqlens_q", 1, q.device());
        seqs.cu_seqlens_k = to_index(cu_seqlens_k, OP, "cu_seqlens_k", 1, q.device());
        FP_CHECK(cu_seqlens_q.numel() >= 1 && cu_seqlens_k.numel() == cu_seqlens_q.numel(), OP,
                 ": cu_seqlens_q and cu_seqlens_k must both be [batch + 1], got ", cu_seqlens_q.numel(), " and ",
                 cu_seqlens_k.numel(), " entries");
        seqs.batch = cu_seqlens_q.numel() - 1;
        seqs.max_seqlen_q = max_seqlen_q;
        seqs.max_seqlen_k = max_seqlen_k;
        AttentionParams params;
        params.causal = causal;
        params.scale = resolve_scale(scale, OP);
        params.window_left = window_left;
        params.impl = parse_impl(std::string(impl));
        // Checks first, against outputs that alias q (never written), then the allocation.
        const TensorView out_plan(qv.data, qv.dtype, {qv.dim(0), qv.dim(1), qv.dim(2)}, qv.device);
        const TensorView lse_plan(qv.data, DType::F32, {qv.dim(1), qv.dim(0)}, qv.device);
        plan_attention_varlen(out_plan, qv, kv, vv, seqs, return_lse ? &lse_plan : nullptr, params);

        at::Tensor out = at::zeros(q.sizes(), q.options().memory_format(at::MemoryFormat::Contiguous));
        at::Tensor lse = return_lse ? at::full({q.size(1), q.size(0)}, -std::numeric_limits<float>::infinity(),
                                               q.options().dtype(at::kFloat))
                                    : at::empty({0}, q.options().dtype(at::kFloat));
        if (out.numel() == 0 || seqs.batch == 0) return std::make_tuple(out, lse);
        const TensorView out_v = to_view(out, OP, "out");
        const TensorView lse_v = return_lse ? to_view(lse, OP, "lse") : TensorView();
        attention_varlen(out_v, qv, kv, vv, seqs, return_lse ? &lse_v : nullptr, params, current_stream(q.device()));
        return std::make_tuple(out, lse);
    });
}

std::tuple<at::Tensor, at::Tensor> varlen_meta(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                               const at::Tensor& cu_seqlens_q, const at::Tensor& cu_seqlens_k, int64_t,
                                               int64_t, bool, c10::optional<double>, int64_t, bool return_lse,
                                               c10::string_view) {
    return guarded(c10::Device(c10::kCPU), [&] {
        check_meta(OP, {{"q", &q}, {"k", &k}, {"v", &v}}, 3);
        FP_CHECK(cu_seqlens_q.scalar_type() == at::kInt && cu_seqlens_k.scalar_type() == at::kInt, OP,
                 ": cu_seqlens_q and cu_seqlens_k must be int32");
        const std::vector<MetaSize> lse_shape =
            return_lse ? std::vector<MetaSize>{meta_size(q, 1), meta_size(q, 0)} : std::vector<MetaSize>{0};
        return std::make_tuple(meta_empty(meta_sizes(q), q.options()),
                               meta_empty(lse_shape, q.options().dtype(at::kFloat)));
    });
}

std::tuple<at::Tensor, at::Tensor> varlen_autograd(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                   const at::Tensor& cu_seqlens_q, const at::Tensor& cu_seqlens_k,
                                                   int64_t max_seqlen_q, int64_t max_seqlen_k, bool causal,
                                                   c10::optional<double> scale, int64_t window_left, bool return_lse,
                                                   c10::string_view impl) {
    refuse_grad(OP, {&q, &k, &v});
    return call_below_autograd<Fn>("flashport::attention_varlen", q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                   max_seqlen_k, causal, scale, window_left, return_lse, impl);
}

}  // namespace
}  // namespace flashport::torch_ext

using namespace flashport::torch_ext;
TORCH_LIBRARY_IMPL(flashport, CPU, m) {
    m.impl("attention_varlen", varlen_device);
}
#ifdef FLASHPORT_TORCH_GPU
TORCH_LIBRARY_IMPL(flashport, CUDA, m) {
    m.impl("attention_varlen", varlen_device);
}
#endif
TORCH_LIBRARY_IMPL(flashport, Meta, m) {
    m.impl("attention_varlen", varlen_meta);
}
TORCH_LIBRARY_IMPL(flashport, Autograd, m) {
    m.impl("attention_varlen", varlen_autograd);
}
