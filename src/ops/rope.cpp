// rope: validation, and the view reshaping that lets the kernel see [tokens..., n_heads, head_dim].
// The checks are also rope_qk_cache_write's (ops/rope_cache.cpp), hence check_rope (op_checks.h).
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

}  // namespace

namespace ops_detail {

RopeViews check_rope(const char* op, const char* out_name, const TensorView& out, const char* x_name,
                     const TensorView& x, const IndexView& positions, const RopeParams& params) {
    check_view(op, x_name, x);
    check_view(op, out_name, out);
    check_same_shape(op, out_name, out, x_name, x);
    FP_CHECK(x.ndim >= 2, op, ": ", x_name, " must be [tokens, n_heads, head_dim], [batch, len, n_heads, head_dim] or ",
             "[tokens, n_heads * head_dim] with params.head_dim set, got ", x.describe());
    FP_CHECK(std::isfinite(params.theta) && params.theta > 1.0, op, ": theta must be finite and > 1, got ",
             params.theta);
    RopeViews r{out, x, check_device(op, x, {&out})};
    check_indices(op, "positions", positions, x.device);

    const int64_t last = x.shape[size_t(x.ndim - 1)];
    if (params.head_dim != 0) {
        FP_CHECK(params.head_dim > 0 && last % params.head_dim == 0, op, ": params.head_dim (", params.head_dim,
                 ") must divide ", x_name, "'s last dimension (", last, ")");
        if (params.head_dim != last) {
            FP_CHECK(x.ndim == 2, op, ": packed heads (params.head_dim ", params.head_dim, " < last dimension ", last,
                     ") need a 2-D ", x_name, " [tokens, n_heads * head_dim], got ", x.describe());
            r.x = x.split_heads(params.head_dim);
            r.out = out.split_heads(params.head_dim);
        }
    }
    if (r.x.ndim == 2 && last > 0) {  // [tokens, head_dim]: one head (an empty one fails the check below)
        r.x = r.x.split_heads(last);
        r.out = r.out.split_heads(last);
    }
    const int64_t head_dim = r.x.shape[size_t(r.x.ndim - 1)];
    FP_CHECK(head_dim >= 2 && head_dim % 2 == 0, op, ": head_dim must be even (rotate_half splits it in two), got ",
             head_dim);
    const int64_t tokens = cpu::Rows(r.x, 2).count();
    FP_CHECK(positions.size == tokens, op, ": positions must have one entry per token (", tokens, " for ", x.describe(),
             "), got ", positions.size);
    return r;
}

void check_rope_positions(const char* op, const IndexView& positions) {
    for (int64_t i = 0; i < positions.size; ++i) {
        const int64_t p = positions[i];
        FP_CHECK(p >= 0 && p < MAX_POSITION, op, ": position ", p, " at index ", i, " is outside [0, 2^24) ",
                 "(positions are exact in fp32 only up to 2^24)");
    }
}

}  // namespace ops_detail

void rope(const TensorView& out, const TensorView& x, const IndexView& positions, const RopeParams& params,
          void* stream) {
    using namespace ops_detail;
    const RopeViews r = check_rope("rope", "out", out, "x", x, positions, params);
    if (r.gpu) {  // positions in device memory: the kernel checks them and writes NaN rows for bad ones
#ifdef FLASHPORT_GPU
        gpu::rope(r.out, r.x, positions, params.theta, stream);
#endif
        return;
    }
    check_rope_positions("rope", positions);
    (void)stream;  // the CPU kernels run on the calling thread
    cpu::rope(r.out, r.x, positions, params.theta);
}

}  // namespace flashport
