// paged_cache_write (flashport/paged_cache.h): validation and dispatch. The checks are also
// rope_qk_cache_write's (ops/rope_cache.cpp), hence check_paged_cache_write (op_checks.h).
#include "flashport/paged_cache.h"

#include "backends/cpu/paged_attention.h"
#include "flashport/error.h"
#include "ops/op_checks.h"
#ifdef FLASHPORT_GPU
#include "backends/gpu/paged_cache.h"
#endif

namespace flashport {

namespace ops_detail {

void check_paged_cache_write(const char* op, const TensorView& k_cache, const TensorView& v_cache, const TensorView& k,
                             const TensorView& v, const IndexView& slots) {
    check_view(op, "k_cache", k_cache, 4);
    check_view(op, "v_cache", v_cache, 4);
    check_view(op, "k", k, 3);
    check_view(op, "v", v, 3);
    const int64_t blocks = k_cache.dim(0), block_size = k_cache.dim(1), heads = k_cache.dim(2), d = k_cache.dim(3);
    check_shape(op, "v_cache", "[num_blocks, block_size, n_kv_heads, head_dim] (like k_cache)", v_cache,
                {blocks, block_size, heads, d});
    const int64_t tokens = k.dim(0);
    check_shape(op, "k", "[tokens, n_kv_heads, head_dim] (the cache's heads and head_dim)", k, {tokens, heads, d});
    check_shape(op, "v", "[tokens, n_kv_heads, head_dim] (like k)", v, {tokens, heads, d});
    FP_CHECK(k.dtype == k_cache.dtype && v.dtype == k_cache.dtype && v_cache.dtype == k_cache.dtype, op,
             ": k, v and the caches must share one dtype, got k ", dtype_name(k.dtype), ", v ", dtype_name(v.dtype),
             ", k_cache ", dtype_name(k_cache.dtype), ", v_cache ", dtype_name(v_cache.dtype));
    FP_CHECK(slots.size == tokens, op, ": slots must hold one entry per token (", tokens, "), got ", slots.size);
    FP_CHECK(tokens == 0 || slots.data, op, ": slots has no data (null pointer)");
    for (const TensorView* t : {&v_cache, &k, &v})
        FP_CHECK(t->device == k_cache.device, op, ": the tensors must be on one device, got k_cache on ",
                 k_cache.device.name(), " and ", t->describe());
    FP_CHECK(slots.device == k_cache.device, op, ": slots are on ", slots.device.name(), ", the caches on ",
             k_cache.device.name());
    if (!k_cache.device.is_cpu()) return;
    const int64_t capacity = blocks * block_size;
    for (int64_t t = 0; t < tokens; ++t) {
        const int64_t slot = slots[t];  // negative: padding, skipped
        FP_CHECK(slot < capacity, op, ": slots[", t, "] = ", slot, " is past the cache's ", capacity,
                 " slots (num_blocks · block_size)");
    }
}

}  // namespace ops_detail

void paged_cache_write(const TensorView& k_cache, const TensorView& v_cache, const TensorView& k, const TensorView& v,
                       const IndexView& slots, void* stream) {
    constexpr const char* OP = "paged_cache_write";
    ops_detail::check_paged_cache_write(OP, k_cache, v_cache, k, v, slots);
    if (k.dim(0) == 0) return;
    if (k_cache.device.is_cpu()) {
        cpu::paged_cache_write(k_cache, v_cache, k, v, slots);
        return;
    }
#ifdef FLASHPORT_GPU
    gpu::paged_cache_write(k_cache, v_cache, k, v, slots, stream);
#else
    (void)stream;
    fail(OP, " on ", k_cache.device.name(), " needs a GPU build; configure with --preset cuda or --preset hip");
#endif
}

}  // namespace flashport
