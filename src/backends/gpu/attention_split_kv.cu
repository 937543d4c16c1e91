// Dense attention for a few query rows against a long KV (AttentionKernel::GPU_FLASH_SPLIT_KV): the
// paged decode kernels (paged_attention_decode.h: each KV head's keys cut into slices processed in
// parallel, the slices merged by their LSEs) over the dense K and V seen as a paged cache.
//
// The view: k [batch, kv_len, n_kv_heads, head_dim] with strides (sb, sl, sh, 1) is the cache
// [num_blocks = batch, block_size = kv_len rounded up to 16, n_kv_heads, head_dim] with the same
// strides, block b holding sequence b (block table row b = {b}, seq_lens[b] = kv_len). The kernels read
// no slot at or past seq_lens[b], so the rounded-up tail of the last block is never touched, and
// nothing is copied. Why not the flash kernels: their grid is a block per (query tile, head), so one
// query row against 64k keys runs batch · n_heads blocks that each walk every key, and a GQA group's
// heads each read its K and V again; the decode kernel serves a whole group per block and splits the
// keys until the SMs are full.
//
// Varlen calls (bottom of the file) do the same over packed sequences: the packed K and V as a cache
// whose block i starts at packed row i (sequence b is block cu_k[b]), the queries found per sequence
// (DecodeLayout's spans), and, when the caller gives max_seqlen_k, splits cut by length so that a long
// sequence takes more of them than a short one.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backends/gpu/attention_gpu.h"
#include "backends/gpu/attention_sequence.cuh"
#include "backends/gpu/common.cuh"
#include "backends/gpu/head_dim_switch.h"
#include "backends/gpu/paged_attention_decode.h"
#include "backends/gpu/runtime.h"
#include "flashport/paged_attention.h"

namespace flashport::gpu {
namespace {

constexpr int64_t round_up_16(int64_t n) {
    return (n + PAGED_BLOCK_SIZE_STEP - 1) / PAGED_BLOCK_SIZE_STEP * PAGED_BLOCK_SIZE_STEP;
}
constexpr size_t align256(size_t n) { return (n + 255) / 256 * 256; }
// The decode kernels index a sequence's keys with 32-bit positions up to 2^30 (their MAX_CAPACITY).
constexpr int64_t MAX_BLOCK_SIZE = int64_t(1) << 30;

// k or v as the cache's [batch, block_size, n_kv_heads, head_dim] view (same data and strides).
TensorView as_blocks(const TensorView& t, int64_t block_size) {
    TensorView blocks = t;
    blocks.shape[1] = block_size;
    return blocks;
}

// The paged view of the dense call; its block table and lengths are set by run_split_kv.
PagedKVCache dense_cache(const AttentionPlan& plan, const TensorView& k, const TensorView& v) {
    const int64_t block_size = round_up_16(plan.shape.kv_len);
    return {as_blocks(k, block_size), as_blocks(v, block_size), nullptr, 1, nullptr};
}

// Varlen: the packed k or v ([1, total_k, n_kv_heads, head_dim], batch-1 view) as a cache of total_k + 1
// overlapping blocks of total_k rounded up to 16 slots, block i starting at packed row i (the block
// stride is the row stride). Sequence b is block cu_k[b] (an empty last one may start at total_k);
// its keys are slots below cu_k[b + 1] - cu_k[b], so no slot past them is read. Blocks overlap, which
// a cache that is only read allows.
TensorView as_row_blocks(const TensorView& t) {
    TensorView blocks = t;
    blocks.shape[0] = t.dim(1) + 1;
    blocks.shape[1] = round_up_16(t.dim(1));
    blocks.stride[0] = t.stride[1];
    return blocks;
}
PagedKVCache varlen_cache(const TensorView& k, const TensorView& v) {
    return {as_row_blocks(k), as_row_blocks(v), nullptr, 1, nullptr};
}

// Varlen q, out and lse (batch-1 views) seen by the decode kernels: [batch, max_seqlen_q, ...] with batch
// stride 0, the rows of sequence b found through DecodeLayout.
TensorView as_spans(const TensorView& t, int64_t batch, int64_t max_q, int position_dim) {
    TensorView r = t;
    r.shape[0] = batch;
    r.stride[0] = 0;
    r.shape[size_t(position_dim)] = max_q;
    return r;
}

// What plan_paged_attention would produce for the paged view, without its host-side checks of the
// table pointers (set at run time): the split count, the decode variant and the workspace. max_len: the
// longest sequence's key count, which bounds the split count. total_keys > 0: the sequences' lengths
// are uneven (varlen with max_seqlen_k), and the splits are cut by length from total_keys in all
// (plan_paged_attention_decode_by_length), their length in split_tokens.
struct DecodeSetup {
    PagedAttentionPlan plan;
    int split_tokens = 0;
};
DecodeSetup decode_plan(const AttentionPlan& plan, const TensorView& out, const TensorView& q, const PagedKVCache& kv,
                        const TensorView* lse, int64_t max_len, int64_t total_keys = 0) {
    const AttentionShape& s = plan.shape;
    PagedAttentionPlan p;
    p.batch = s.batch;
    p.q_len = s.q_len;
    p.n_heads = s.n_heads;
    p.n_kv_heads = s.n_kv_heads;
    p.head_dim = s.head_dim;
    p.num_blocks = kv.k_cache.dim(0);
    p.block_size = kv.k_cache.dim(1);
    p.max_blocks_per_seq = 1;
    p.params.scale = plan.params.scale;
    p.params.causal = plan.params.causal;
    p.params.max_seq_len = max_len;
    p.device = plan.device;
    DecodeSetup setup;
    if (total_keys > 0)
        setup.split_tokens = plan_paged_attention_decode_by_length(p, out, q, kv, lse, total_keys);
    else
        plan_paged_attention_decode(p, out, q, kv, lse);
    setup.plan = p;
    return setup;
}

// A call's stream-ordered scratch: `arrays` int32 arrays of [batch] entries (the table, the lengths,
// ...), then the decode's workspace, each part 256-byte aligned.
class Scratch {
  public:
    Scratch(int arrays, int batch, size_t decode_bytes, cudaStream_t stream, const char* what)
        : part_(align256(size_t(batch) * 4)), arrays_(arrays), buf_(arrays * part_ + decode_bytes, stream, what) {}
    int32_t* array(int i) const { return reinterpret_cast<int32_t*>(base() + size_t(i) * part_); }
    void* decode_workspace(size_t bytes) const { return bytes > 0 ? base() + size_t(arrays_) * part_ : nullptr; }

  private:
    char* base() const { return static_cast<char*>(buf_.data()); }
    size_t part_;
    int arrays_;
    StreamBuffer buf_;
};

// Block table row b = {b} and seq_lens[b] = kv_len, for b < batch.
__global__ void dense_blocks_kernel(int32_t* table, int32_t* seq_lens, int batch, int kv_len) {
    const int b = int(blockIdx.x * blockDim.x + threadIdx.x);
    if (b < batch) {
        table[b] = b;
        seq_lens[b] = kv_len;
    }
}

// Sequence b of a varlen call as the decode kernels read it: block cu_k[b] of varlen_cache, its key
// count, and its query span. A sequence whose offsets break attention_varlen's rules (sequence_rows)
// gets no queries and no keys, and its block poisons every row it claims, all heads and the LSE, as
// the flash kernel does (attention_sequence.cuh). Grid: one block per sequence.
template <DType DT>
__global__ void varlen_blocks_kernel(AttentionArgs a, int head_dim, int32_t* table, int32_t* seq_lens,
                                     int32_t* q_starts, int32_t* q_lens) {
    const int b = int(blockIdx.x);
    const SequenceRows s = sequence_rows(a, b);
    if (threadIdx.x == 0) {
        table[b] = s.ok ? int32_t(s.k_row0) : 0;
        seq_lens[b] = s.kv_len;  // 0 when broken
        q_starts[b] = s.ok ? int32_t(s.q_row0) : 0;
        q_lens[b] = s.q_len;
    }
    if (!s.ok)
        for (int h = 0; h < a.n_heads; ++h) poison_sequence<DT>(a, b, h, head_dim);
}

std::atomic<bool>& split_kv_slot() {
    static std::atomic<bool> on{[] {
        const char* env = std::getenv("FLASHPORT_GPU_SPLIT_KV");
        return !(env && std::strcmp(env, "0") == 0);
    }()};
    return on;
}

// The limits both layouts share; min_total_kv is what the whole KV axis must hold.
bool split_kv_fits(const AttentionPlan& plan, const TensorView& k, const TensorView& v, int64_t min_total_kv) {
    const AttentionShape& s = plan.shape;
    const FlashVariant variant = flash_variant();  // the split-KV kernels are the mma family's
    return split_kv_enabled() && (variant == FlashVariant::AUTO || variant == FlashVariant::MMA) && s.batch > 0 &&
           s.n_heads > 0 &&
           s.q_len <= PAGED_DECODE_MAX_Q_LEN && s.kv_len >= min_total_kv && DecodeHeadDims::contains(s.head_dim) &&
           plan.params.window_left < 0 && k.stride[3] == 1 && v.stride[3] == 1 && s.n_kv_heads <= 65535 &&
           round_up_16(s.kv_len) <= MAX_BLOCK_SIZE;
}

// Sets the route and the name: "gpu.paged_attention.decode.mma.d128.splits66" becomes
// "gpu.flash.split_kv.mma.d128.splits66".
void name_split_kv(AttentionPlan& plan, const PagedAttentionPlan& p) {
    plan.route = AttentionKernel::GPU_FLASH_SPLIT_KV;
    const std::string decode = "gpu.paged_attention.decode.";
    plan.kernel = "gpu.flash.split_kv." + p.kernel.substr(p.kernel.rfind(decode, 0) == 0 ? decode.size() : 0);
}

}  // namespace

void set_split_kv(bool on) { split_kv_slot().store(on); }
bool split_kv_enabled() { return split_kv_slot().load(); }

bool split_kv_serves(const AttentionPlan& plan, const TensorView& out, const TensorView& q, const TensorView& k,
                     const TensorView& v) {
    (void)out, (void)q;
    return split_kv_fits(plan, k, v, SPLIT_KV_MIN_KV_LEN);
}

void plan_split_kv(AttentionPlan& plan, const TensorView& out, const TensorView& q, const TensorView& k,
                   const TensorView& v, const TensorView* lse) {
    name_split_kv(plan, decode_plan(plan, out, q, dense_cache(plan, k, v), lse, plan.shape.kv_len).plan);
}

void run_split_kv(const AttentionPlan& plan, const TensorView& out, const TensorView& q, const TensorView& k,
                  const TensorView& v, const TensorView* lse, void* stream) {
    check_current_device("attention", q.device);
    PagedKVCache kv = dense_cache(plan, k, v);
    const PagedAttentionPlan p = decode_plan(plan, out, q, kv, lse, plan.shape.kv_len).plan;
    const int batch = int(plan.shape.batch);
    const cudaStream_t s = as_stream(stream);
    const Scratch ws(2, batch, p.workspace_bytes, s, "attention (split-KV): the block table and partials");
    int32_t *table = ws.array(0), *seq_lens = ws.array(1);
    constexpr int THREADS = 256;
    launch_kernel(dense_blocks_kernel, dim3(unsigned((batch + THREADS - 1) / THREADS)), dim3(THREADS), 0, s, table,
                  seq_lens, batch, int(plan.shape.kv_len));
    kv.block_table = table;
    kv.seq_lens = seq_lens;
    run_paged_attention_decode(p, out, q, kv, lse, ws.decode_workspace(p.workspace_bytes), stream);
}

// ---- Varlen -------------------------------------------------------------------------------------
// The plan's shape is the varlen one (plan_attention_varlen): batch sequences, q_len the longest query
// count, kv_len total_k. Per-sequence lengths live on the GPU, so the host sees only their sum.

namespace {
// The varlen call's decode plan. With the caller's max_seqlen_k (clamped to total_k) the lengths are
// taken as uneven and the splits are cut by length, so the longest sequence takes the most blocks;
// without it, total_k bounds every sequence and each is cut into equal slices.
DecodeSetup varlen_decode_plan(const AttentionPlan& plan, const TensorView& out, const TensorView& q,
                               const PagedKVCache& kv, const TensorView* lse, int64_t max_seqlen_k) {
    const int64_t total_k = plan.shape.kv_len;
    if (max_seqlen_k <= 0) return decode_plan(plan, out, q, kv, lse, total_k);
    return decode_plan(plan, out, q, kv, lse, std::min(max_seqlen_k, total_k), total_k);
}
}  // namespace

bool split_kv_serves_varlen(const AttentionPlan& plan, const TensorView& k, const TensorView& v) {
    // kv_len is total_k: at least SPLIT_KV_MIN_KV_LEN keys per sequence on average, the dense rule's
    // bound applied to the mean length, which is all the host knows. Short sequences cost little either
    // way: their splits come out empty (decode_block sizes them from each sequence's own length).
    const AttentionShape& s = plan.shape;
    return s.batch <= 65535 && s.q_len >= 1 && s.kv_len < INT_MAX && s.batch * s.q_len * s.n_heads <= INT_MAX &&
           split_kv_fits(plan, k, v, SPLIT_KV_MIN_KV_LEN * s.batch);
}

void plan_split_kv_varlen(AttentionPlan& plan, const TensorView& out, const TensorView& q, const TensorView& k,
                          const TensorView& v, const TensorView* lse, int64_t max_seqlen_k) {
    const AttentionShape& s = plan.shape;
    const TensorView lse_spans = lse ? as_spans(*lse, s.batch, s.q_len, 2) : TensorView{};
    name_split_kv(plan, varlen_decode_plan(plan, as_spans(out, s.batch, s.q_len, 1), as_spans(q, s.batch, s.q_len, 1),
                                           varlen_cache(k, v), lse ? &lse_spans : nullptr, max_seqlen_k)
                            .plan);
}

void run_split_kv_varlen(const AttentionPlan& plan, const TensorView& out, const TensorView& q, const TensorView& k,
                         const TensorView& v, const TensorView* lse, const VarlenSeqsView& seqs, void* stream) {
    check_current_device("attention_varlen", q.device);
    const AttentionShape& sh = plan.shape;
    const TensorView q_spans = as_spans(q, sh.batch, sh.q_len, 1), out_spans = as_spans(out, sh.batch, sh.q_len, 1);
    const TensorView lse_spans = lse ? as_spans(*lse, sh.batch, sh.q_len, 2) : TensorView{};
    const TensorView* lse_view = lse ? &lse_spans : nullptr;
    PagedKVCache kv = varlen_cache(k, v);
    const DecodeSetup setup = varlen_decode_plan(plan, out_spans, q_spans, kv, lse_view, seqs.max_seqlen_k);
    const PagedAttentionPlan& p = setup.plan;
    const int batch = int(sh.batch);
    const cudaStream_t s = as_stream(stream);
    const Scratch ws(4, batch, p.workspace_bytes, s, "attention_varlen (split-KV): the sequences' blocks and partials");
    int32_t *table = ws.array(0), *seq_lens = ws.array(1), *q_starts = ws.array(2), *q_lens = ws.array(3);
    const AttentionArgs args = varlen_args(plan, out, q, k, v, lse, seqs);
    constexpr int THREADS = 128;
    const int d = int(sh.head_dim);
    if (q.dtype == DType::F16)
        launch_kernel(varlen_blocks_kernel<DType::F16>, dim3(unsigned(batch)), dim3(THREADS), 0, s, args, d, table,
                      seq_lens, q_starts, q_lens);
    else
        launch_kernel(varlen_blocks_kernel<DType::BF16>, dim3(unsigned(batch)), dim3(THREADS), 0, s, args, d, table,
                      seq_lens, q_starts, q_lens);
    FP_GPU_CHECK_LAUNCH("varlen_blocks_kernel");
    kv.block_table = table;
    kv.seq_lens = seq_lens;
    const DecodeLayout layout{q_starts, q_lens, setup.split_tokens};
    run_paged_attention_decode(p, out_spans, q_spans, kv, lse_view, ws.decode_workspace(p.workspace_bytes), stream,
                               &layout);
}

}  // namespace flashport::gpu
