// torch.ops.flashport.attention: dense attention (flashport/attention.h) on torch tensors.
//   q    [batch, q_len,  n_heads,    head_dim]   any strides with a unit last one (a transposed
//   k, v [batch, kv_len, n_kv_heads, head_dim]   [batch, heads, seq, dim] tensor is read in place)
//   out  [batch, q_len,  n_heads,    head_dim]   contiguous, q's dtype: the one allocation, with lse
//   lse  fp32 [batch, n_heads, q_len] when return_lse, else an empty fp32 tensor
// Kernels: CPU and, in a GPU build, CUDA (one function: the views carry the device), Meta (shapes only)
// and Autograd (refuses grad, see tensor_view.h).
#include <limits>

#include <torch/library.h>

#include "flashport/attention.h"
#include "tensor_view.h"

namespace flashport::torch_ext {
namespace {

constexpr const char* OP = "attention";

using Fn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&, bool,
                                              c10::optional<double>, int64_t, bool, c10::string_view);

std::tuple<at::Tensor, at::Tensor> attention_device(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                    bool causal, c10::optional<double> scale, int64_t window_left,
                                                    bool return_lse, c10::string_view impl) {
    return guarded(q.device(), [&] {
        const TensorView qv = to_view(q, OP, "q"), kv = to_view(k, OP, "k"), vv = to_view(v, OP, "v");
        AttentionParams params;
        params.causal = causal;
        params.scale = resolve_scale(scale, OP);
        params.window_left = window_left;
        params.impl = parse_impl(std::string(impl));
        FP_CHECK(qv.ndim == 4, OP, ": q must be [batch, q_len, n_heads, head_dim], got ", qv.describe());
        // Every check runs before anything is allocated: plan against outputs that alias q (never written).
        const std::array<int64_t, 3> lse_shape{qv.dim(0), qv.dim(2), qv.dim(1)};
        TensorView out_plan = TensorView(qv.data, qv.dtype, {qv.dim(0), qv.dim(1), qv.dim(2), qv.dim(3)}, qv.device);
        TensorView lse_plan = TensorView(qv.data, DType::F32, {lse_shape[0], lse_shape[1], lse_shape[2]}, qv.device);
        plan_attention(out_plan, qv, kv, vv, return_lse ? &lse_plan : nullptr, params);

        at::Tensor out = at::empty(q.sizes(), q.options().memory_format(at::MemoryFormat::Contiguous));
        at::Tensor lse =
            at::empty(return_lse ? at::IntArrayRef(lse_shape) : at::IntArrayRef{0}, q.options().dtype(at::kFloat));
        if (out.numel() == 0) return std::make_tuple(out, lse);
        if (kv.dim(1) == 0) {  // no key anywhere: every row is zeros with an LSE of -inf (attention.h)
            out.zero_();
            lse.fill_(-std::numeric_limits<float>::infinity());
            return std::make_tuple(out, lse);
        }
        const TensorView out_v = to_view(out, OP, "out");
        const TensorView lse_v = return_lse ? to_view(lse, OP, "lse") : TensorView();
        attention(out_v, qv, kv, vv, return_lse ? &lse_v : nullptr, params, current_stream(q.device()));
        return std::make_tuple(out, lse);
    });
}

std::tuple<at::Tensor, at::Tensor> attention_meta(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool,
                                                  c10::optional<double>, int64_t, bool return_lse, c10::string_view) {
    return guarded(c10::Device(c10::kCPU), [&] {
        check_meta(OP, {{"q", &q}, {"k", &k}, {"v", &v}}, 4);
        at::Tensor out = meta_empty(meta_sizes(q), q.options());
        const std::vector<MetaSize> lse_shape =
            return_lse ? std::vector<MetaSize>{meta_size(q, 0), meta_size(q, 2), meta_size(q, 1)}
                       : std::vector<MetaSize>{0};
        return std::make_tuple(out, meta_empty(lse_shape, q.options().dtype(at::kFloat)));
    });
}

std::tuple<at::Tensor, at::Tensor> attention_autograd(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                      bool causal, c10::optional<double> scale, int64_t window_left,
                                                      bool return_lse, c10::string_view impl) {
    refuse_grad(OP, {&q, &k, &v});
    return call_below_autograd<Fn>("flashport::attention", q, k, v, causal, scale, window_left, return_lse, impl);
}

}  // namespace
}  // namespace flashport::torch_ext

using namespace flashport::torch_ext;
TORCH_LIBRARY_IMPL(flashport, CPU, m) {
    m.impl("attention", attention_device);
}
#ifdef FLASHPORT_TORCH_GPU
TORCH_LIBRARY_IMPL(flashport, CUDA, m) {
    m.impl("attention", attention_device);
}
#endif
TORCH_LIBRARY_IMPL(flashport, Meta, m) {
    m.impl("attention", attention_meta);
}
TORCH_LIBRARY_IMPL(flashport, Autograd, m) {
    m.impl("attention", attention_autograd);
}
