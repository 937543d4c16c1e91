// What the three op families of the PyTorch extension share: at::Tensor -> flashport::TensorView
// (strides kept, so a transposed [batch, heads, seq, dim] view reaches the kernel without a copy),
// the device and stream of a call, and the translation of C++ errors into Python exceptions.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DeviceGuard.h>
#include <torch/version.h>

#include <exception>
#include <string>
#include <utility>

#include "flashport/error.h"
#include "flashport/tensor.h"

namespace flashport::torch_ext {

// Raise Python's ValueError (c10::ValueError: a request flashport refuses) or RuntimeError
// (c10::Error: anything else) carrying `message`.
[[noreturn]] void throw_value_error(const std::string& message);
[[noreturn]] void throw_runtime_error(const std::string& message);

// The flashport dtype of a floating tensor; anything else is a ValueError naming `op` and `name`.
DType to_dtype(const at::Tensor& t, const char* op, const char* name);

// A view of `t` with its sizes and strides (in elements), no copy. `t` must have 1 to 4 dimensions and
// live on the CPU or, in a GPU build, on a CUDA/HIP device. An empty tensor gets a placeholder data
// pointer (flashport refuses null ones; a view with no elements is never read).
TensorView to_view(const at::Tensor& t, const char* op, const char* name);

// The int32 index tensor (cu_seqlens, block_table, seq_lens) as a pointer: 1-D or 2-D, contiguous,
// int32, on `device` (flashport reads it through a plain pointer).
const int32_t* to_index(const at::Tensor& t, const char* op, const char* name, int ndim, c10::Device device);

// The flashport device of a torch device: the CPU, or in a GPU build (FLASHPORT_TORCH_GPU) a CUDA/HIP
// device (HIP torch calls its devices "cuda" too). Anything else is a ValueError. (device.cpp)
Device to_device(c10::Device device, const char* op, const char* name);

// The current stream of `device` (cudaStream_t / hipStream_t as void*), null on the CPU. The kernels are
// enqueued on it, as every ATen op on that device would be. (device.cpp)
void* current_stream(c10::Device device);

// "CPU only", "CPU and CUDA" or "CPU and HIP": what this build serves (the ops' messages, flashport.build()).
const char* gpu_build_name();

// Runs `body` with `device` current (a no-op on the CPU) and maps C++ exceptions to Python ones:
// flashport::Error -> ValueError (the planners refuse bad requests before any work), c10::Error as it
// is, any other std::exception -> RuntimeError with its message. The interpreter never sees a crash.
template <typename Body>
auto guarded(c10::Device device, Body&& body) -> decltype(body()) {
    c10::OptionalDeviceGuard guard;
    if (!device.is_cpu()) guard.reset_device(device);
    try {
        return std::forward<Body>(body)();
    } catch (const c10::Error&) {
        throw;
    } catch (const Error& e) {
        throw_value_error(e.what());
    } catch (const std::exception& e) {
        throw_runtime_error(std::string("flashport: ") + e.what());
    }
}

// The optional scale as flashport takes it (0 selects 1/sqrt(head_dim)); an explicit 0 would silently
// become that default, so it is refused.
float resolve_scale(const c10::optional<double>& scale, const char* op);

// The Autograd-key kernels: flashport has no backward, so a call that would need one (grad mode on and an
// input that requires grad) is refused with NotImplementedError; any other call goes on to the device
// kernel below autograd. `op` names the function in the message.
void refuse_grad(const char* op, std::initializer_list<const at::Tensor*> inputs);

// Sizes for the Meta kernels: symbolic on torch >= 2 (torch.compile with dynamic shapes traces them), plain
// integers on torch 1.x, which has no SymInt-aware factory functions.
#if TORCH_VERSION_MAJOR >= 2
using MetaSize = c10::SymInt;
inline MetaSize meta_size(const at::Tensor& t, int64_t d) {
    return t.sym_size(d);
}
inline at::Tensor meta_empty(const std::vector<MetaSize>& sizes, const at::TensorOptions& options) {
    return at::empty_symint(sizes, options);
}
#else
using MetaSize = int64_t;
inline MetaSize meta_size(const at::Tensor& t, int64_t d) {
    return t.size(d);
}
inline at::Tensor meta_empty(const std::vector<MetaSize>& sizes, const at::TensorOptions& options) {
    return at::empty(sizes, options);
}
#endif

inline std::vector<MetaSize> meta_sizes(const at::Tensor& t) {
    std::vector<MetaSize> sizes;
    for (int64_t d = 0; d < t.dim(); ++d) sizes.push_back(meta_size(t, d));
    return sizes;
}

// The checks a Meta kernel can make without values: ranks, one floating dtype, one device. The shapes
// themselves are checked by the device kernels' planners.
void check_meta(const char* op, std::initializer_list<std::pair<const char*, const at::Tensor*>> tensors, int ndim);

// Redispatches `name` (e.g. "flashport::attention") below autograd with the same arguments.
template <typename Fn, typename... Args>
auto call_below_autograd(const char* name, Args&&... args) {
    at::AutoDispatchBelowADInplaceOrView below;
    static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name, "").template typed<Fn>();
    return op.call(std::forward<Args>(args)...);
}

}  // namespace flashport::torch_ext
