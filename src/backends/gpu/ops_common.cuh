// Shared by the GPU kernels of the non-attention ops (ops_*.cu): views flattened into rows, element
// access with the dtype as a run-time value, 4-wide vector access where alignment allows, and the
// rounding helpers that reproduce the CPU kernels' rounding points.
//
// Why run-time dtypes: every op takes any mix of fp32/fp16/bf16 per tensor (flashport/ops.h), up to
// 27 combinations for a binary op. These kernels are bandwidth-bound and the dtype branches are uniform
// across the grid, so one kernel per op with the dtypes as arguments costs no measurable time and
// keeps the compile time and the binary flat.
#pragma once

#include <algorithm>
#include <initializer_list>

#include "backends/gpu/runtime.h"

namespace flashport::gpu::ops {

// Elements per vector access: 16 bytes of fp32, 8 of fp16/bf16.
constexpr int VEC = 4;

// A view as a kernel sees it: the outer dimensions (all but the last `inner`) flattened into a row
// index, as cpu::Rows does; row r's first element is at data + row_offset(r) elements.
struct RowView {
    char* data;
    DType dtype;
    int esize;    // bytes per element
    int n_outer;  // 0 to 3
    int64_t shape[3], stride[3];

    // Unrolled over the three slots with constant indices: a loop bounded by n_outer indexes the
    // arrays dynamically, and the compiler then copies the whole parameter block of every view into
    // each thread's local memory (216 bytes a thread for binary_kernel: more traffic than the data).
    __device__ __forceinline__ int64_t row_offset(int64_t r) const {
        int64_t off = 0;
#pragma unroll
        for (int d = 2; d >= 0; --d) {
            if (d < n_outer) {
                off += (r % shape[d]) * stride[d];
                r /= shape[d];
            }
        }
        return off;
    }
    __device__ __forceinline__ char* row(int64_t r) const { return data + row_offset(r) * esize; }
};

inline RowView row_view(const TensorView& t, int inner = 1) {
    RowView v{};
    v.data = static_cast<char*>(t.data);
    v.dtype = t.dtype;
    v.esize = int(dtype_size(t.dtype));
    v.n_outer = t.ndim - inner;
    for (int d = 0; d < v.n_outer; ++d) {
        v.shape[d] = t.shape[size_t(d)];
        v.stride[d] = t.stride[size_t(d)];
    }
    return v;
}

// Merges neighbouring dimensions that every view stores contiguously (dimension d is contiguous over
// d+1 when stride[d] == stride[d+1] · shape[d+1]), so contiguous tensors become one long row and a
// slice [rows, cols] of a wider buffer keeps exactly its two dimensions. The views share one shape.
// Sizes of 1 carry no information about layout: their strides are set so they always merge.
inline void merge_contiguous_dims(std::initializer_list<TensorView*> views) {
    TensorView& first = **views.begin();
    const int last = first.ndim - 1;
    for (TensorView* v : views) {
        if (v->shape[size_t(last)] <= 1) v->stride[size_t(last)] = 1;
        for (int d = last - 1; d >= 0; --d)
            if (v->shape[size_t(d)] == 1) v->stride[size_t(d)] = v->stride[size_t(d + 1)] * v->shape[size_t(d + 1)];
    }
    for (int d = first.ndim - 2; d >= 0; --d) {
        bool contiguous = true;
        for (const TensorView* v : views)
            contiguous = contiguous && v->stride[size_t(d)] == v->stride[size_t(d + 1)] * v->shape[size_t(d + 1)];
        if (!contiguous) continue;
        for (TensorView* v : views) {  // dimension d folds into d + 1, the dimensions before it shift in
            v->shape[size_t(d + 1)] *= v->shape[size_t(d)];
            for (int e = d; e + 1 < v->ndim; ++e) {
                v->shape[size_t(e)] = v->shape[size_t(e + 1)];
                v->stride[size_t(e)] = v->stride[size_t(e + 1)];
            }
            --v->ndim;
        }
    }
}

// True when the rows of `t` (along its last dimension) can be read n elements at a time with aligned
// vector loads (load_vec): a base aligned to the access (at most 16 bytes: wider runs are several
// 16-byte loads), and a row length and outer strides that are multiples of n.
inline bool vec_aligned(const TensorView& t, int n = VEC) {
    const int64_t bytes = std::min<int64_t>(16, n * int64_t(dtype_size(t.dtype)));
    if (reinterpret_cast<uintptr_t>(t.data) % uintptr_t(bytes) != 0) return false;
    if (t.shape[size_t(t.ndim - 1)] % n != 0) return false;
    for (int d = 0; d + 1 < t.ndim; ++d)
        if (t.shape[size_t(d)] > 1 && t.stride[size_t(d)] % n != 0) return false;
    return true;
}

// Grid dimensions are limited (65535 in y and z; HIP wants grid · block < 2^32 in x): kernels loop
// over anything beyond this many blocks.
constexpr int64_t MAX_BLOCKS = 65535;
inline unsigned grid_size(int64_t work_items) { return unsigned(std::clamp<int64_t>(work_items, 1, MAX_BLOCKS)); }

// Threads for a kernel that spreads one row over a block: enough for one vector per thread, whole
// warps on every target (MAX_WARP_SIZE), at most `max_threads`.
inline int threads_for_row(int64_t units, int max_threads) {
    return int(std::clamp<int64_t>(ceil_div(units, MAX_WARP_SIZE) * MAX_WARP_SIZE, MAX_WARP_SIZE, max_threads));
}

// ---- element access with a run-time dtype -------------------------------------------------------

__device__ __forceinline__ float load(const void* p, DType dt, int64_t i) {
    switch (dt) {
        case DType::F32: return static_cast<const float*>(p)[i];
        case DType::F16: return fp16_bits_to_float(static_cast<const uint16_t*>(p)[i]);
        default: return bf16_bits_to_float(static_cast<const uint16_t*>(p)[i]);
    }
}

__device__ __forceinline__ void store(void* p, DType dt, int64_t i, float v) {
    switch (dt) {
        case DType::F32: static_cast<float*>(p)[i] = v; return;
        case DType::F16: static_cast<uint16_t*>(p)[i] = float_to_fp16_bits(v); return;
        default: static_cast<uint16_t*>(p)[i] = float_to_bf16_bits(v); return;
    }
}

// v rounded to dt (and back to fp32): where the CPU kernels call round_to.
__device__ __forceinline__ float round_to_dtype(DType dt, float v) {
    switch (dt) {
        case DType::F32: return v;
        case DType::F16: return fp16_bits_to_float(float_to_fp16_bits(v));
        default: return bf16_bits_to_float(float_to_bf16_bits(v));
    }
}

// SwiGLU's product before its final rounding: round_gate(silu(g)) · u, silu(g) = g / (1 + exp(-g)).
// fp32 gates: exp in double, rounded to fp32, the correctly rounded expf that the CPU's glibc returns
// (activation.cu says why). 16-bit gates: CUDA's / HIP's expf (within 2 ulps of fp32), because silu is
// rounded to the gate's 8 or 11 mantissa bits next, which an fp32 ulp changes only at a rounding
// boundary (about 1 element in 2^14); the double exp made a prefill's SwiGLU compute-bound (0.24 ms
// for 2048 × 18944 elements on an H200, 4× its bytes' time). For the same reason 16-bit gates divide
// with __fdividef (2 ulps) instead of the IEEE division's refinement sequence, except where 1 + e
// passes 2^126 (g < -87), where __fdividef returns 0 and silu(g) is still a normal bf16 number.
// Shared by swiglu and the GEMV's SwiGLU epilogue (linear.cu).
__device__ __forceinline__ float silu_times(DType gate_dtype, float g, float u) {
    if (gate_dtype == DType::F32) return (g / (1.0f + float(exp(-double(g))))) * u;
    const float d = 1.0f + expf(-g);
    return round_to_dtype(gate_dtype, d < 0x1p126f ? __fdividef(g, d) : g / d) * u;
}

// N 16-bit elements (fp16 or bf16 by dt) packed two to a word, little-endian: element 2j is the low half
// of word j.
template <int N>
__device__ __forceinline__ void unpack_halves(const uint32_t (&w)[N / 2], DType dt, float (&v)[N]) {
#pragma unroll
    for (int j = 0; j < N; ++j) {
        const uint16_t h = uint16_t(w[j / 2] >> (16 * (j % 2)));
        v[j] = dt == DType::F16 ? fp16_bits_to_float(h) : bf16_bits_to_float(h);
    }
}

// Elements i .. i+N-1 (i a multiple of N, the row vec_aligned for N), N = 4 or 8: 16-byte loads where
// the run is that long (fp32 ×4, 16-bit ×8), else one 8-byte load (16-bit ×4). 16-bit pairs are
// little-endian: element 2j is the low half of word j.
template <int N>
__device__ __forceinline__ void load_vec(const void* p, DType dt, int64_t i, float (&v)[N]) {
    static_assert(N == 4 || N == 8, "load_vec: 4 or 8 elements");
    if (dt == DType::F32) {
#pragma unroll
        for (int q = 0; q < N / 4; ++q) {
            const float4 f = static_cast<const float4*>(p)[i / 4 + q];
            v[4 * q] = f.x, v[4 * q + 1] = f.y, v[4 * q + 2] = f.z, v[4 * q + 3] = f.w;
        }
        return;
    }
    uint32_t w[N / 2];
    if constexpr (N == 8) {
        const uint4 q = static_cast<const uint4*>(p)[i / 8];
        w[0] = q.x, w[1] = q.y, w[2] = q.z, w[3] = q.w;
    } else {
        const uint2 q = static_cast<const uint2*>(p)[i / 4];
        w[0] = q.x, w[1] = q.y;
    }
    unpack_halves(w, dt, v);
}

template <int N>
__device__ __forceinline__ void store_vec(void* p, DType dt, int64_t i, const float (&v)[N]) {
    static_assert(N == 4 || N == 8, "store_vec: 4 or 8 elements");
    if (dt == DType::F32) {
#pragma unroll
        for (int q = 0; q < N / 4; ++q)
            static_cast<float4*>(p)[i / 4 + q] = make_float4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]);
        return;
    }
    uint32_t w[N / 2];
#pragma unroll
    for (int j = 0; j < N / 2; ++j) {
        const uint32_t lo = dt == DType::F16 ? float_to_fp16_bits(v[2 * j]) : float_to_bf16_bits(v[2 * j]);
        const uint32_t hi = dt == DType::F16 ? float_to_fp16_bits(v[2 * j + 1]) : float_to_bf16_bits(v[2 * j + 1]);
        w[j] = lo | (hi << 16);
    }
    if constexpr (N == 8)
        static_cast<uint4*>(p)[i / 8] = make_uint4(w[0], w[1], w[2], w[3]);
    else
        static_cast<uint2*>(p)[i / 4] = make_uint2(w[0], w[1]);
}

// x·y rounded to fp32 on its own, never fused with a following add or subtract into an FMA: the CPU
// kernels round every product (no FMA in their baseline x86-64 code), and for fp32 data a fused
// a·b − c·d would differ in the last bit. CUDA documents __fmul_rn as never contracted; HIP 5.2's
// __fmul_rn is a plain product, so the files that need it turn contraction off for HIP with
// `#pragma clang fp contract(off)` (clang's default for HIP honours the pragma).
__device__ __forceinline__ float mul_rn(float x, float y) {
#if defined(FLASHPORT_GPU_CUDA)
    return __fmul_rn(x, y);
#else
    return x * y;
#endif
}

}  // namespace flashport::gpu::ops
