// sample and mark_seen on the GPU (flashport/sample.h). One block per logit row (grid-stride over
// rows), THREADS threads; the row's scores live in the workspace ([blocks, vocab] fp32, one row per
// block, reused by its next row) so the later passes read 4 bytes an element and redo no penalty.
// Batches of <= CHUNK_MAX_ROWS rows first spread step A over many blocks (sample_chunks.cu, which
// also passes on each chunk's top-k candidates for top_k <= CHUNK_K_MAX); this kernel then runs one
// block per row and merges them instead of running step A (sample_chunks.cuh says how).
//
// Steps for one row (every branch below is uniform over the block: it reads shared state written
// before a barrier):
//   A  scores = penalise(x) / temperature (-0 made +0, so equal scores have equal keys), and the
//      block's max m, first argmax, finite count and NaN/+inf flag. Greedy rows end here.
//   B  top-k, k <= THREADS (Qwen's 20): the k-th largest of the threads' maxima is a lower bound of
//      the k-th score, which only ~k..2k scores reach; they are compacted into shared memory in one
//      pass. Else (or past CAP of them) a radix select (four 8-bit digits of the order-preserving
//      key of the fp32 score, histograms per warp in shared memory against same-bin atomic
//      contention) finds the k-th score thr; the candidates are the n_c scores >= thr.
//   C  <= CAP candidates in shared memory: ranked by (score desc, id asc), cut after the k-th score's
//      ties, and thread 0 runs top-p and min-p on that order and the inverse-CDF draw in id order, as
//      backends/cpu/sample.cpp does (in fp32 instead of double).
//   D  more candidates (top_k 0 on near-uniform logits): top-p's last kept score v* is a second
//      radix select on the mass exp(s - m) (the lowest score whose mass strictly above is
//      < top_p · total), with c_keep of the ties at v* kept in id order; then each thread owns a
//      contiguous segment of ids, block scans give the tie ranks and the segment weights, and the
//      segment holding u · total walks its ids to the token: the same id-order draw, exact for any
//      number of candidates.
// Sums are fp32 here and double on the CPU, so the two pick one token for the same u except within
// rounding of a CDF or filter boundary (tests/ops/sample_case.h).
#include <cfloat>
#include <climits>
#include <cmath>

#include "backends/gpu/ops_common.cuh"
#include "backends/gpu/ops_gpu.h"
#include "backends/gpu/sample_chunks.cuh"
#include "core/counter_rng.h"

namespace flashport::gpu {
namespace {

using namespace ops;
using namespace sample_detail;

constexpr int THREADS = 512;
constexpr int BINS = 256;                   // radix digits of 8 bits
constexpr int CAP = 1024;                   // candidates the shared-memory path takes
constexpr int64_t MAX_SAMPLE_BLOCKS = 128;  // bounds the workspace: one score row per block

// What thread 0 decides for the row, read by all after a barrier.
struct RowState {
    float m, thr, vstar, target;
    int best, nfinite, n_c, keep, c_keep, chosen_bin, claim, last;
    int32_t result;  // INT_MIN: not decided yet
    uint32_t prefix, pmask, above_c, ties;
    float above;
};

__device__ __forceinline__ uint32_t order_key(float s) {
    const uint32_t u = __float_as_uint(s);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float key_value(uint32_t k) {
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// Hillis-Steele inclusive scan of one value per thread through buf[THREADS]; buf keeps the results,
// so a thread can read its neighbour's.
template <typename T>
__device__ T block_inclusive_scan(T v, T* buf) {
    const int tid = int(threadIdx.x);
    buf[tid] = v;
    __syncthreads();
    for (int off = 1; off < THREADS; off *= 2) {
        const T add = tid >= off ? buf[tid - off] : T(0);
        __syncthreads();
        buf[tid] += add;
        __syncthreads();
    }
    return buf[tid];
}

// Radix select over the scores >= lo, from the highest key down: the lowest present score whose weight
// strictly above it is < X, with weight 1 (X = k: the k-th largest score) or exp(s - m) (X = top_p ·
// total, total summed in the first digit's pass: top-p's last kept score). Leaves the score's key in
// st.prefix, the weight above it in st.above_c / st.above and its ties in st.ties; st.chosen_bin < 0
// when no score qualifies (mass with X <= 0).
__device__ void radix_select(const float* sc, int vocab, float lo, bool mass, uint32_t k, float top_p, RowState& st,
                             uint32_t* h_cnt, float* h_mass, uint32_t* s_cnt, float* s_mass) {
    constexpr int WARPS = THREADS / WARP_SIZE;
    const int tid = int(threadIdx.x), warp = tid / WARP_SIZE;
    if (tid == 0) {
        st.prefix = st.pmask = st.above_c = st.ties = 0;
        st.above = 0.0f;
        st.chosen_bin = 0;
    }
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int i = tid; i < BINS * WARPS; i += THREADS) {
            h_cnt[i] = 0;
            h_mass[i] = 0.0f;
        }
        __syncthreads();
        const uint32_t prefix = st.prefix, pmask = st.pmask;
        const float m = st.m;
        if (st.chosen_bin >= 0) {
            // A thread's run of one bin is added once: near-uniform logits put nearly every score of the
            // first digit in one or two bins, where each atomic would wait for the whole warp's.
            int run_slot = -1;
            uint32_t run_cnt = 0;
            float run_mass = 0.0f;
            for (int64_t i = tid; i < vocab; i += THREADS) {
                const float s = sc[i];
                const uint32_t key = order_key(s);
                if (s < lo || (key & pmask) != prefix) continue;
                const int slot = int((key >> shift) & (BINS - 1)) * WARPS + warp;  // [bin][warp]: no bank clash
                if (slot != run_slot) {
                    if (run_cnt) {
                        atomicAdd(&h_cnt[run_slot], run_cnt);
                        if (mass) atomicAdd(&h_mass[run_slot], run_mass);
                    }
                    run_slot = slot;
                    run_cnt = 0;
                    run_mass = 0.0f;
                }
                ++run_cnt;
                if (mass) run_mass += expf(s - m);
            }
            if (run_cnt) {
                atomicAdd(&h_cnt[run_slot], run_cnt);
                if (mass) atomicAdd(&h_mass[run_slot], run_mass);
            }
        }
        __syncthreads();
        for (int b = tid; b < BINS; b += THREADS) {
            uint32_t c = 0;
            float w = 0.0f;
            for (int j = 0; j < WARPS; ++j) {
                c += h_cnt[b * WARPS + j];
                w += h_mass[b * WARPS + j];
            }
            s_cnt[b] = c;
            s_mass[b] = w;
        }
        __syncthreads();
        if (tid == 0 && st.chosen_bin >= 0) {
            if (mass && shift == 24) {
                float total = 0.0f;
                for (int b = 0; b < BINS; ++b) total += s_mass[b];
                st.target = top_p * total;
            }
            int chosen = -1;
            float ab = st.above, ch_ab = 0.0f;
            uint32_t abc = st.above_c, ch_abc = 0;
            for (int b = BINS - 1; b >= 0; --b) {
                if (s_cnt[b] == 0) continue;
                if (mass ? !(ab < st.target) : !(abc < k)) break;
                chosen = b;
                ch_ab = ab;
                ch_abc = abc;
                ab += s_mass[b];
                abc += s_cnt[b];
            }
            st.chosen_bin = chosen;
            if (chosen >= 0) {
                st.prefix |= uint32_t(chosen) << shift;
                st.pmask |= uint32_t(BINS - 1) << shift;
                st.above = ch_ab;
                st.above_c = ch_abc;
                st.ties = s_cnt[chosen];
            }
        }
        __syncthreads();
    }
}

// Copies the row's finite scores >= thr (and their ids) into id[] / s[] in any order; returns how many
// there are (more than CAP: only CAP were kept, the caller must not use them).
__device__ int compact(const float* sc, int vocab, float thr, RowState& st, int32_t* id, float* s) {
    const int tid = int(threadIdx.x);
    if (tid == 0) st.keep = 0;
    __syncthreads();
    for (int64_t i = tid; i < vocab; i += THREADS) {
        const float v = sc[i];
        if (v >= thr && v > -INFINITY) {
            const int j = atomicAdd(&st.keep, 1);
            if (j < CAP) {
                id[j] = int32_t(i);
                s[j] = v;
            }
        }
    }
    __syncthreads();
    return st.keep;
}

// chunks.partials null: step A here. Else (one block per row, rows <= CHUNK_MAX_ROWS) the chunk
// kernel has run step A into the score rows, and its partials and candidates replace it.
__global__ void __launch_bounds__(THREADS) sample_kernel(int32_t* ids, RowView x, int64_t rows, int vocab,
                                                         const SampleParams* params, SeenArg seen, float* workspace,
                                                         ChunkBuffers chunks, int blocks) {
    constexpr int WARPS = THREADS / WARP_SIZE;
    struct Hist {
        uint32_t cnt[BINS * WARPS];
        float mass[BINS * WARPS];
    };
    struct Small {
        int32_t id[CAP];
        float s[CAP];
        int32_t sid[CAP];
        float ss[CAP];
    };
    union Shared {
        Hist h;
        Small c;
    };
    __shared__ Shared sh;
    __shared__ uint32_t s_cnt[BINS];
    __shared__ float s_mass[BINS];
    __shared__ float s_scan_f[THREADS];
    __shared__ int s_scan_i[THREADS];
    __shared__ float s_best[WARPS];
    __shared__ float s_tmax[THREADS];  // each thread's maximum score (top-k's lower bound)
    __shared__ int s_best_i[WARPS], s_count[WARPS];
    __shared__ RowState st;
    __shared__ int s_ccount[CHUNK_TARGET];  // each chunk's candidates
    __shared__ int s_maxc;                  // the most of any chunk
    const int tid = int(threadIdx.x), lane = tid % WARP_SIZE, warp = tid / WARP_SIZE;
    float* sc = workspace + int64_t(blockIdx.x) * vocab;
    const bool merge = chunks.partials != nullptr;
    wait_for_prior_grid();  // launched dependent: nothing read before this
    allow_next_grid();

    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const SampleParams p = params[r];
        const bool ok = valid_params(p, seen.rows);
        const bool greedy = p.temperature == 0.0f;
        const bool penalty = ok && p.repetition_penalty != 1.0f && p.seen_row >= 0;
        const uint32_t* bits = penalty ? seen.data + int64_t(p.seen_row) * seen.words : nullptr;
        const char* row = x.row(r);

        // A: scores, max, first argmax, finite count, NaN / +inf.
        float best = -INFINITY;
        int best_i = vocab, nfinite = 0;
        bool bad = false, overflow = false;
        if (merge) {  // the chunks' maxima, counts and flags
            if (tid == 0) s_maxc = 0;
            __syncthreads();
            for (int c = tid; c < blocks; c += THREADS) {
                const ChunkPartial q = chunks.partials[r * blocks + c];
                keep_better(best, best_i, q.m, q.best);
                nfinite += q.nfinite;
                bad |= (q.flags & CHUNK_BAD) != 0;
                overflow |= (q.flags & CHUNK_OVERFLOW) != 0;
                s_ccount[c] = q.count;
                atomicMax(&s_maxc, q.count);
            }
            overflow = __syncthreads_or(overflow);
        } else if (ok) {
            for (int64_t i = tid; i < vocab; i += THREADS) {
                const float raw = load(row, x.dtype, i);
                bad |= isnan(raw) || raw == INFINITY;
                const float v = row_score(raw, i, p, bits, greedy);  // as the chunks' (sample_chunks.cuh)
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
        bad = __syncthreads_or(bad);
        if (tid == 0) {
            int n = s_count[0];
            for (int w = 1; w < WARPS; ++w) {
                keep_better(best, best_i, s_best[w], s_best_i[w]);
                n += s_count[w];
            }
            st.m = best;
            st.best = best_i;
            st.nfinite = n;
            st.result = !ok ? SAMPLE_BAD_PARAMS : bad || n == 0 ? SAMPLE_BAD_ROW : greedy ? best_i : INT_MIN;
            st.thr = -FLT_MAX;
            st.n_c = n;
        }
        __syncthreads();

        // B: top-k. For k <= THREADS the k-th largest of the threads' maxima is a lower bound L of the
        // k-th score (k distinct entries reach it), and few scores beat it (~k..2k on any data): they
        // are compacted in one pass and cut exactly at the k-th in shared memory. Otherwise, or when
        // more than CAP scores reach L, a radix select finds the k-th score itself.
        // After chunks: the union of their candidates holds every score >= the k-th, so the same bound
        // (the k-th largest of the threads' maxima over the union) and compaction apply to it.
        const bool want_k = st.result == INT_MIN && p.top_k > 0 && p.top_k < st.nfinite;
        bool cut_k = want_k && (merge ? p.top_k <= CHUNK_K_MAX && !overflow : p.top_k <= THREADS);
        int n = -1;  // candidates compacted into shared memory; -1: not compacted
        if (cut_k && merge) {
            // Slot j is entry j / blocks of chunk j % blocks: the ~k entries of every chunk spread evenly
            // over the threads (chunk-major slots would leave all but ~k threads of each 128 idle).
            const int64_t base = r * blocks * int64_t(CHUNK_CAP);
            const int slots = blocks * s_maxc;
            const auto slot = [&](int j) { return base + int64_t(j % blocks) * CHUNK_CAP + j / blocks; };
            float mine = -INFINITY;
            for (int j = tid; j < slots; j += THREADS)
                if (j / blocks < s_ccount[j % blocks]) mine = fmaxf(mine, chunks.cand_s[slot(j)]);
            s_tmax[tid] = mine;
            if (tid == 0) st.keep = 0;
            __syncthreads();
            int rank = 0;
            for (int j = 0; j < THREADS; ++j) rank += s_tmax[j] > mine || (s_tmax[j] == mine && j < tid);
            if (rank == p.top_k - 1) st.thr = mine;
            __syncthreads();
            const float thr = st.thr;
            for (int j = tid; j < slots; j += THREADS) {
                if (j / blocks >= s_ccount[j % blocks]) continue;
                const float v = chunks.cand_s[slot(j)];
                if (v >= thr && v > -INFINITY) {
                    const int at = atomicAdd(&st.keep, 1);
                    if (at < CAP) {
                        sh.c.id[at] = chunks.cand_id[slot(j)];
                        sh.c.s[at] = v;
                    }
                }
            }
            __syncthreads();
            n = st.keep;
        } else if (cut_k) {
            const float mine = s_tmax[tid];
            int rank = 0;
            for (int j = 0; j < THREADS; ++j) rank += s_tmax[j] > mine || (s_tmax[j] == mine && j < tid);
            if (rank == p.top_k - 1) st.thr = mine;
            __syncthreads();
            n = compact(sc, vocab, st.thr, st, sh.c.id, sh.c.s);
        }
        if (want_k && (!cut_k || n > CAP)) {
            radix_select(sc, vocab, -FLT_MAX, false, uint32_t(p.top_k), 0.0f, st, sh.h.cnt, sh.h.mass, s_cnt, s_mass);
            if (tid == 0) {
                st.thr = key_value(st.prefix);
                st.n_c = int(st.above_c + st.ties);
            }
            __syncthreads();
            cut_k = false;  // thr is the k-th score itself
            n = -1;
        }
        if (st.result == INT_MIN && n < 0 && st.n_c <= CAP) n = compact(sc, vocab, st.thr, st, sh.c.id, sh.c.s);
        const double u = detail::counter_uniform(p.seed, p.counter);

        // C: few candidates: exact top-k cut, top-p, min-p and the draw in shared memory.
        if (st.result == INT_MIN && n >= 0 && n <= CAP) {
            for (int j = tid; j < n; j += THREADS) {  // rank by (score desc, id asc)
                const float s = sh.c.s[j];
                const int32_t id = sh.c.id[j];
                int rank = 0;
                for (int l = 0; l < n; ++l) rank += sh.c.s[l] > s || (sh.c.s[l] == s && sh.c.id[l] < id);
                sh.c.sid[rank] = id;
                sh.c.ss[rank] = s;
            }
            __syncthreads();
            if (tid == 0) {
                const float m = st.m;
                int keep = n;
                if (cut_k && keep > p.top_k) {  // ties with the k-th score stay
                    const float kth = sh.c.ss[p.top_k - 1];
                    keep = p.top_k;
                    while (keep < n && sh.c.ss[keep] == kth) ++keep;
                }
                if (p.top_p < 1.0f && keep > 1) {
                    float total = 0.0f;
                    for (int j = 0; j < keep; ++j) total += expf(sh.c.ss[j] - m);
                    const float target = p.top_p * total;
                    float above = 0.0f;
                    int j = 0;
                    for (; j < keep; ++j) {
                        if (j > 0 && above >= target) break;
                        above += expf(sh.c.ss[j] - m);
                    }
                    keep = j;
                }
                if (p.min_p > 0.0f)  // scores descend, so min-p removes a suffix (never the top)
                    for (int j = 1; j < keep; ++j)
                        if (expf(sh.c.ss[j] - m) < p.min_p) {
                            keep = j;
                            break;
                        }
                st.keep = keep;
            }
            __syncthreads();
            const int keep = st.keep;
            for (int j = tid; j < keep; j += THREADS) {  // the kept ones in id order
                const int32_t id = sh.c.sid[j];
                int rank = 0;
                for (int l = 0; l < keep; ++l) rank += sh.c.sid[l] < id;
                sh.c.id[rank] = id;
                sh.c.s[rank] = sh.c.ss[j];
            }
            __syncthreads();
            if (tid == 0) {
                const float m = st.m;
                float total = 0.0f;
                for (int j = 0; j < keep; ++j) total += expf(sh.c.s[j] - m);
                const float target = float(u * double(total));
                float cum = 0.0f;
                int32_t pick = sh.c.id[keep - 1];  // u within rounding of the total
                for (int j = 0; j < keep; ++j) {
                    cum += expf(sh.c.s[j] - m);
                    if (cum > target) {
                        pick = sh.c.id[j];
                        break;
                    }
                }
                st.result = pick;
            }
            __syncthreads();
        }

        // D: many candidates. Top-p's last kept score v* and how many of its ties stay.
        if (st.result == INT_MIN) {
            const bool top_p = p.top_p < 1.0f;
            if (top_p) radix_select(sc, vocab, st.thr, true, 0, p.top_p, st, sh.h.cnt, sh.h.mass, s_cnt, s_mass);
            if (tid == 0) {
                if (!top_p) {
                    st.vstar = st.thr;  // every score >= thr, ties included
                    st.c_keep = INT_MAX;
                } else if (st.chosen_bin < 0) {
                    st.vstar = st.m;  // top_p = 0: the first maximum only
                    st.c_keep = 1;
                } else {
                    st.vstar = key_value(st.prefix);
                    // Tie c (in id order) stays while above + c · e(v*) < target.
                    const double e = double(expf(st.vstar - st.m));
                    const double q = e > 0.0 ? (double(st.target) - double(st.above)) / e : double(INT_MAX);
                    st.c_keep = int(fmax(1.0, fmin(double(st.ties), ceil(q))));
                }
                st.claim = INT_MAX;
                st.last = -1;
            }
            __syncthreads();
            const float vstar = st.vstar, m = st.m;
            const int c_keep = st.c_keep;
            const auto min_p_ok = [&](float s) { return p.min_p <= 0.0f || expf(s - m) >= p.min_p; };
            const int64_t seg = (int64_t(vocab) + THREADS - 1) / THREADS;
            const int64_t beg = int64_t(tid) * seg, end = beg + seg < int64_t(vocab) ? beg + seg : int64_t(vocab);
            float w = 0.0f;
            int ties = 0;
            for (int64_t i = beg; i < end; ++i) {
                const float s = sc[i];
                if (s > vstar) {
                    if (min_p_ok(s)) w += expf(s - m);
                } else if (s == vstar) {
                    ++ties;
                }
            }
            const int tie0 = block_inclusive_scan(ties, s_scan_i) - ties;
            const int kept_ties = min(max(c_keep - tie0, 0), ties);
            w += min_p_ok(vstar) ? float(kept_ties) * expf(vstar - m) : 0.0f;
            const float incl = block_inclusive_scan(w, s_scan_f);
            const float total = s_scan_f[THREADS - 1];
            const float target = float(u * double(total));
            if (w > 0.0f) {
                if (incl > target) atomicMin(&st.claim, tid);
                atomicMax(&st.last, tid);
            }
            __syncthreads();
            const int claimant = st.claim != INT_MAX ? st.claim : st.last;
            if (tid == claimant) {
                float cum = incl - w;
                int rank = tie0;
                int32_t pick = -1, last = -1;
                for (int64_t i = beg; i < end && pick < 0; ++i) {
                    const float s = sc[i];
                    bool kept = s > vstar;
                    if (s == vstar) kept = rank++ < c_keep;
                    if (!kept || !min_p_ok(s)) continue;
                    last = int32_t(i);
                    cum += expf(s - m);
                    if (cum > target) pick = int32_t(i);
                }
                st.result = pick >= 0 ? pick : last;
            }
            __syncthreads();
        }
        if (tid == 0) ids[r] = st.result;
        __syncthreads();  // st and the shared arrays are reused by the next row
    }
}

__global__ void __launch_bounds__(THREADS)
    mark_seen_kernel(uint32_t* seen, int64_t rows, int64_t words, const int32_t* ids, const int32_t* slots, int64_t n) {
    for (int64_t t = int64_t(blockIdx.x) * THREADS + threadIdx.x; t < n; t += int64_t(gridDim.x) * THREADS) {
        const int64_t slot = slots[t], id = ids[t];
        if (slot < 0 || slot >= rows || id < 0 || id >= words * 32) continue;
        atomicOr(&seen[slot * words + id / 32], 1u << (id % 32));
    }
}

}  // namespace

namespace {
size_t scores_bytes(int64_t rows, int64_t vocab) {
    return size_t(std::min(rows, MAX_SAMPLE_BLOCKS)) * size_t(vocab) * sizeof(float);
}
}  // namespace

// The score rows, then (small batches) the chunks' partials and candidates (sample_chunks.cuh).
size_t sample_workspace_bytes(int64_t rows, int64_t vocab) {
    const ChunkLayout l = chunk_layout(rows, vocab);
    const size_t scores = scores_bytes(rows, vocab);
    return l.blocks > 0 ? (scores + 15) / 16 * 16 + chunk_bytes(rows, l) : scores;
}

void sample(int32_t* ids, const TensorView& x, const SampleParams* params, const SeenSets& seen, void* workspace,
            void* stream) {
    check_current_device("sample", x.device);
    const int64_t rows = x.dim(0);
    if (rows == 0) return;
    const int64_t vocab = x.dim(1);
    const SeenArg seen_arg{seen.data, seen.rows, seen.words};
    const ChunkLayout l = chunk_layout(rows, vocab);
    ChunkBuffers chunks{};
    if (l.blocks > 0) {
        chunks = chunk_buffers(workspace, scores_bytes(rows, vocab), rows, l);
        launch_sample_chunks(row_view(x), rows, int(vocab), params, seen_arg, static_cast<float*>(workspace), chunks, l,
                             as_stream(stream));
        FP_GPU_CHECK_LAUNCH("sample (chunks)");
    }
    const unsigned blocks = unsigned(std::min(rows, MAX_SAMPLE_BLOCKS));  // rows itself with chunks
    launch_dependent(sample_kernel, blocks, THREADS, 0, as_stream(stream), ids, row_view(x), rows, int(vocab), params,
                     seen_arg, static_cast<float*>(workspace), chunks, l.blocks);
    FP_GPU_CHECK_LAUNCH("sample");
}

void mark_seen(const SeenSets& seen, const IndexView& ids, const int32_t* slots, void* stream) {
    check_current_device("mark_seen", seen.device);
    const int64_t n = ids.size;
    launch_kernel(mark_seen_kernel, grid_size(ceil_div(n, int64_t(THREADS))), THREADS, 0, as_stream(stream), seen.data,
                  seen.rows, seen.words, static_cast<const int32_t*>(ids.data), slots, n);
    FP_GPU_CHECK_LAUNCH("mark_seen");
}

}  // namespace flashport::gpu
