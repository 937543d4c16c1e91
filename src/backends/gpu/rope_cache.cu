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
// v rows only), then each thread rotates or copies one (row, pair) at a time, or, from 16 tokens with
// aligned rows, VEC neighbouring pairs through vector loads. Decode is latency-bound (a few µs of
// work on an idle GPU), so for few tokens the groups are small, one pair per thread:
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

struct RopeCacheArgs : RopeCacheTarget {
    char* q;
    char* k;
    const char* v;
    int64_t q_stride[2], k_stride[2], v_stride[2];  // bytes: (token, head)
    DType dtype;
    int esize;
    int64_t tokens;
    int heads_per_block, groups;
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

// Elements i .. i+VEC-1 and i+half .. i+half+VEC-1 of a row, copied as stored (raw bits, as copy_pair).
__device__ __forceinline__ void copy_pairs_vec(char* dst, const char* src, int esize, int i, int half) {
    if (esize == 4) {
        reinterpret_cast<uint4*>(dst)[i / VEC] = reinterpret_cast<const uint4*>(src)[i / VEC];
        reinterpret_cast<uint4*>(dst)[(i + half) / VEC] = reinterpret_cast<const uint4*>(src)[(i + half) / VEC];
    } else {
        reinterpret_cast<uint2*>(dst)[i / VEC] = reinterpret_cast<const uint2*>(src)[i / VEC];
        reinterpret_cast<uint2*>(dst)[(i + half) / VEC] = reinterpret_cast<const uint2*>(src)[(i + half) / VEC];
    }
}

// P pairs a thread: 1 (element loads), or VEC (vector loads of VEC neighbouring pairs: half a multiple
// of VEC and every row aligned for them). Four times the bytes in flight per load: a 2048-token
// prefill's q, k, v (Qwen2.5-7B, 44 MB moved) took ~60 µs with one 2-byte element a thread.
template <int P>
__global__ void __launch_bounds__(THREADS) rope_qk_cache_write_kernel(const RopeCacheArgs a) {
    FP_DYNAMIC_SHARED(float, cs);  // c[half], then s[half], of the current token
    wait_for_prior_grid();  // launched dependent (launch_dependent): nothing read before this
    allow_next_grid();
    const float* c = cs;
    const float* s = cs + a.half;
    const DType dt = a.dtype;
    const int rotated = a.n_heads + a.n_kv_heads, rows = rotated + a.n_kv_heads;
    const int row_units = a.half / P;
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
        const int units = (last - first) * row_units;
        for (int e = int(threadIdx.x); e < units; e += THREADS) {
            const int r = first + e / row_units, i = (e % row_units) * P;
            if (r >= rotated) {  // v head h: to the cache as it is
                const int h = r - rotated;
                if (cached) {
                    char* dst = a.v_cache + vc_off + h * a.vc_stride[2];
                    const char* src = a.v + t * a.v_stride[0] + h * a.v_stride[1];
                    if constexpr (P == 1)
                        copy_pair(dst, src, a.esize, i, a.half);
                    else
                        copy_pairs_vec(dst, src, a.esize, i, a.half);
                }
                continue;
            }
            const bool is_q = r < a.n_heads;
            const int h = is_q ? r : r - a.n_heads;
            char* row =
                is_q ? a.q + t * a.q_stride[0] + h * a.q_stride[1] : a.k + t * a.k_stride[0] + h * a.k_stride[1];
            float x1[P], x2[P], o1[P], o2[P];
            if constexpr (P == 1) {
                x1[0] = load(row, dt, i);
                x2[0] = load(row, dt, i + a.half);
            } else {
                load_vec(row, dt, i, x1);
                load_vec(row, dt, i + a.half, x2);
            }
#pragma unroll
            for (int j = 0; j < P; ++j) rope_rotate(dt, x1[j], x2[j], c[i + j], s[i + j], bad, o1[j], o2[j]);
            // The k row to the cache gets what is stored to k, through the same conversion: the same bits.
            char* kc = !is_q && cached ? a.k_cache + kc_off + h * a.kc_stride[2] : nullptr;
            if constexpr (P == 1) {
                store(row, dt, i, o1[0]);
                store(row, dt, i + a.half, o2[0]);
                if (kc) {
                    store(kc, dt, i, o1[0]);
                    store(kc, dt, i + a.half, o2[0]);
                }
            } else {
                store_vec(row, dt, i, o1);
                store_vec(row, dt, i + a.half, o2);
                if (kc) {
                    store_vec(kc, dt, i, o1);
                    store_vec(kc, dt, i + a.half, o2);
                }
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
    if (tokens == 0 || rows == 0) return;
    RopeCacheArgs a{};
    static_cast<RopeCacheTarget&>(a) =
        rope_cache_target(k_cache, v_cache, positions, slots, n_heads, n_kv_heads, theta);
    a.q = static_cast<char*>(q.data);
    a.k = static_cast<char*>(k.data);
    a.v = static_cast<const char*>(v.data);
    copy_strides(a.q_stride, &q, es);
    copy_strides(a.k_stride, &k, es);
    copy_strides(a.v_stride, &v, es);
    a.dtype = k.dtype;
    a.esize = int(es);
    a.tokens = tokens;
    // Groups of at least one pair per thread; as many as keep ~4 items per SM busy, at most one per
    // smallest group (see the file comment).
    const int64_t min_rows = std::max<int64_t>(1, THREADS / a.half);
    const int64_t max_groups = ceil_div(rows, min_rows);
    const int64_t want = ceil_div(4 * int64_t(current_device_info().sm_count), tokens);
    const int64_t groups = std::clamp<int64_t>(want, 1, max_groups);
    a.heads_per_block = int(ceil_div(rows, groups));
    a.groups = int(ceil_div(rows, a.heads_per_block));
    const size_t smem = 2 * size_t(a.half) * sizeof(float);
    // Vector pairs when every row (and the cache rows) can be read VEC elements at a time: byte strides
    // and bases multiples of VEC elements. A decode token keeps one pair a thread (more blocks, less
    // latency: its cost is the launch, not the bytes).
    const int64_t vbytes = VEC * es;
    bool vector = a.half % VEC == 0 && tokens >= 16;
    for (const void* p : {q.data, k.data, v.data, k_cache.data, v_cache.data})
        vector = vector && reinterpret_cast<uintptr_t>(p) % uintptr_t(vbytes) == 0;
    for (const int64_t st : {a.q_stride[0], a.q_stride[1], a.k_stride[0], a.k_stride[1], a.v_stride[0], a.v_stride[1],
                             a.kc_stride[0], a.kc_stride[1], a.kc_stride[2], a.vc_stride[0], a.vc_stride[1],
                             a.vc_stride[2]})
        vector = vector && st % vbytes == 0;
    const auto kernel = vector ? rope_qk_cache_write_kernel<VEC> : rope_qk_cache_write_kernel<1>;
    launch_dependent(kernel, grid_size(tokens * a.groups), THREADS, smem, as_stream(stream), a);
    FP_GPU_CHECK_LAUNCH("rope_qk_cache_write_kernel");
}

}  // namespace flashport::gpu
