// The multi-block front of the GPU sample op (sample.cu, sample_chunks.cu), shared by its two kernels.
//
// Why: one block per row leaves 131 of an H200's 132 SMs idle at batch 1 (187 µs a call at Qwen's
// settings on a 152064-token vocabulary, against a ~4.4 ms decode step). For small batches
// (rows <= CHUNK_MAX_ROWS) the row is cut into `blocks` contiguous chunks, one block each
// (sample_chunks.cu): a block computes its chunk's scores exactly as step A of sample.cu (into the
// same [rows, vocab] score rows of the workspace), its max, first argmax, finite count and NaN/+inf
// flag, and, for rows with 0 < top_k <= CHUNK_K_MAX, its candidates: every score >= the chunk's
// k-th largest (its ties kept), sorted by (score desc, id asc). Then sample.cu's kernel, one block per
// row, merges the chunks instead of running step A: a greedy row ends there; a top-k row takes the
// candidates of all chunks (they hold every score >= the row's k-th, since a score below its chunk's
// k-th has k larger scores in the row) into step C; every other row (top_k 0 or > CHUNK_K_MAX, a
// chunk's candidates past CHUNK_CAP) runs steps B-D over the score row as before.
//
// Two kernels, not one whose last block finishes the row: the kernel boundary orders the chunks'
// writes before the merge, so no counter has to start at zero in a caller's workspace (nor be reset
// for the next replay of a graph), and both kernels keep the dependent-launch contract.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/gpu/ops_common.cuh"
#include "flashport/sample.h"

namespace flashport::gpu::sample_detail {

constexpr int CHUNK_THREADS = 256;
constexpr int CHUNK_K_MAX = 64;     // top_k the chunks serve (<= CHUNK_THREADS: the bound of sample_chunks.cu)
constexpr int CHUNK_CAP = 128;      // candidates one chunk may pass on (k plus the k-th's ties)
constexpr int CHUNK_SCAP = 512;     // candidates a chunk's block ranks in shared memory
constexpr int CHUNK_MIN = 512;      // elements per chunk at least
constexpr int CHUNK_TARGET = 256;   // blocks over all rows: ~2 per SM of an H100/H200 (132 SMs)
constexpr int CHUNK_MAX_ROWS = 32;  // larger batches keep one block per row (sample.cu)

constexpr uint32_t CHUNK_BAD = 1;       // a NaN or +inf in the chunk
constexpr uint32_t CHUNK_OVERFLOW = 2;  // its candidates did not fit: the row takes the full path

// One chunk's summary (scores as sample.cu's step A: penalised, divided by the temperature).
struct ChunkPartial {
    float m;       // max score, -inf when none
    int best;      // its first index, vocab when none
    int nfinite;   // scores > -inf
    uint32_t flags;
    int count;  // candidates written
    int pad[3];
};

struct SeenArg {
    const uint32_t* data;
    int64_t rows, words;
};

// The chunk layout of a [rows, vocab] sample: 0 blocks when the rows take one block each.
struct ChunkLayout {
    int blocks = 0;   // chunks per row
    int chunk = 0;    // elements per chunk (the last may be shorter)
};
inline ChunkLayout chunk_layout(int64_t rows, int64_t vocab) {
    ChunkLayout l;
    if (rows < 1 || rows > CHUNK_MAX_ROWS) return l;
    const int64_t want = std::max<int64_t>(1, std::min(ceil_div(CHUNK_TARGET, rows), ceil_div(vocab, CHUNK_MIN)));
    l.chunk = int(ceil_div(vocab, want));
    l.blocks = int(ceil_div(vocab, l.chunk));
    return l;
}

// Where the chunks' outputs live in the workspace, after the score rows (scores_bytes).
struct ChunkBuffers {
    ChunkPartial* partials;  // [rows, blocks]
    float* cand_s;           // [rows, blocks, CHUNK_CAP]
    int32_t* cand_id;        // [rows, blocks, CHUNK_CAP]
};
inline size_t chunk_bytes(int64_t rows, const ChunkLayout& l) {
    return size_t(rows) * size_t(l.blocks) * (sizeof(ChunkPartial) + CHUNK_CAP * (sizeof(float) + sizeof(int32_t)));
}
inline ChunkBuffers chunk_buffers(void* workspace, size_t scores_bytes, int64_t rows, const ChunkLayout& l) {
    char* base = static_cast<char*>(workspace) + (scores_bytes + 15) / 16 * 16;
    ChunkBuffers b;
    b.partials = reinterpret_cast<ChunkPartial*>(base);
    b.cand_s = reinterpret_cast<float*>(base + size_t(rows) * size_t(l.blocks) * sizeof(ChunkPartial));
    b.cand_id = reinterpret_cast<int32_t*>(b.cand_s + size_t(rows) * size_t(l.blocks) * CHUNK_CAP);
    return b;
}

__device__ __forceinline__ bool finite(float v) {
    return v == v && v != INFINITY && v != -INFINITY;
}

// The checks of validate(SampleParams) (src/ops/sample.cpp), which the host cannot run on device memory.
__device__ __forceinline__ bool valid_params(const SampleParams& p, int64_t seen_rows) {
    return finite(p.temperature) && p.temperature >= 0.0f && p.top_k >= 0 && p.top_p >= 0.0f && p.top_p <= 1.0f &&
           p.min_p >= 0.0f && p.min_p <= 1.0f && finite(p.repetition_penalty) && p.repetition_penalty > 0.0f &&
           p.seen_row >= -1 && p.seen_row < seen_rows;
}

// Keeps (v, i) if it beats (best, best_i): larger, or equal with a smaller index (torch.argmax).
__device__ __forceinline__ void keep_better(float& best, int& best_i, float v, int i) {
    if (v > best || (v == best && i < best_i)) {
        best = v;
        best_i = i;
    }
}

// Step A's score of element i of a row from its logit v: the penalty, then the temperature (not for
// greedy rows), -0 made +0 (one key per value).
__device__ __forceinline__ float row_score(float v, int64_t i, const SampleParams& p, const uint32_t* bits,
                                           bool greedy) {
    if (bits && ((bits[i / 32] >> (i % 32)) & 1u)) v = v < 0.0f ? v * p.repetition_penalty : v / p.repetition_penalty;
    if (!greedy) {
        if (p.temperature != 1.0f) v = v / p.temperature;
        if (v == 0.0f) v = 0.0f;
    }
    return v;
}

// Runs the chunk kernel of sample_chunks.cu: grid [blocks, rows].
void launch_sample_chunks(const ops::RowView& x, int64_t rows, int vocab, const SampleParams* params, SeenArg seen,
                          float* scores, const ChunkBuffers& out, const ChunkLayout& l, cudaStream_t stream);

}  // namespace flashport::gpu::sample_detail
