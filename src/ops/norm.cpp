// rms_norm: validation and dispatch. The arithmetic (and why its casts sit where they do) is in
// flashport/ops.h and backends/cpu/norm.cpp.
#include <cmath>

#include "backends/cpu/ops_cpu.h"
#include "flashport/ops.h"
#include "ops/op_checks.h"

namespace flashport {

void rms_norm(const TensorView& out, const TensorView& x, const TensorView& weight, float eps) {
    using namespace ops_detail;
    check_view("rms_norm", "x", x);
    check_view("rms_norm", "out", out);
    check_view("rms_norm", "weight", weight, 1);
    check_same_shape("rms_norm", "out", out, "x", x);
    const int64_t dim = x.shape[size_t(x.ndim - 1)];
    FP_CHECK(dim >= 1, "rms_norm: the normalised (last) dimension must be at least 1, got ", x.describe());
    FP_CHECK(weight.dim(0) == dim, "rms_norm: weight must be [dim] = [", dim, "] (x's last dimension), got ",
             weight.describe());
    FP_CHECK(std::isfinite(eps) && eps >= 0.0f, "rms_norm: eps must be finite and >= 0, got ", eps);
    check_device("rms_norm", x, {&out, &weight});
    cpu::rms_norm(out, x, weight, eps);
}

}  // namespace flashport
