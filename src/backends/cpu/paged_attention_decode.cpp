// Paged-KV attention for a few query tokens per sequence on the CPU (decode: q_len <= 8), reading the
// keys and values in the cache pages where they are.
//
// The gather path (paged_attention.cpp) copies each sequence's K and V out of the pages and the dense
// flash kernel then widens and packs them again (K transposed, element by element): at decode, with
// one query per head, that copying is the whole cost. On the 2-core development machine one Qwen2.5-0.5B
// layer (14 heads over 2 KV heads, d64, bf16) took 95 µs at 100 cached tokens and 489 µs at 1000,
// against ~13 µs to read 1000 tokens' K and V once.
//
// Here one task is (sequence, KV head, slice of its pages). Its rows are the query heads that share
// the KV head at each query position, R = q_len · group (padded to TILE_MR), ordered (position,
// head-in-group) as in the flash kernel. Per page of block_size keys:
//   S [R, block_size]  = Q · Kᵀ by the matmul GEMV kernels (K rows read in the cache's dtype and
//                        widened in registers; Q pre-scaled to log2 units), masked per row
//   online softmax     the attention tile kernels' softmax_step (m, l, alpha per row)
//   O [R, dp]         += P · V with V's page widened to fp32 rows [block_size, dp]
// A sequence's pages are sliced when there are fewer (sequence, KV head) pairs than twice the threads
// and enough pages (at least MIN_SLICE_PAGES a slice); slices keep (m, l, O) and are merged per pair,
// as the GPU's split-KV decode does. Masking is visible_keys(), the rule every CPU path shares.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/attention_cpu.h"
#include "backends/cpu/attention_packing.h"
#include "backends/cpu/kernels/gemv_kernels.h"
#include "backends/cpu/kernels/tile_kernels.h"
#include "backends/cpu/paged_attention.h"
#include "flashport/error.h"
#include "flashport/memory.h"

namespace flashport::cpu {

extern const GemvKernels gemv_kernels_generic;

namespace {

constexpr int64_t MIN_SLICE_PAGES = 8;  // a slice's share of one sequence's pages, at least
constexpr int64_t GEMV_ROWS = 8;        // query rows per GEMV call (GemvKernels::gemv takes 1..8)
constexpr float NEG_INF = -std::numeric_limits<float>::infinity();

struct Shape {
    int64_t q_len, group, rows, padded_rows, head_dim, dp, block_size, slices;
};

// One slice's state, and the per-thread scratch around it (floats): Q [rows][head_dim],
// S [rows][block_size], V [block_size][dp], O [rows][dp], m, l, alpha [rows].
struct Slice {
    float *q, *s, *v, *o, *m, *l, *alpha;
};

int64_t slice_floats(const Shape& sh) {
    const int64_t r = sh.padded_rows;
    return round_up(r * sh.head_dim + r * sh.block_size + sh.block_size * sh.dp + r * sh.dp + 3 * r, 16);
}

Slice carve(float* p, const Shape& sh) {
    Slice s;
    const int64_t r = sh.padded_rows;
    s.q = p;
    s.s = s.q + r * sh.head_dim;
    s.v = s.s + r * sh.block_size;
    s.o = s.v + sh.block_size * sh.dp;
    s.m = s.o + r * sh.dp;
    s.l = s.m + r;
    s.alpha = s.l + r;
    return s;
}

// Query row r of the task: (position r / group, head kvh · group + r % group).
int64_t row_head(const Shape& sh, int64_t kvh, int64_t r) {
    return kvh * sh.group + r % sh.group;
}

// Pages [p0, p1) of sequence b (len cached tokens) for KV head kvh, into the slice's m, l and O.
void run_slice(const PagedAttentionPlan& plan, const Shape& sh, const GemvKernels& gemv, const TileKernels& tiles,
               const TensorView& q, const PagedKVCache& kv, int64_t b, int64_t kvh, int64_t len, int64_t p0, int64_t p1,
               const Slice& t) {
    const int64_t D = sh.head_dim, R = sh.padded_rows, bs = sh.block_size;
    std::memset(t.q, 0, sizeof(float) * size_t(R * D));
    for (int64_t r = 0; r < sh.rows; ++r)
        load_rows(t.q + r * D, D, q, b, r / sh.group, 1, row_head(sh, kvh, r), plan.params.scale * LOG2E);
    std::fill(t.m, t.m + R, NEG_INF);
    std::fill(t.l, t.l + R, 0.0f);
    std::memset(t.o, 0, sizeof(float) * size_t(R * sh.dp));
    std::memset(t.v, 0, sizeof(float) * size_t(bs * sh.dp));  // head_dim's padding stays zero

    const DType dt = kv.k_cache.dtype;
    const int32_t* table = kv.block_table + b * kv.max_blocks_per_seq;
    for (int64_t p = p0; p < p1; ++p) {
        const int64_t page = table[p], j0 = p * bs, n = std::min(bs, len - j0);  // keys j0 .. j0 + n - 1
        for (int64_t r0 = 0; r0 < sh.rows; r0 += GEMV_ROWS)
            gemv.gemv[int(dt)](t.q + r0 * D, D, int(std::min(GEMV_ROWS, sh.rows - r0)), kv.k_cache.at(page, 0, kvh, 0),
                               kv.k_cache.stride[1], n, D, t.s + r0 * bs, bs);
        for (int64_t r = 0; r < R; ++r) {  // keys past the page's end, past the row's range, padded rows
            const KeyRange keys =
                r < sh.rows ? visible_keys(r / sh.group, sh.q_len, len, plan.params.causal, -1) : KeyRange{0, 0};
            const int64_t hi = std::clamp<int64_t>(keys.hi - j0, 0, n);
            std::fill(t.s + r * bs + hi, t.s + (r + 1) * bs, NEG_INF);
        }
        for (int64_t c = 0; c < n; ++c) gemv.to_f32[int(dt)](t.v + c * sh.dp, kv.v_cache.at(page, c, kvh, 0), D);
        if (n < bs) std::memset(t.v + n * sh.dp, 0, sizeof(float) * size_t((bs - n) * sh.dp));
        tiles.softmax_step(t.s, bs, int(R), int(bs), t.m, t.l, t.alpha);
        tiles.pv(t.s, bs, t.v, sh.dp, t.o, sh.dp, t.alpha, int(R), int(bs), int(sh.dp));
    }
}

// Merges the slices of one (sequence, KV head) into out and lse: each slice's (m, l, O) rescaled to
// the largest m. A slice that saw no key (l = 0) adds nothing, so a row no slice saw a key for gets
// zeros and an LSE of -inf; a NaN l (a NaN input) is kept and reaches the output.
void finish(const Shape& sh, const Slice* slices, int64_t n_slices, const TensorView& out, const TensorView* lse,
            int64_t b, int64_t kvh) {
    for (int64_t r = 0; r < sh.rows; ++r) {
        float m = NEG_INF;
        for (int64_t s = 0; s < n_slices; ++s)
            if (slices[s].l[r] != 0.0f) m = std::max(m, slices[s].m[r]);
        float l = 0.0f, w[PAGED_MAX_SPLITS];
        for (int64_t s = 0; s < n_slices; ++s) {
            w[s] = slices[s].l[r] != 0.0f ? std::exp2(slices[s].m[r] - m) : 0.0f;
            l += w[s] * slices[s].l[r];
        }
        const int64_t i = r / sh.group, head = row_head(sh, kvh, r);
        const bool empty = l == 0.0f;
        const float inv = empty ? 0.0f : 1.0f / l;
        for (int64_t d = 0; d < sh.head_dim; ++d) {
            float acc = 0.0f;
            for (int64_t s = 0; s < n_slices; ++s)
                if (w[s] != 0.0f) acc += w[s] * slices[s].o[r * sh.dp + d];
            store_from_float(out.at(b, i, head, d), out.dtype, acc * inv);
        }
        if (lse) *static_cast<float*>(lse->at(b, head, i)) = empty ? NEG_INF : (m + std::log2(l)) * LN2;
    }
}

}  // namespace

bool paged_attention_decode_serves(const PagedAttentionPlan& plan) {
    if (const char* want = std::getenv("FLASHPORT_CPU_PAGED"); want && *want) {  // A/B runs, like FLASHPORT_CPU_GEMM
        const std::string w = want;
        FP_CHECK(w == "decode" || w == "gather", "FLASHPORT_CPU_PAGED=", w,
                 " is not a CPU paged-attention path (use decode or gather)");
        if (w == "gather") return false;
    }
    return plan.q_len <= PAGED_DECODE_MAX_Q_LEN;
}

std::string paged_attention_decode_name() {
    return std::string("cpu.paged_attention.decode.") + tile_kernels().isa;
}

void paged_attention_decode(const PagedAttentionPlan& plan, const TensorView& out, const TensorView& q,
                            const PagedKVCache& kv, const TensorView* lse) {
    const TileKernels& tiles = tile_kernels();
    const GemvKernels* found = gemv_kernels_for(tiles.isa);
    const GemvKernels& gemv = found ? *found : gemv_kernels_generic;
    Shape sh{};
    sh.q_len = plan.q_len;
    sh.group = plan.n_heads / plan.n_kv_heads;
    sh.rows = sh.q_len * sh.group;
    sh.padded_rows = round_up(sh.rows, TILE_MR);
    sh.head_dim = plan.head_dim;
    sh.dp = round_up(plan.head_dim, tiles.vec);
    sh.block_size = plan.block_size;

    // Lengths and block ids are host memory here: checked before any thread starts (a throw must not
    // leave an OpenMP region).
    int64_t max_pages = 0;
    for (int64_t b = 0; b < plan.batch; ++b) {
        const int64_t len = checked_seq_len(plan, kv, b), pages = (len + sh.block_size - 1) / sh.block_size;
        check_block_ids(plan, kv, b, pages);
        max_pages = std::max(max_pages, pages);
    }
    const int threads = omp_get_max_threads();
    const int64_t pairs = plan.batch * plan.n_kv_heads;
    sh.slices =
        std::clamp<int64_t>((2 * threads + pairs - 1) / pairs, 1,
                            std::min<int64_t>(PAGED_MAX_SPLITS, std::max<int64_t>(1, max_pages / MIN_SLICE_PAGES)));
    const int64_t tasks = pairs * sh.slices, per = slice_floats(sh);
    // One slice state per task (merged after), or per thread when nothing is sliced (finished in place).
    const int workers = int(std::min<int64_t>(threads, tasks));
    Buffer state(sizeof(float) * size_t((sh.slices > 1 ? tasks : workers) * per));

    const auto task = [&](int64_t i, float* mem) {
        const int64_t pair = i / sh.slices, s = i % sh.slices, b = pair / plan.n_kv_heads, kvh = pair % plan.n_kv_heads;
        const int64_t len = kv.seq_lens[b], pages = (len + sh.block_size - 1) / sh.block_size;
        const int64_t step = (pages + sh.slices - 1) / sh.slices;
        const Slice t = carve(mem, sh);
        run_slice(plan, sh, gemv, tiles, q, kv, b, kvh, len, std::min(pages, s * step), std::min(pages, (s + 1) * step),
                  t);
        if (sh.slices == 1) finish(sh, &t, 1, out, lse, b, kvh);
    };
    if (workers == 1) {
        for (int64_t i = 0; i < tasks; ++i) task(i, state.as<float>() + (sh.slices > 1 ? i * per : 0));
    } else {
#pragma omp parallel for num_threads(workers) schedule(dynamic, 1)
        for (int64_t i = 0; i < tasks; ++i)
            task(i, state.as<float>() + (sh.slices > 1 ? i : omp_get_thread_num()) * per);
    }
    if (sh.slices == 1) return;
    std::vector<Slice> slices(static_cast<size_t>(tasks));
    for (int64_t i = 0; i < tasks; ++i) slices[size_t(i)] = carve(state.as<float>() + i * per, sh);
    for (int64_t pair = 0; pair < pairs; ++pair)
        finish(sh, slices.data() + pair * sh.slices, sh.slices, out, lse, pair / plan.n_kv_heads,
               pair % plan.n_kv_heads);
}

}  // namespace flashport::cpu
