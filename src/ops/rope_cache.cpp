// rope_qk_cache_write (flashport/paged_cache.h): rope's and paged_cache_write's checks, then the CPU
// composition of their kernels (the reference) or the fused GPU kernel (backends/gpu/rope_cache.cu).
#include "backends/cpu/ops_cpu.h"
#include "backends/cpu/paged_attention.h"
#include "flashport/error.h"
#include "flashport/paged_cache.h"
#include "ops/op_checks.h"
#ifdef FLASHPORT_GPU
#include "backends/gpu/paged_cache.h"
#endif

namespace flashport {

namespace ops_detail {

RopeCacheViews check_rope_qk_cache_write(const char* op, const TensorView& q, const TensorView& k, const TensorView& v,
                                         const IndexView& positions, const RopeParams& params,
                                         const TensorView& k_cache, const TensorView& v_cache, const IndexView& slots) {
    // k, v and the caches (the slots' values too, on the CPU), then q against k, then rope's checks of
    // q and k (the positions' count and device; on the CPU their values).
    check_paged_cache_write(op, k_cache, v_cache, k, v, slots);
    check_view(op, "q", q, 3);
    check_shape(op, "q", "[tokens, n_heads, head_dim] (k's tokens and head_dim)", q, {k.dim(0), q.dim(1), k.dim(2)});
    FP_CHECK(q.dtype == k.dtype, op, ": q must have k's dtype (", dtype_name(k.dtype), "), got ", q.describe());
    check_device(op, k, {&q});
    // In sequence, the calls would rotate a shared row twice or cache v after k's rotation; fused, the
    // rows are read and written at once.
    FP_CHECK(q.data != k.data && q.data != v.data && k.data != v.data, op,
             ": q, k and v must be distinct tensors (q and k are rotated in place, v is cached as it is)");
    RopeCacheViews views{check_rope(op, "q", q, "q", q, positions, params),
                         check_rope(op, "k", k, "k", k, positions, params)};
    // On a GPU positions and slots are device memory: the kernel handles bad ones (see the header).
    if (!views.k.gpu && k.dim(0) > 0) check_rope_positions(op, positions);
    return views;
}

}  // namespace ops_detail

void rope_qk_cache_write(const TensorView& q, const TensorView& k, const TensorView& v, const IndexView& positions,
                         const RopeParams& params, const TensorView& k_cache, const TensorView& v_cache,
                         const IndexView& slots, void* stream) {
    const ops_detail::RopeCacheViews views = ops_detail::check_rope_qk_cache_write(
        "rope_qk_cache_write", q, k, v, positions, params, k_cache, v_cache, slots);
    if (k.dim(0) == 0) return;
    if (views.k.gpu) {
#ifdef FLASHPORT_GPU
        gpu::rope_qk_cache_write(q, k, v, positions, params.theta, k_cache, v_cache, slots, stream);
#endif
        return;
    }
    (void)stream;  // the CPU kernels run on the calling thread
    cpu::rope(views.q.out, views.q.x, positions, params.theta);
    cpu::rope(views.k.out, views.k.x, positions, params.theta);
    cpu::paged_cache_write(k_cache, v_cache, k, v, slots);
}

}  // namespace flashport
