// Paged decode attention on the GPU, host side: the GPU limits of a request, the variant (tensor-core,
// matrix-core or portable split kernel), the split count, where the splits are merged (in the split
// kernel, or a separate combine kernel), the workspace layout and the launch. Kernels:
// paged_attention_decode.cuh (portable split + combine; instances in _f16.cu, _bf16.cu), CUDA only
// paged_attention_decode_mma.cuh (instances in _mma_f16.cu, _mma_bf16.cu), HIP only
// paged_attention_decode_mfma.cuh (instances in _mfma_f16.cu, _mfma_bf16.cu).
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "backends/gpu/attention_common.cuh"
#include "backends/gpu/attention_gpu.h"
#include "backends/gpu/head_dim_switch.h"
#include "backends/gpu/paged_attention_decode.h"
#include "backends/gpu/runtime.h"
#include "backends/gpu/view_strides.h"
#include "flashport/memory.h"
#include "flashport/device.h"

namespace flashport::gpu {
namespace {

// A split should cover at least this many tiles, so its fixed costs (loading Q, the final reduction,
// the partial's write and re-read) stay small against its K/V traffic.
constexpr int64_t MIN_TILES_PER_SPLIT = 4;
// The largest KV capacity (max_blocks_per_seq · block_size) the kernels index with 32-bit positions.
constexpr int64_t MAX_CAPACITY = int64_t(1) << 30;

size_t align256(size_t n) { return (n + 255) / 256 * 256; }

std::atomic<DecodeVariant>& variant_slot() {
    static std::atomic<DecodeVariant> v{[] {
        const char* env = std::getenv("FLASHPORT_GPU_DECODE");
        if (env && std::strcmp(env, "mfma") == 0) return DecodeVariant::MFMA;
        return env && std::strcmp(env, "portable") == 0 ? DecodeVariant::PORTABLE : DecodeVariant::MMA;
    }()};
    return v;
}

std::atomic<DecodeCombine>& combine_slot() {
    static std::atomic<DecodeCombine> c{[] {
        const char* env = std::getenv("FLASHPORT_DECODE_COMBINE");
        return env && std::strcmp(env, "fused") == 0 ? DecodeCombine::FUSED : DecodeCombine::SEPARATE;
    }()};
    return c;
}

std::atomic<bool>& owned_counters_slot() {
    static std::atomic<bool> on{true};
    return on;
}

// The fused merge's split counters, owned by the op: one buffer of OWNED_COUNTERS uint32 per (GPU,
// stream), zeroed once when the stream first needs it. Every launch leaves the counters it used at 0
// (each group's last block resets its own), so no launch needs a memset first, and in a captured
// decode step the split kernel follows the qkv product through a dependent launch with no memset node
// between them. Launches on one stream run one after another, so they never share a counter; two
// streams have two buffers. A buffer lives as long as the process: a captured graph keeps its address.
// Null where the request needs more counters than a buffer holds, or where the stream is capturing
// and has no buffer yet (nothing may allocate then): the launch then counts in the workspace, zeroed
// first. 16 KB per stream; Qwen2.5-7B needs 4 counters per sequence, 256 at batch 64.
constexpr size_t OWNED_COUNTERS = 4096;

unsigned* owned_counters(size_t needed, cudaStream_t stream) {
    if (!owned_counters_slot().load() || needed > OWNED_COUNTERS) return nullptr;
    int dev = 0;
    FP_GPU_CHECK(cudaGetDevice(&dev), "querying the current GPU");
    static std::mutex mutex;
    static std::map<std::pair<int, cudaStream_t>, unsigned*> buffers;
    std::lock_guard<std::mutex> lock(mutex);
    unsigned*& buffer = buffers[{dev, stream}];
    if (buffer) return buffer;
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    FP_GPU_CHECK(cudaStreamIsCapturing(stream, &capture), "querying a stream's capture status");
    if (capture != cudaStreamCaptureStatusNone) return nullptr;
    void* p = tracked_alloc(OWNED_COUNTERS * 4, Device::gpu(dev));  // counted in memory_stats, never freed
    FP_GPU_CHECK(cudaMemsetAsync(p, 0, OWNED_COUNTERS * 4, stream), "zeroing the paged decode split counters");
    buffer = static_cast<unsigned*>(p);
    return buffer;
}
constexpr const char* SEPARATE_SUFFIX = ".combine";  // the plan's kernel name with DecodeCombine::SEPARATE

// The workspace with S > 1 splits: ws_o [rows][S][D] fp32, ws_lse [rows][S] fp32, then one uint32
// counter per (sequence, KV head, row chunk): the split kernels' grid without its split axis.
size_t counters_offset(size_t rows, size_t splits, size_t head_dim) {
    return align256(rows * splits * head_dim * 4) + align256(rows * splits * 4);
}

// The kernel that serves this head dim and dtype now (DecodeVariant's rules).
DecodeVariant effective_variant(int head_dim, DType dtype) {
    const DecodeVariant v = variant_slot().load();
    if (v == DecodeVariant::PORTABLE) return v;
    if (v == DecodeVariant::MMA && paged_attention_decode_mma_available(head_dim)) return v;
    if (paged_attention_decode_mfma_available(dtype)) return DecodeVariant::MFMA;
    FP_CHECK(v != DecodeVariant::MFMA || !mfma_kernels_built(), "paged_attention: the MFMA decode kernel ",
             "(FLASHPORT_GPU_DECODE=mfma) needs AMD matrix cores for ", dtype_name(dtype), "; this device is ",
             current_device_info().arch, ". Unset FLASHPORT_GPU_DECODE or set it to portable");
    return DecodeVariant::PORTABLE;
}

const char* variant_name(DecodeVariant v) {
    return v == DecodeVariant::MMA ? "mma" : v == DecodeVariant::MFMA ? "mfma" : "portable";
}

// Query rows per block: one 16-row matrix tile for the mma and MFMA kernels.
int rows_per_block(DecodeVariant v) { return v == DecodeVariant::PORTABLE ? DECODE_ROWS : DECODE_MMA_ROWS; }

int64_t row_chunks(const PagedAttentionPlan& p, DecodeVariant v) {
    return (p.n_heads / p.n_kv_heads * p.q_len + rows_per_block(v) - 1) / rows_per_block(v);
}

template <DType DT>
int blocks_per_sm(int head_dim, DecodeVariant v) {
#if defined(FLASHPORT_GPU_CUDA)
    if (v == DecodeVariant::MMA) return paged_attention_decode_mma_blocks_per_sm<DT>(head_dim);
#endif
#if defined(FLASHPORT_GPU_MFMA_KERNELS)
    if (v == DecodeVariant::MFMA) return paged_attention_decode_mfma_blocks_per_sm<DT>(head_dim);
#endif
    (void)v;
    return paged_attention_decode_portable_blocks_per_sm<DT>(head_dim);
}

void check_rows(const TensorView& t, const char* name) {
    FP_CHECK(t.stride[3] == 1, "paged_attention on GPU: ", name, " must have a contiguous head_dim (stride 1), got ",
             t.describe());
    check_16_byte_rows("paged_attention on GPU", t, name);
}

// Splits per sequence: enough blocks to fill every SM's resident slots once (a second, partial wave
// would leave SMs idle at the end), but no split shorter than MIN_TILES_PER_SPLIT tiles of the longest
// sequence. Batch 1 of Qwen2.5-7B (4 KV heads) splits each KV head's keys ~66 ways on an H200 (mma
// kernel, 2 resident blocks per SM). Batch 64 already has 256 blocks against 264 slots (2 per SM for
// either kernel at d128) and runs unsplit: one wave that fills 97% of the slots; 2 or 3 splits would
// need 2 or 3 waves of the same per-slot work and only add the combine's traffic, so the rule stays.
// The longest sequence's key count the plan knows: max_seq_len within the table's capacity.
int64_t longest_sequence(const PagedAttentionPlan& p) {
    const int64_t capacity = p.max_blocks_per_seq * p.block_size;
    return p.params.max_seq_len > 0 ? std::min(p.params.max_seq_len, capacity) : capacity;
}

// Split blocks the device holds at once: SMs x the split kernel's resident blocks per SM.
int64_t resident_slots(const PagedAttentionPlan& p, DType dtype, DecodeVariant v) {
    const int per_sm = dtype == DType::F16 ? blocks_per_sm<DType::F16>(int(p.head_dim), v)
                                           : blocks_per_sm<DType::BF16>(int(p.head_dim), v);
    return int64_t(current_device_info().sm_count) * per_sm;
}

int choose_splits(const PagedAttentionPlan& p, DType dtype, DecodeVariant v) {
    const int64_t max_len = longest_sequence(p);
    // The MFMA kernel walks the portable kernel's tiles.
    const int64_t tile =
        v == DecodeVariant::MMA ? DECODE_MMA_TILE_TOKENS : decode_portable_tile_tokens(int(p.head_dim));
    const int64_t tiles = (max_len + tile - 1) / tile;
    const int64_t resident = resident_slots(p, dtype, v);
    const int64_t base = p.batch * p.n_kv_heads * row_chunks(p, v);
    int64_t splits = std::max<int64_t>(1, resident / std::max<int64_t>(1, base));
    splits = std::min(splits, std::max<int64_t>(1, tiles / MIN_TILES_PER_SPLIT));
    return int(std::min<int64_t>(splits, PAGED_MAX_SPLITS));
}

}  // namespace

void set_decode_variant(DecodeVariant variant) { variant_slot().store(variant); }
DecodeVariant decode_variant() { return variant_slot().load(); }
void set_decode_combine(DecodeCombine combine) { combine_slot().store(combine); }
DecodeCombine decode_combine() { return combine_slot().load(); }
void set_decode_owned_counters(bool on) { owned_counters_slot().store(on); }
const unsigned* decode_owned_counters(void* stream) { return owned_counters(0, as_stream(stream)); }
size_t decode_owned_counters_size() { return OWNED_COUNTERS; }

size_t paged_attention_decode_counters_offset(int64_t rows, int num_splits, int64_t head_dim) {
    return counters_offset(size_t(rows), size_t(num_splits), size_t(head_dim));
}

bool paged_attention_decode_mfma_available(DType dtype) {
    return mfma_kernels_built() && gpu_device_count() > 0 && matrix_cores_cover(current_device_info().matrix_cores, dtype);
}

bool paged_attention_decode_mma_available(int head_dim) {
#if defined(FLASHPORT_GPU_CUDA)
    if (current_device_info().major < 8) return false;
    return decode_mma_smem_bytes(head_dim, 2) <= current_device_info().max_smem_optin;  // two stages at least
#else
    (void)head_dim;
    return false;
#endif
}

void check_paged_gpu_views(const TensorView& out, const TensorView& q, const PagedKVCache& kv) {
    const int dev = q.device.index;
    FP_CHECK(dev >= 0 && dev < gpu_device_count(), "paged_attention: ", q.device.name(), " does not exist (",
             gpu_device_count(), " GPU(s) present)");
    FP_CHECK(q.dtype == DType::F16 || q.dtype == DType::BF16, "paged_attention on GPU takes fp16 or bf16, got ",
             dtype_name(q.dtype));
    for (auto [t, name] : {std::pair{&q, "q"}, {&out, "out"}, {&kv.k_cache, "k_cache"}, {&kv.v_cache, "v_cache"}})
        check_rows(*t, name);
}

namespace {

// plan_paged_attention_decode's body; split_tokens > 0 (by length) only adds "x<tokens>" to the name.
void plan_decode(PagedAttentionPlan& plan, const TensorView& out, const TensorView& q, const PagedKVCache& kv,
                 const TensorView* lse, int split_tokens) {
    check_paged_gpu_views(out, q, kv);
    FP_CHECK(DecodeHeadDims::contains(plan.head_dim), "paged_attention on GPU supports head_dim ",
             DecodeHeadDims::text(), ", got ", plan.head_dim);
    (void)lse;  // any strides
    FP_CHECK(plan.batch <= 65535 && plan.n_kv_heads <= 65535, "paged_attention on GPU: batch (", plan.batch,
             ") and n_kv_heads (", plan.n_kv_heads, ") must each be at most 65535 (grid limits)");
    FP_CHECK(plan.num_blocks <= INT_MAX && plan.max_blocks_per_seq * plan.block_size <= MAX_CAPACITY,
             "paged_attention on GPU: num_blocks (", plan.num_blocks, ") must fit in 32 bits and max_blocks_per_seq · "
             "block_size (", plan.max_blocks_per_seq * plan.block_size, ") be at most ", MAX_CAPACITY);
    FP_CHECK(plan.batch * plan.q_len * plan.n_heads <= INT_MAX, "paged_attention on GPU: batch · q_len · n_heads (",
             plan.batch * plan.q_len * plan.n_heads, ") must fit in 32 bits");

    // The variant is the plan's route, which run_paged_attention_decode launches, so the plan and the
    // launch cannot disagree even if set_decode_variant is called in between.
    const DecodeVariant v = effective_variant(int(plan.head_dim), q.dtype);
    plan.route = v == DecodeVariant::MMA    ? PagedAttentionKernel::GPU_DECODE_MMA
                 : v == DecodeVariant::MFMA ? PagedAttentionKernel::GPU_DECODE_MFMA
                                            : PagedAttentionKernel::GPU_DECODE_PORTABLE;
    if (plan.params.num_splits == 0) plan.params.num_splits = plan.batch > 0 ? choose_splits(plan, q.dtype, v) : 1;
    const int64_t S = plan.params.num_splits;
    const bool separate = S > 1 && decode_combine() == DecodeCombine::SEPARATE;
    std::string name = std::string("gpu.paged_attention.decode.") + variant_name(v) + ".d" + std::to_string(plan.head_dim);
    if (S > 1) name += ".splits" + std::to_string(S);
    if (S > 1 && split_tokens > 0) name += 'x' + std::to_string(split_tokens);  // splits of that many keys
    plan.kernel = name + (separate ? SEPARATE_SUFFIX : "");
    // Both ways of merging take the same workspace (the separate combine leaves the counters unused).
    const size_t rows = size_t(plan.batch * plan.q_len * plan.n_heads);
    const size_t counters = size_t(plan.batch * plan.n_kv_heads * row_chunks(plan, v));
    plan.workspace_bytes = S == 1 ? 0 : counters_offset(rows, size_t(S), size_t(plan.head_dim)) + counters * 4;
}

// Keys a split covers by length: every kernel's tile (64 keys; the portable kernel's d256 tile of 32 divides it).
constexpr int64_t SPLIT_TOKEN_STEP = 64;

}  // namespace

void plan_paged_attention_decode(PagedAttentionPlan& plan, const TensorView& out, const TensorView& q,
                                 const PagedKVCache& kv, const TensorView* lse) {
    plan_decode(plan, out, q, kv, lse, 0);
}

int plan_paged_attention_decode_by_length(PagedAttentionPlan& plan, const TensorView& out, const TensorView& q,
                                          const PagedKVCache& kv, const TensorView* lse, int64_t total_keys) {
    const int64_t longest = longest_sequence(plan);
    int64_t split_tokens = 0;
    if (plan.batch > 0 && longest > 0 && DecodeHeadDims::contains(plan.head_dim) &&
        (q.dtype == DType::F16 || q.dtype == DType::BF16)) {
        // The work in keys over every (sequence, KV head, row chunk), spread over the resident slots.
        const DecodeVariant v = effective_variant(int(plan.head_dim), q.dtype);
        const int64_t resident = resident_slots(plan, q.dtype, v);
        const int64_t work = std::max<int64_t>(total_keys, longest) * plan.n_kv_heads * row_chunks(plan, v);
        const int64_t step = SPLIT_TOKEN_STEP;
        const int64_t per_slot = work / std::max<int64_t>(1, resident);
        split_tokens = std::max(MIN_TILES_PER_SPLIT * step, (per_slot + step - 1) / step * step);
        // The longest sequence's splits, within PAGED_MAX_SPLITS (longer splits where it would take more).
        int64_t splits = (longest + split_tokens - 1) / split_tokens;
        if (splits > PAGED_MAX_SPLITS) {
            splits = PAGED_MAX_SPLITS;
            split_tokens = ((longest + splits - 1) / splits + step - 1) / step * step;
        }
        plan.params.num_splits = int(splits);
        if (splits == 1) split_tokens = 0;
    }
    plan_decode(plan, out, q, kv, lse, int(split_tokens));
    return plan.params.num_splits > 1 ? int(split_tokens) : 0;
}

void run_paged_attention_decode(const PagedAttentionPlan& plan, const TensorView& out, const TensorView& q,
                                const PagedKVCache& kv, const TensorView* lse, void* workspace, void* stream,
                                const DecodeLayout* layout) {
    check_current_device("paged_attention", q.device);
    PagedAttentionDecodeArgs a{};
    a.q = q.data;
    a.out = out.data;
    a.lse = lse ? static_cast<float*>(lse->data) : nullptr;
    a.k_cache = kv.k_cache.data;
    a.v_cache = kv.v_cache.data;
    a.block_table = kv.block_table;
    a.seq_lens = kv.seq_lens;
    a.q_starts = layout ? layout->q_starts : nullptr;
    a.q_lens = layout ? layout->q_lens : nullptr;
    a.split_tokens = layout ? layout->split_tokens : 0;
    copy_strides(a.q_stride, &q);
    copy_strides(a.o_stride, &out);
    copy_strides(a.lse_stride, lse);
    copy_strides(a.k_stride, &kv.k_cache);
    copy_strides(a.v_stride, &kv.v_cache);
    a.batch = int(plan.batch);
    a.q_len = int(plan.q_len);
    a.n_heads = int(plan.n_heads);
    a.n_kv_heads = int(plan.n_kv_heads);
    a.group = int(plan.n_heads / plan.n_kv_heads);
    a.rows = a.group * a.q_len;
    const DecodeVariant v = plan.route == PagedAttentionKernel::GPU_DECODE_MMA    ? DecodeVariant::MMA
                            : plan.route == PagedAttentionKernel::GPU_DECODE_MFMA ? DecodeVariant::MFMA
                                                                                  : DecodeVariant::PORTABLE;
    a.row_chunks = int(row_chunks(plan, v));
    a.num_blocks = int(plan.num_blocks);
    a.block_size = int(plan.block_size);
    a.max_blocks_per_seq = int(plan.max_blocks_per_seq);
    a.num_splits = plan.params.num_splits;
    a.scale_log2 = plan.params.scale * LOG2E;
    a.causal = plan.params.causal;
    const std::string& name = plan.kernel;
    const bool separate = name.size() >= std::strlen(SEPARATE_SUFFIX) &&
                          name.compare(name.size() - std::strlen(SEPARATE_SUFFIX), std::string::npos,
                                       SEPARATE_SUFFIX) == 0;  // the plan's choice (set_decode_combine)
    if (a.num_splits > 1) {
        const size_t rows = size_t(plan.batch * plan.q_len * plan.n_heads);
        char* ws = static_cast<char*>(workspace);
        a.ws_o = reinterpret_cast<float*>(ws);
        a.ws_lse = reinterpret_cast<float*>(ws + align256(rows * size_t(a.num_splits) * size_t(plan.head_dim) * 4));
        if (!separate) {
            // The split counters must read 0 when the split kernel starts; the kernel leaves them at 0.
            // The op's own buffer for this stream stays that way between launches (owned_counters).
            // The workspace's counters cannot: the workspace is scratch whose contents are undefined
            // (the Python binding takes a fresh at::empty per call; the engine shares one slot between
            // batch sizes, whose counters land where another shape's partials were), so when they serve
            // they are zeroed on the stream first, a memset node in a captured step that ends the chain
            // of dependent launches. Without it the fused merge is still slower in the engine's decode
            // (H200, Qwen2.5-7B, batch 1: 207 tok/s against the separate combine's 226; 201-203 with the
            // memset): its last block merges the group's 7 rows × ~66 splits alone (ncu: 25.7 us for the
            // split kernel against 7.7 + 6.4 us for split + combine), so SEPARATE stays the default.
            const size_t counters = size_t(a.batch) * size_t(a.n_kv_heads) * size_t(a.row_chunks);
            a.split_counters = owned_counters(counters, as_stream(stream));
            if (!a.split_counters) {
                a.split_counters = reinterpret_cast<unsigned*>(
                    ws + counters_offset(rows, size_t(a.num_splits), size_t(plan.head_dim)));
                FP_GPU_CHECK(cudaMemsetAsync(a.split_counters, 0, counters * 4, as_stream(stream)),
                             "zeroing the paged decode split counters");
            }
        }
    }
    const int d = int(plan.head_dim);
    const bool f16 = q.dtype == DType::F16;
#if defined(FLASHPORT_GPU_CUDA)
    if (v == DecodeVariant::MMA) {
        f16 ? paged_attention_decode_split_mma<DType::F16>(a, d, stream)
            : paged_attention_decode_split_mma<DType::BF16>(a, d, stream);
    } else
#endif
#if defined(FLASHPORT_GPU_MFMA_KERNELS)
    if (v == DecodeVariant::MFMA) {
        f16 ? paged_attention_decode_split_mfma<DType::F16>(a, d, stream)
            : paged_attention_decode_split_mfma<DType::BF16>(a, d, stream);
    } else
#endif
    {
        f16 ? paged_attention_decode_split_portable<DType::F16>(a, d, stream)
            : paged_attention_decode_split_portable<DType::BF16>(a, d, stream);
    }
    if (a.num_splits > 1 && separate)
        f16 ? paged_attention_decode_combine<DType::F16>(a, d, stream)
            : paged_attention_decode_combine<DType::BF16>(a, d, stream);
}

}  // namespace flashport::gpu
