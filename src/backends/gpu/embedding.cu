// Embedding lookup on the GPU: out[t, :] = table[ids[t], :], as backends/cpu/embedding.cpp: the raw
// bits when the dtypes agree (NaN payloads included), else converted through fp32 and rounded once.
// Layout: table [vocab, hidden], out [tokens, hidden], any row strides; ids (int32 or int64) on the
// GPU. One block per token (grid-stride); 4-wide vectors when both rows are aligned for them.
// An id outside [0, vocab) cannot be checked on the host without a synchronisation: its row of out
// becomes NaN instead, and the table is never read there.
#include "backends/gpu/ops_common.cuh"
#include "backends/gpu/ops_gpu.h"

namespace flashport::gpu {
namespace {

using namespace ops;

constexpr int THREADS = 256;

struct EmbeddingArgs {
    const char* table;
    char* out;
    DType table_dtype, out_dtype;
    int64_t table_stride, out_stride;  // elements between rows
    const void* ids;
    bool ids_64;
    int64_t tokens, vocab, hidden;
};

// Copies or converts VEC (or 1) elements of one row; W is 1 or VEC.
template <int W>
__device__ __forceinline__ void move(const EmbeddingArgs& a, const char* src, char* dst, int64_t c, bool bad) {
    if (a.table_dtype == a.out_dtype && !bad) {  // bit copy: 16 or 8 bytes, or one element
        if (a.out_dtype == DType::F32) {
            if constexpr (W == VEC) reinterpret_cast<float4*>(dst)[c / VEC] = reinterpret_cast<const float4*>(src)[c / VEC];
            else reinterpret_cast<uint32_t*>(dst)[c] = reinterpret_cast<const uint32_t*>(src)[c];
        } else {
            if constexpr (W == VEC) reinterpret_cast<uint2*>(dst)[c / VEC] = reinterpret_cast<const uint2*>(src)[c / VEC];
            else reinterpret_cast<uint16_t*>(dst)[c] = reinterpret_cast<const uint16_t*>(src)[c];
        }
        return;
    }
    float v[VEC];
    if constexpr (W == VEC) {
        if (bad) v[0] = v[1] = v[2] = v[3] = NAN;
        else load_vec(src, a.table_dtype, c, v);
        store_vec(dst, a.out_dtype, c, v);
    } else {
        store(dst, a.out_dtype, c, bad ? NAN : load(src, a.table_dtype, c));
    }
}

template <bool VECTOR>
__global__ void __launch_bounds__(THREADS) embedding_kernel(const EmbeddingArgs a) {
    constexpr int W = VECTOR ? VEC : 1;
    const int table_esize = a.table_dtype == DType::F32 ? 4 : 2, out_esize = a.out_dtype == DType::F32 ? 4 : 2;
    for (int64_t t = blockIdx.x; t < a.tokens; t += gridDim.x) {
        const int64_t id = a.ids_64 ? static_cast<const int64_t*>(a.ids)[t]
                                    : int64_t(static_cast<const int32_t*>(a.ids)[t]);
        const bool bad = id < 0 || id >= a.vocab;
        const char* src = a.table + (bad ? 0 : id) * a.table_stride * table_esize;
        char* dst = a.out + t * a.out_stride * out_esize;
        for (int64_t c = int64_t(threadIdx.x) * W; c < a.hidden; c += THREADS * W) move<W>(a, src, dst, c, bad);
    }
}

}  // namespace

void embedding(const TensorView& out, const TensorView& table, const IndexView& ids, void* stream) {
    check_current_device("embedding", table.device);
    EmbeddingArgs a{};
    a.table = static_cast<const char*>(table.data);
    a.out = static_cast<char*>(out.data);
    a.table_dtype = table.dtype;
    a.out_dtype = out.dtype;
    a.table_stride = table.stride[0];
    a.out_stride = out.stride[0];
    a.ids = ids.data;
    a.ids_64 = ids.type == IndexView::Type::I64;
    a.tokens = ids.size;
    a.vocab = table.dim(0);
    a.hidden = table.dim(1);
    if (a.tokens == 0 || a.hidden == 0) return;
    const unsigned grid = grid_size(a.tokens);
    if (vec_aligned(out) && vec_aligned(table))
        launch_kernel(embedding_kernel<true>, grid, THREADS, 0, as_stream(stream), a);
    else
        launch_kernel(embedding_kernel<false>, grid, THREADS, 0, as_stream(stream), a);
    FP_GPU_CHECK_LAUNCH("embedding");
}

}  // namespace flashport::gpu
