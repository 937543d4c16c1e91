// at::Tensor -> flashport::TensorView, and the error translation (tensor_view.h says why).
#include "tensor_view.h"

#include <cmath>
#include <type_traits>

namespace flashport::torch_ext {

namespace {

// c10's (message, backtrace) constructor keeps the Python message to flashport's own words, without the
// "Exception raised from ..." frame that its source-location constructor appends. The backtrace is a
// string up to torch 2.0 and a lazily computed value (a shared pointer, null for none) after.
template <class E>
[[noreturn]] void throw_plain(const std::string& message) {
    if constexpr (std::is_constructible_v<E, std::string, std::string>)
        throw E(message, std::string());
    else
        throw E(message, nullptr);
}

}  // namespace

void throw_value_error(const std::string& message) { throw_plain<c10::ValueError>(message); }
void throw_runtime_error(const std::string& message) { throw_plain<c10::Error>(message); }

DType to_dtype(const at::Tensor& t, const char* op, const char* name) {
    switch (t.scalar_type()) {
        case at::kFloat:
            return DType::F32;
        case at::kHalf:
            return DType::F16;
        case at::kBFloat16:
            return DType::BF16;
        default:
            throw_value_error(
                concat(op, ": ", name, " must be float32, float16 or bfloat16, got ", c10::toString(t.scalar_type())));
    }
}

TensorView to_view(const at::Tensor& t, const char* op, const char* name) {
    FP_CHECK(t.defined(), op, ": ", name, " is an undefined tensor");
    FP_CHECK(t.dim() >= 1 && t.dim() <= MAX_DIMS, op, ": ", name, " must have 1 to ", MAX_DIMS, " dimensions, got ",
             t.dim());
    TensorView view;
    view.dtype = to_dtype(t, op, name);
    view.device = to_device(t.device(), op, name);
    view.ndim = int(t.dim());
    for (int d = 0; d < view.ndim; ++d) {
        view.shape[size_t(d)] = t.size(d);
        view.stride[size_t(d)] = t.stride(d);
    }
    // data_ptr() includes the storage offset, so a narrowed or transposed view points at its first element.
    view.data = t.data_ptr();
    // Empty tensors may have no storage; flashport refuses null pointers, and reads nothing of an empty view.
    alignas(64) static char placeholder[64];
    if (view.data == nullptr && t.numel() == 0) view.data = placeholder;
    return view;
}

const int32_t* to_index(const at::Tensor& t, const char* op, const char* name, int ndim, c10::Device device) {
    FP_CHECK(t.defined(), op, ": ", name, " is an undefined tensor");
    FP_CHECK(t.scalar_type() == at::kInt, op, ": ", name, " must be int32, got ", c10::toString(t.scalar_type()));
    FP_CHECK(t.dim() == ndim, op, ": ", name, " must have ", ndim, " dimension", ndim == 1 ? "" : "s", ", got ",
             t.dim());
    FP_CHECK(t.is_contiguous(), op, ": ", name, " must be contiguous (it is read through a plain pointer)");
    FP_CHECK(t.device() == device, op, ": ", name, " must be on ", device.str(), " (the tensors' device), got ",
             t.device().str());
    return t.data_ptr<int32_t>();
}

float resolve_scale(const c10::optional<double>& scale, const char* op) {
    if (!scale) return 0.0f;
    const double s = *scale;
    FP_CHECK(std::isfinite(s) && s != 0.0, op, ": scale must be finite and nonzero, got ", s,
             " (pass None for 1/sqrt(head_dim))");
    return float(s);
}

void refuse_grad(const char* op, std::initializer_list<const at::Tensor*> inputs) {
    if (!at::GradMode::is_enabled()) return;
    for (const at::Tensor* t : inputs)
        if (t->defined() && t->requires_grad())
            throw_plain<c10::NotImplementedError>(
                concat("flashport.", op, ": backward is not implemented; call it under torch.no_grad() or ",
                       "torch.inference_mode(), or pass tensors that do not require grad"));
}

void check_meta(const char* op, std::initializer_list<std::pair<const char*, const at::Tensor*>> tensors, int ndim) {
    const at::Tensor& first = *tensors.begin()->second;
    for (const auto& [name, t] : tensors) {
        FP_CHECK(t->dim() == ndim, op, ": ", name, " must have ", ndim, " dimensions, got ", t->dim());
        to_dtype(*t, op, name);
        FP_CHECK(t->scalar_type() == first.scalar_type(), op, ": ", tensors.begin()->first, " and ", name,
                 " must share one dtype, got ", c10::toString(first.scalar_type()), " and ",
                 c10::toString(t->scalar_type()));
        FP_CHECK(t->device() == first.device(), op, ": all tensors must be on one device, got ", first.device().str(),
                 " and ", t->device().str());
    }
}

}  // namespace flashport::torch_ext
