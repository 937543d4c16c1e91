// rope_qk_cache_write on the GPU (flashport/paged_cache.h): RoPE on a token's q and k heads, in place,
// and its rotated k and its v copied into their paged-cache slot, in one launch. The same bits as
// rope (rope.cu) on q and k followed by paged_cache_write (paged_cache.cu): the arithmetic is
// rope.cuh's, the k row that goes to the cache is the value stored to k, and v is copied as raw
// elements (no conversion, so even NaN payloads survive).
//
// Layout: q [tokens, n_heads, head_dim], k, v [tokens, n_kv_heads, head_dim] (any token and head
// strides), caches [num_blocks, block_size, n_kv_heads, head_dim] (any outer strides); positions and
// slots on the GPU, one per token.
//
// Work split: a token's n_heads + 2·n_kv_heads rows (its q heads, then k heads, then v heads) are cut
// into `groups` groups of `heads_per_block` rows, and one block takes one (token, group) item
// (grid-stride). A block first computes the token's cos/sin into shared memory (skipped by a group of
// v rows only), then each thread rotates or copies one (row, pair) at a time. Decode is latency-bound
// (a few µs of work on an idle GPU), so for few tokens the groups are small, one pair per thread:
// Qwen2.5-7B's single decode token (28 + 2·4 rows of 64 pairs) is 18 blocks of 2 rows; with more
// tokens groups grow until ~4 items per SM, so the cos/sin (double precision) is computed fewer times
// per token.
//
// Bad metadata, as the unfused ops: a position outside [0, 2^24) makes the token's q and k rows NaN
// (and the NaN k row goes to its slot); a negative slot, or one past the cache, skips the token's
// cache rows.
#include <algorithm>

#include "backends/gpu/rope.cuh"
#include "backends/gpu/paged_cache.h"
#include "backends/gpu/view_strides.h"

namespace flashport::gpu {
namespace {

using namespace ops;

constexpr int THREADS = 128;

struct RopeCacheArgs {
    char* q;
    char* k;
    const char* v;
    char* k_cache;
    char* v_cache;
    int64_t q_stride[2], k_stride[2], v_stride[2];  // bytes: (token, head)
    int64_t kc_stride[3], vc_stride[3];             // bytes: (block, slot, head)
    const void* positions;
    const void* slots;
    bool positions_64, slots_64;
    DType dtype;
    int esize;
    int64_t tokens, capacity, block_size;
    int n_heads, n_kv_heads, half;
    int heads_per_block, groups;
    float inv_freq[ROPE_MAX_HALF];
};

// Elements i and i + half of a row, copied as stored.
__device__ __forceinline__ void copy_pair(char* dst, const char* src, int esize, int i, int half) {
    if (esize == 4) {
        reinterpret_cast<uint32_t*>(dst)[i] = reinterpret_cast<const uint32_t*>(src)[i];
        reinterpret_cast<uint32_t*>(dst)[i + half] = reinterpret_cast<const uint32_t*>(src)[i + half];
    } else {
        reinterpret_cast<uint16_t*>(dst)[i] = reinterpret_cast<const uint16_t*>(src)[i];
        reinterpret_cast<uint16_t*>(dst)[i + half] = reinterpret_cast<const uint16_t*>(src)[i + half];
    }
}

__global__ void __launch_bounds__(THREADS) rope_qk_cache_write_kernel(const RopeCacheArgs a) {
    FP_DYNAMIC_SHARED(float, cs);  // c[half], then s[half], of the current token
    wait_for_prior_grid();  // launched dependent (launch_dependent): nothing read before this
    allow_next_grid();
    const float* c = cs;
    const float* s = cs + a.half;
    const DType dt = a.dtype;
    const int rotated = a.n_heads + a.n_kv_heads, rows = rotated + a.n_kv_heads;
    for (int64_t item = blockIdx.x; item < a.tokens * a.groups; item += gridDim.x) {
        const int64_t t = item / a.groups;
        const int first = int(item % a.groups) * a.heads_per_block;
        const int last = min(first + a.heads_per_block, rows);
        const int64_t pos = load_index(a.positions, a.positions_64, t);
        const int64_t slot = load_index(a.slots, a.slots_64, t);
        const bool bad = rope_position_bad(pos);
        const bool cached = slot >= 0 && slot < a.capacity;  // else padding, or past the cache: skipped
        const int64_t kc_off = (slot / a.block_size) * a.kc_stride[0] + (slot % a.block_size) * a.kc_stride[1];
        const int64_t vc_off = (slot / a.block_size) * a.vc_stride[0] + (slot % a.block_size) * a.vc_stride[1];
        __syncthreads();        // the previous item's c, s are no longer read
        if (first < rotated) {  // uniform over the block: a group of v rows needs no table
            for (int j = int(threadIdx.x); j < 2 * a.half; j += THREADS) {
                const int i = j < a.half ? j : j - a.half;
                cs[j] = rope_cos_sin(dt, a.inv_freq[i], pos, j >= a.half);
            }
        }
        __syncthreads();
        const int pairs = (last - first) * a.half;
        for (int e = int(threadIdx.x); e < pairs; e += THREADS) {
            const int r = first + e / a.half, i = e % a.half;
            if (r >= rotated) {  // v head h: to the cache as it is
                const int h = r - rotated;
                if (cached)
                    copy_pair(a.v_cache + vc_off + h * a.vc_stride[2], a.v + t * a.v_stride[0] + h * a.v_stride[1],
                              a.esize, i, a.half);
                continue;
            }
            const bool is_q = r < a.n_heads;
            const int h = is_q ? r : r - a.n_heads;
            char* row =
                is_q ? a.q + t * a.q_stride[0] + h * a.q_stride[1] : a.k + t * a.k_stride[0] + h * a.k_stride[1];
            float o1, o2;
            rope_rotate(dt, load(row, dt, i), load(row, dt, i + a.half), c[i], s[i], bad, o1, o2);
            store(row, dt, i, o1);
            store(row, dt, i + a.half, o2);
            if (!is_q && cached) {  // the k row just stored, the same conversion: the same bits
                char* kc = a.k_cache + kc_off + h * a.kc_stride[2];
                store(kc, dt, i, o1);
                store(kc, dt, i + a.half, o2);
            }
        }
    }
}

}  // namespace

void rope_qk_cache_write(const TensorView& q, const TensorView& k, const TensorView& v, const IndexView& positions,
                         double theta, const TensorView& k_cache, const TensorView& v_cache, const IndexView& slots,
                         void* stream) {
    constexpr const char* OP = "rope_qk_cache_write";
    check_current_device(OP, k_cache.device);
    const int64_t n_heads = q.dim(1), n_kv_heads = k.dim(1), head_dim = k.dim(2), tokens = k.dim(0);
    const int64_t rows = n_heads + 2 * n_kv_heads;
    check_rope_limits(OP, rows, head_dim, q);
    const int64_t es = int64_t(dtype_size(k.dtype));
    RopeCacheArgs a{};
    a.q = static_cast<char*>(q.data);
    a.k = static_cast<char*>(k.data);
    a.v = static_cast<const char*>(v.data);
    a.k_cache = static_cast<char*>(k_cache.data);
    a.v_cache = static_cast<char*>(v_cache.data);
    copy_strides(a.q_stride, &q, es);
    copy_strides(a.k_stride, &k, es);
    copy_strides(a.v_stride, &v, es);
    copy_strides(a.kc_stride, &k_cache, es);
    copy_strides(a.vc_stride, &v_cache, es);
    a.positions = positions.data;
    a.slots = slots.data;
    a.positions_64 = positions.type == IndexView::Type::I64;
    a.slots_64 = slots.type == IndexView::Type::I64;
    a.dtype = k.dtype;
    a.esize = int(es);
    a.tokens = tokens;
    a.block_size = k_cache.dim(1);
    a.capacity = k_cache.dim(0) * a.block_size;
    a.n_heads = int(n_heads);
    a.n_kv_heads = int(n_kv_heads);
    a.half = int(head_dim / 2);
    if (tokens == 0 || rows == 0) return;
    rope_inv_freq(a.inv_freq, head_dim, theta);
    // Groups of at least one pair per thread; as many as keep ~4 items per SM busy, at most one per
    // smallest group (see the file comment).
    const int64_t min_rows = std::max<int64_t>(1, THREADS / a.half);
    const int64_t max_groups = ceil_div(rows, min_rows);
    const int64_t want = ceil_div(4 * int64_t(current_device_info().sm_count), tokens);
    const int64_t groups = std::clamp<int64_t>(want, 1, max_groups);
    a.heads_per_block = int(ceil_div(rows, groups));
    a.groups = int(ceil_div(rows, a.heads_per_block));
    const size_t smem = 2 * size_t(a.half) * sizeof(float);
    launch_dependent(rope_qk_cache_write_kernel, grid_size(tokens * a.groups), THREADS, smem, as_stream(stream), a);
    FP_GPU_CHECK_LAUNCH("rope_qk_cache_write_kernel");
}

}  // namespace flashport::gpu
