// The chunk kernel of the GPU sample op (sample_chunks.cuh says why and what it feeds): grid
// [blocks, rows], CHUNK_THREADS threads, block (c, r) owns ids [c · chunk, min((c + 1) · chunk, vocab))
// of row r. It writes the chunk's scores to scores[r, ...] (not for greedy rows, as step A), its
// ChunkPartial to partials[r, c] and, for 0 < top_k <= CHUNK_K_MAX, its candidates to
// cand_s / cand_id[r, c, 0 .. count) sorted by (score desc, id asc).
//
// A chunk's candidates: the k-th largest of the threads' maxima is a lower bound of the chunk's k-th
// score (k distinct scores reach it) that few scores reach (~k..2k on any data): they are compacted
// into shared memory (past CHUNK_SCAP: overflow), ranked, and cut after the k-th score's ties (past
// CHUNK_CAP: overflow). An overflowed chunk sends its row down the full path of sample.cu.
#include <cmath>

#include "backends/gpu/sample_chunks.cuh"

namespace flashport::gpu::sample_detail {
namespace {

using namespace ops;

__global__ void __launch_bounds__(CHUNK_THREADS)
    sample_chunk_kernel(RowView x, int vocab, int chunk, int blocks, const SampleParams* params, SeenArg seen,
                        float* scores, ChunkPartial* partials, float* cand_s, int32_t* cand_id) {
    constexpr int WARPS = CHUNK_THREADS / WARP_SIZE;
    __shared__ float s_tmax[CHUNK_THREADS];  // each thread's maximum score
    __shared__ float s_best[WARPS];
    __shared__ int s_best_i[WARPS], s_count[WARPS];
    __shared__ float c_s[CHUNK_SCAP], c_ss[CHUNK_SCAP];  // candidates as found / ranked
    __shared__ int32_t c_id[CHUNK_SCAP], c_sid[CHUNK_SCAP];
    __shared__ float s_thr;
    __shared__ int s_n;
    const int tid = int(threadIdx.x), lane = tid % WARP_SIZE, warp = tid / WARP_SIZE;
    const int64_t r = blockIdx.y;
    const int c = int(blockIdx.x);
    const int64_t beg = int64_t(c) * chunk, end = min(beg + chunk, int64_t(vocab));
    wait_for_prior_grid();  // launched dependent: logits, settings and seen sets come from earlier work
    allow_next_grid();

    const SampleParams p = params[r];
    const bool ok = valid_params(p, seen.rows);
    const bool greedy = p.temperature == 0.0f;
    const bool penalty = ok && p.repetition_penalty != 1.0f && p.seen_row >= 0;
    const uint32_t* bits = penalty ? seen.data + int64_t(p.seen_row) * seen.words : nullptr;
    const char* row = x.row(r);
    float* sc = scores + r * vocab;

    float best = -INFINITY;
    int best_i = vocab, nfinite = 0;
    bool bad = false;
    if (ok) {
        for (int64_t i = beg + tid; i < end; i += CHUNK_THREADS) {
            const float raw = load(row, x.dtype, i);
            bad |= isnan(raw) || raw == INFINITY;
            const float v = row_score(raw, i, p, bits, greedy);
            if (!greedy) sc[i] = v;
            nfinite += v != -INFINITY;
            keep_better(best, best_i, v, int(i));
        }
    }
    s_tmax[tid] = best;
#pragma unroll
    for (int offset = WARP_SIZE / 2; offset > 0; offset /= 2) {
        const float v = FP_SHFL_XOR(static_cast<unsigned>(full_warp_mask()), best, offset, WARP_SIZE);
        const int i = FP_SHFL_XOR(static_cast<unsigned>(full_warp_mask()), best_i, offset, WARP_SIZE);
        keep_better(best, best_i, v, i);
        nfinite += FP_SHFL_XOR(static_cast<unsigned>(full_warp_mask()), nfinite, offset, WARP_SIZE);
    }
    if (lane == 0) {
        s_best[warp] = best;
        s_best_i[warp] = best_i;
        s_count[warp] = nfinite;
    }
    if (tid == 0) s_n = 0;
    bad = __syncthreads_or(bad);  // also publishes s_tmax, s_best.. and s_n

    // Candidates (every branch is uniform over the block: p, and bad after the barrier).
    uint32_t flags = bad ? CHUNK_BAD : 0u;
    int count = 0;
    if (ok && !greedy && !bad && p.top_k > 0 && p.top_k <= CHUNK_K_MAX) {
        const int k = p.top_k;
        const float mine = s_tmax[tid];
        int rank = 0;
        for (int j = 0; j < CHUNK_THREADS; ++j) rank += s_tmax[j] > mine || (s_tmax[j] == mine && j < tid);
        if (rank == k - 1) s_thr = mine;
        __syncthreads();
        const float thr = s_thr;
        for (int64_t i = beg + tid; i < end; i += CHUNK_THREADS) {
            const float v = sc[i];  // this thread's own write above
            if (v >= thr && v > -INFINITY) {
                const int j = atomicAdd(&s_n, 1);
                if (j < CHUNK_SCAP) {
                    c_id[j] = int32_t(i);
                    c_s[j] = v;
                }
            }
        }
        __syncthreads();
        const int n = s_n;
        if (n > CHUNK_SCAP) {
            flags |= CHUNK_OVERFLOW;
        } else {
            for (int j = tid; j < n; j += CHUNK_THREADS) {  // rank by (score desc, id asc)
                const float s = c_s[j];
                const int32_t id = c_id[j];
                int at = 0;
                for (int l = 0; l < n; ++l) at += c_s[l] > s || (c_s[l] == s && c_id[l] < id);
                c_sid[at] = id;
                c_ss[at] = s;
            }
            __syncthreads();
            int keep = n;
            if (n > k) {  // ties with the k-th score stay
                const float kth = c_ss[k - 1];
                keep = k;
                while (keep < n && c_ss[keep] == kth) ++keep;
            }
            if (keep > CHUNK_CAP) {
                flags |= CHUNK_OVERFLOW;
            } else {
                const int64_t base = (r * blocks + c) * int64_t(CHUNK_CAP);
                for (int j = tid; j < keep; j += CHUNK_THREADS) {
                    cand_s[base + j] = c_ss[j];
                    cand_id[base + j] = c_sid[j];
                }
                count = keep;
            }
        }
    }
    if (tid == 0) {
        int n = s_count[0];
        for (int w = 1; w < WARPS; ++w) {
            keep_better(best, best_i, s_best[w], s_best_i[w]);
            n += s_count[w];
        }
        ChunkPartial out{};
        out.m = best;
        out.best = best_i;
        out.nfinite = n;
        out.flags = flags;
        out.count = count;
        partials[r * blocks + c] = out;
    }
}

}  // namespace

void launch_sample_chunks(const RowView& x, int64_t rows, int vocab, const SampleParams* params, SeenArg seen,
                          float* scores, const ChunkBuffers& out, const ChunkLayout& l, cudaStream_t stream) {
    launch_dependent(sample_chunk_kernel, dim3(unsigned(l.blocks), unsigned(rows)), CHUNK_THREADS, 0, stream, x, vocab,
                     l.chunk, l.blocks, params, seen, scores, out.partials, out.cand_s, out.cand_id);
}

}  // namespace flashport::gpu::sample_detail
