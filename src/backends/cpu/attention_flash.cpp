// CPU flash attention: tiled, with the online softmax of FlashAttention-2 (Dao, 2023, Alg. 1), so
// extra memory is O(kv_len · head_dim) for packed K/V plus fixed-size tiles per thread, never
// O(q_len · kv_len).
//
// Work is split into query tiles. A tile holds the query heads that share one KV head (GQA), rows
// ordered (position, head-in-group), so each packed K/V tile is reused by the whole group. K and V
// of a (batch, kv-head) are converted to fp32 once and packed — K transposed into [head_dim][BC]
// blocks, V into [BC][dp] rows with head_dim padded to the vector width — and then shared by
// every query tile of that head.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/cpu/attention_cpu.h"
#include "backends/cpu/attention_packing.h"
#include "backends/cpu/kernels/tile_kernels.h"
#include "flashport/memory.h"

namespace flashport::cpu {
namespace {

constexpr int64_t BC = 128;         // keys per tile: S tile [rows][BC] stays in L1/L2
constexpr int64_t TILE_ROWS = 64;   // query rows (positions × heads in the group) per tile

struct Geometry {
    int64_t group;       // query heads per KV head
    int64_t positions;   // query positions per tile
    int64_t rows;        // padded rows per tile (multiple of TILE_MR)
    int64_t dp;          // head_dim padded to the vector width
    int64_t kv_blocks;   // ceil(kv_len / BC)
    int64_t q_tiles;     // ceil(q_len / positions)
    int64_t k_floats;    // packed K of one (batch, kv-head)
    int64_t v_floats;    // packed V of one (batch, kv-head)
    int64_t thread_floats;
};

Geometry geometry(const AttentionShape& s, int vec) {
    Geometry g{};
    g.group = s.n_heads / s.n_kv_heads;
    g.positions = std::max<int64_t>(1, TILE_ROWS / g.group);
    g.positions = std::min(g.positions, std::max<int64_t>(1, s.q_len));
    g.rows = round_up(g.positions * g.group, TILE_MR);
    g.dp = round_up(s.head_dim, vec);
    g.kv_blocks = (s.kv_len + BC - 1) / BC;
    g.q_tiles = (s.q_len + g.positions - 1) / g.positions;
    g.k_floats = g.kv_blocks * s.head_dim * BC;
    g.v_floats = g.kv_blocks * BC * g.dp;
    // Q [rows][head_dim], S [rows][BC], O [rows][dp], m, l, alpha [rows], then KeyRange [rows]
    static_assert(sizeof(KeyRange) == 4 * sizeof(float));
    g.thread_floats = round_up(g.rows * (s.head_dim + BC + g.dp + 3 + 4), 16);
    return g;
}

// Packs block `kb` of K (transposed) and V for one (batch, kv-head); keys past kv_len are zero.
void pack_kv_block(float* kt, float* vp, const Geometry& g, const TensorView& k, const TensorView& v, int64_t b,
                   int64_t kvh, int64_t kb) {
    const int64_t head_dim = k.shape[3], kv_len = k.shape[1];
    float* kt_blk = kt + kb * head_dim * BC;
    float* v_blk = vp + kb * BC * g.dp;
    std::memset(v_blk, 0, sizeof(float) * size_t(BC * g.dp));
    load_rows(v_blk, g.dp, v, b, kb * BC, BC, kvh, 1.0f);
    for (int64_t c = 0; c < BC; ++c) {
        const int64_t j = kb * BC + c;
        for (int64_t d = 0; d < head_dim; ++d)
            kt_blk[d * BC + c] = j < kv_len ? load_as_float(k.at(b, j, kvh, d), k.dtype) : 0.0f;
    }
}

struct TileRows {
    KeyRange* keys;          // per row
    int64_t n_real;          // rows that map to a real (position, head)
    int64_t lo, hi;          // union of the real rows' key ranges
    int64_t max_lo, min_hi;  // intersection: blocks inside it need no mask
};

void compute_tile(const TileKernels& kern, const Geometry& g, const AttentionPlan& plan, const TensorView& out,
                  const TensorView& q, const TensorView* lse, const float* kt, const float* vp, int64_t b, int64_t kvh,
                  int64_t tile, float* scratch) {
    const AttentionShape& s = plan.shape;
    const int64_t D = s.head_dim, R = g.rows;
    float* Q = scratch;
    float* S = Q + R * D;
    float* O = S + R * BC;
    float* m = O + R * g.dp;
    float* l = m + R;
    float* alpha = l + R;
    TileRows tr;
    tr.keys = reinterpret_cast<KeyRange*>(alpha + R);  // 16-byte aligned: R is a multiple of 4

    // Gather the tile's query rows, pre-scaled so scores come out in log2 units for exp2.
    const int64_t pos0 = tile * g.positions;
    const int64_t n_pos = std::min(g.positions, s.q_len - pos0);
    tr.n_real = n_pos * g.group;
    tr.lo = s.kv_len, tr.hi = 0, tr.max_lo = 0, tr.min_hi = s.kv_len;
    std::memset(Q, 0, sizeof(float) * size_t(R * D));
    for (int64_t r = 0; r < tr.n_real; ++r) {
        const int64_t pos = pos0 + r / g.group, head = kvh * g.group + r % g.group;
        load_rows(Q + r * D, D, q, b, pos, 1, head, plan.params.scale * LOG2E);
        tr.keys[r] = visible_keys(pos, s.q_len, s.kv_len, plan.params.causal, plan.params.window_left);
        tr.lo = std::min(tr.lo, tr.keys[r].lo), tr.hi = std::max(tr.hi, tr.keys[r].hi);
        tr.max_lo = std::max(tr.max_lo, tr.keys[r].lo), tr.min_hi = std::min(tr.min_hi, tr.keys[r].hi);
    }
    std::fill(m, m + R, -std::numeric_limits<float>::infinity());
    std::fill(l, l + R, 0.0f);
    std::memset(O, 0, sizeof(float) * size_t(R * g.dp));

    // Only blocks some row can see; causal tiles stop at their diagonal.
    for (int64_t kb = tr.lo / BC; tr.lo < tr.hi && kb * BC < tr.hi; ++kb) {
        const int64_t j0 = kb * BC;
        kern.qk(Q, D, kt + kb * D * BC, BC, S, BC, int(R), int(BC), int(D));
        if (tr.max_lo > j0 || tr.min_hi < j0 + BC) {  // some row sees only part of this block
            for (int64_t r = 0; r < tr.n_real; ++r) {
                float* row = S + r * BC;
                const int64_t a = std::clamp<int64_t>(tr.keys[r].lo - j0, 0, BC);
                const int64_t e = std::clamp<int64_t>(tr.keys[r].hi - j0, a, BC);
                std::fill(row, row + a, -std::numeric_limits<float>::infinity());
                std::fill(row + e, row + BC, -std::numeric_limits<float>::infinity());
            }
        }
        kern.softmax_step(S, BC, int(R), int(BC), m, l, alpha);
        kern.pv(S, BC, vp + kb * BC * g.dp, g.dp, O, g.dp, alpha, int(R), int(BC), int(g.dp));
    }

    for (int64_t r = 0; r < tr.n_real; ++r) {
        const int64_t pos = pos0 + r / g.group, head = kvh * g.group + r % g.group;
        const bool empty = l[r] == 0.0f;  // the row saw no key
        const float inv = empty ? 0.0f : 1.0f / l[r];
        for (int64_t d = 0; d < D; ++d) store_from_float(out.at(b, pos, head, d), out.dtype, O[r * g.dp + d] * inv);
        if (lse)
            *static_cast<float*>(lse->at(b, head, pos)) =
                empty ? -std::numeric_limits<float>::infinity() : (m[r] + std::log2(l[r])) * LN2;
    }
}

}  // namespace

std::string flash_kernel_name() { return std::string("cpu.flash.") + tile_kernels().isa; }

void attention_flash(const AttentionPlan& plan, const TensorView& out, const TensorView& q, const TensorView& k,
                     const TensorView& v, const TensorView* lse) {
    const AttentionShape& s = plan.shape;
    if (s.batch == 0 || s.q_len == 0 || s.n_heads == 0) return;
    const TileKernels& kern = tile_kernels();
    const Geometry g = geometry(s, kern.vec);
    const int threads = omp_get_max_threads();

    // Pack as many (batch, kv-head) groups at once as it takes to give every thread work; with long
    // prompts that is one, keeping packed K/V at O(kv_len · head_dim).
    const int64_t n_groups = s.batch * s.n_kv_heads;
    const int64_t chunk = std::clamp<int64_t>((2 * threads + g.q_tiles - 1) / g.q_tiles, 1, n_groups);
    Buffer packed(sizeof(float) * size_t(chunk * (g.k_floats + g.v_floats)));
    Buffer scratch(sizeof(float) * size_t(threads * g.thread_floats));
    float* kt_all = packed.as<float>();
    float* vp_all = kt_all + chunk * g.k_floats;

    for (int64_t g0 = 0; g0 < n_groups; g0 += chunk) {
        const int64_t gc = std::min(chunk, n_groups - g0);
#pragma omp parallel num_threads(threads)
        {
#pragma omp for schedule(static)
            for (int64_t i = 0; i < gc * g.kv_blocks; ++i) {
                const int64_t gi = i / g.kv_blocks, grp = g0 + gi;
                pack_kv_block(kt_all + gi * g.k_floats, vp_all + gi * g.v_floats, g, k, v, grp / s.n_kv_heads,
                              grp % s.n_kv_heads, i % g.kv_blocks);
            }
            float* mine = scratch.as<float>() + omp_get_thread_num() * g.thread_floats;
            // Dynamic: causal tiles near the top of the matrix have far fewer blocks than the bottom.
#pragma omp for schedule(dynamic, 1)
            for (int64_t i = 0; i < gc * g.q_tiles; ++i) {
                const int64_t gi = i / g.q_tiles, grp = g0 + gi;
                compute_tile(kern, g, plan, out, q, lse, kt_all + gi * g.k_floats, vp_all + gi * g.v_floats,
                             grp / s.n_kv_heads, grp % s.n_kv_heads, i % g.q_tiles, mine);
            }
        }
    }
}

}  // namespace flashport::cpu
