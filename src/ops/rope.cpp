// rope: validation, and the view reshaping that lets the kernel see [tokens..., n_heads, head_dim].
#include <cmath>

#include "backends/cpu/ops_cpu.h"
#include "flashport/ops.h"
#include "ops/op_checks.h"
#ifdef FLASHPORT_GPU
#include "backends/gpu/ops_gpu.h"
#endif

namespace flashport {
namespace {

// Positions become fp32 in transformers (position_ids.float()); beyond 2^24 they would round.
constexpr int64_t MAX_POSITION = int64_t(1) << 24;

// [tokens, n_heads * head_dim] with packed heads -> [tokens, n_heads, head_dim] (no data moves).
TensorView split_heads(const TensorView& t, int64_t head_dim) {
    TensorView v = t;
    v.ndim = 3;
    v.shape = {t.shape[0], t.shape[1] / head_dim, head_dim, 0};
    v.stride = {t.stride[0], head_dim, 1, 0};
    return v;
}

}  // namespace

void rope(const TensorView& out, const TensorView& x, const IndexView& positions, const RopeParams& params,
          void* stream) {
    using namespace ops_detail;
    check_view("rope", "x", x);
    check_view("rope", "out", out);
    check_same_shape("rope", "out", out, "x", x);
    FP_CHECK(x.ndim >= 2, "rope: x must be [tokens, n_heads, head_dim], [batch, len, n_heads, head_dim] or ",
             "[tokens, n_heads * head_dim] with params.head_dim set, got ", x.describe());
    FP_CHECK(std::isfinite(params.theta) && params.theta > 1.0, "rope: theta must be finite and > 1, got ",
             params.theta);
    const bool gpu = check_device("rope", x, {&out});
    check_indices("rope", "positions", positions, x.device);

    TensorView xv = x, ov = out;
    const int64_t last = x.shape[size_t(x.ndim - 1)];
    if (params.head_dim != 0) {
        FP_CHECK(params.head_dim > 0 && last % params.head_dim == 0, "rope: params.head_dim (", params.head_dim,
                 ") must divide x's last dimension (", last, ")");
        if (params.head_dim != last) {
            FP_CHECK(x.ndim == 2, "rope: packed heads (params.head_dim ", params.head_dim,
                     " < last dimension ", last, ") need a 2-D x [tokens, n_heads * head_dim], got ", x.describe());
            xv = split_heads(x, params.head_dim);
            ov = split_heads(out, params.head_dim);
        }
    }
    if (xv.ndim == 2) {  // [tokens, head_dim]: one head
        xv = split_heads(xv, last);
        ov = split_heads(ov, last);
    }
    const int64_t head_dim = xv.shape[size_t(xv.ndim - 1)];
    FP_CHECK(head_dim >= 2 && head_dim % 2 == 0, "rope: head_dim must be even (rotate_half splits it in two), got ",
             head_dim);
    const int64_t tokens = cpu::Rows(xv, 2).count();
    FP_CHECK(positions.size == tokens, "rope: positions must have one entry per token (", tokens, " for ",
             x.describe(), "), got ", positions.size);
    if (gpu) {  // positions in device memory: the kernel checks them and writes NaN rows for bad ones
#ifdef FLASHPORT_GPU
        gpu::rope(ov, xv, positions, params.theta, stream);
#endif
        return;
    }
    for (int64_t i = 0; i < positions.size; ++i) {
        const int64_t p = positions[i];
        FP_CHECK(p >= 0 && p < MAX_POSITION, "rope: position ", p, " at index ", i, " is outside [0, 2^24) ",
                 "(positions are exact in fp32 only up to 2^24)");
    }
    (void)stream;  // the CPU kernels run on the calling thread
    cpu::rope(ov, xv, positions, params.theta);
}

}  // namespace flashport
