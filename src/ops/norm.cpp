// rms_norm and add_rms_norm: validation and dispatch. The arithmetic (and why its casts sit where
// they do) is in flashport/ops.h and backends/cpu/norm.cpp.
#include <cmath>

#include "backends/cpu/ops_cpu.h"
#include "flashport/ops.h"
#include "ops/op_checks.h"
#ifdef FLASHPORT_GPU
#include "backends/gpu/ops_gpu.h"
#endif

namespace flashport {
namespace {

// The checks of rms_norm(out, x, weight, eps), with `op` naming the caller in messages.
void check_norm(const char* op, const TensorView& out, const TensorView& x, const TensorView& weight, float eps) {
    using namespace ops_detail;
    check_view(op, "x", x);
    check_view(op, "out", out);
    check_view(op, "weight", weight, 1);
    check_same_shape(op, "out", out, "x", x);
    const int64_t dim = x.shape[size_t(x.ndim - 1)];
    FP_CHECK(dim >= 1, op, ": the normalised (last) dimension must be at least 1, got ", x.describe());
    FP_CHECK(weight.dim(0) == dim, op, ": weight must be [dim] = [", dim, "] (x's last dimension), got ",
             weight.describe());
    FP_CHECK(std::isfinite(eps) && eps >= 0.0f, op, ": eps must be finite and >= 0, got ", eps);
}

}  // namespace

void rms_norm(const TensorView& out, const TensorView& x, const TensorView& weight, float eps, void* stream) {
    check_norm("rms_norm", out, x, weight, eps);
    if (ops_detail::check_device("rms_norm", x, {&out, &weight})) {
#ifdef FLASHPORT_GPU
        gpu::rms_norm(out, nullptr, x, nullptr, weight, eps, stream);
#endif
        return;
    }
    (void)stream;  // the CPU kernels run on the calling thread
    cpu::rms_norm(out, x, weight, eps);
}

void add_rms_norm(const TensorView& out, const TensorView& residual_out, const TensorView& x,
                  const TensorView& residual, const TensorView& weight, float eps, void* stream) {
    using namespace ops_detail;
    const char* op = "add_rms_norm";
    check_norm(op, out, x, weight, eps);
    check_view(op, "residual", residual);
    check_view(op, "residual_out", residual_out);
    check_same_shape(op, "residual", residual, "x", x);
    check_same_shape(op, "residual_out", residual_out, "x", x);
    FP_CHECK(out.data != residual_out.data, op,
             ": out must not be residual_out (the normalised row would overwrite the sum it is read from)");
    if (check_device(op, x, {&residual, &residual_out, &out, &weight})) {
#ifdef FLASHPORT_GPU
        gpu::rms_norm(out, &residual_out, x, &residual, weight, eps, stream);
#endif
        return;
    }
    // The definition itself: the CPU kernels are row-parallel and cache-friendly enough that fusing
    // would save one pass over a row still in cache.
    (void)stream;  // the CPU kernels run on the calling thread
    cpu::add(residual_out, x, residual);
    cpu::rms_norm(out, residual_out, weight, eps);
}

}  // namespace flashport
