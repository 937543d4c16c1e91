// Model::forward: plans one pass over a flat batch of sequences (its indices, attention calls and
// buffers), then runs the layer recipe (model_blocks.h) eagerly, or from a recorded decode graph.
//
// Every projection, norm and MLP runs once over all the batch's tokens, so a decode step of B
// sequences is one pass over the weights, not B. Activation buffers and the ops' workspaces are
// ForwardScratch slots (allocated per call from the tracked allocator without one), so peak memory
// reports see them.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <utility>

#include "engine/model.h"
#include "engine/model_blocks.h"
#include "flashport/device.h"
#include "flashport/error.h"
#include "flashport/memory.h"
#include "flashport/paged_attention.h"

namespace flashport::engine {
namespace {

// The buffers of one forward pass, by role: each is a ForwardScratch slot. Paged attention calls
// take one workspace slot each, from ATTENTION_WORKSPACE on.
enum Slot : size_t {
    INDICES,
    X,
    QKV,
    ATTN,
    ACT,
    LINEAR_WORKSPACE,
    SELECTED,
    LOGITS,
    TOKENS,
    SAMPLE_WORKSPACE,
    ATTENTION_WORKSPACE
};

// Attention is the one step that runs per sequence, because each sequence sees its own keys:
//   - decode (up to PAGED_DECODE_MAX_Q_LEN new tokens) and any chunk after position 0 (a chat turn,
//     chunked prefill): paged attention straight from the cache blocks, which already hold the new
//     tokens' K/V; one call for each run of neighbouring sequences with the same number of new
//     tokens (the engine puts decode sequences first, so a decode step is one call);
//   - a longer chunk at position 0: dense flash attention, causal, on its own freshly computed K/V
//     (what transformers does), which skips the block-table indirection.
// Paged calls append their block table and lengths to `indices`.
//
// A paged call's table is padded (with -1, never read: the lengths bound every read) to a width of
// whole quantum_tokens (ForwardScratch::table_quantum_tokens), so that its shape, and with it the
// split count and a recorded decode graph's key (DecodeGraphKey), stays the same for that many
// tokens of growth instead of changing with every cache block.
std::vector<AttentionCall> plan_attention(std::span<const ForwardSeq> batch, int64_t block_size, int64_t quantum_tokens,
                                          std::vector<int32_t>& indices) {
    const int64_t quantum = std::max<int64_t>(1, quantum_tokens / block_size);
    std::vector<AttentionCall> calls;
    int64_t row = 0;
    for (size_t i = 0; i < batch.size();) {
        AttentionCall& c = calls.emplace_back();
        c.row = row;
        c.n = int64_t(batch[i].tokens.size());
        auto paged_path = [&](const ForwardSeq& s) {
            return int64_t(s.tokens.size()) == c.n && (c.n <= PAGED_DECODE_MAX_Q_LEN || s.start > 0);
        };
        c.paged = paged_path(batch[i]);
        size_t j = i + 1;
        if (c.paged) {
            while (j < batch.size() && paged_path(batch[j])) ++j;
            c.b = int64_t(j - i);
            for (size_t s = i; s < j; ++s)
                c.max_blocks = std::max<int64_t>(c.max_blocks, int64_t(batch[s].cache->blocks.size()));
            c.max_blocks = (c.max_blocks + quantum - 1) / quantum * quantum;
            c.table_offset = indices.size();
            indices.resize(indices.size() + size_t(c.b * c.max_blocks), -1);
            for (int64_t s = 0; s < c.b; ++s) {
                const std::vector<int32_t>& blocks = batch[i + size_t(s)].cache->blocks;
                std::copy(blocks.begin(), blocks.end(),
                          indices.begin() + std::ptrdiff_t(c.table_offset) + s * c.max_blocks);
            }
            c.lens_offset = indices.size();
            for (int64_t s = 0; s < c.b; ++s) indices.push_back(int32_t(batch[i + size_t(s)].start + c.n));
        }
        row += c.b * c.n;
        i = j;
    }
    return calls;
}

// The pass's int32 indices in one array, so that a GPU gets them in one copy: token ids [tokens],
// positions [tokens], cache slots [tokens] (where each new token's K and V go), then each paged
// attention call's block table [b, max_blocks] and lengths [b].
std::vector<int32_t> batch_indices(std::span<const ForwardSeq> batch, const KvCache& cache, int64_t quantum_tokens,
                                   std::vector<AttentionCall>& calls) {
    std::vector<int32_t> indices;
    for (const ForwardSeq& s : batch) indices.insert(indices.end(), s.tokens.begin(), s.tokens.end());
    for (const ForwardSeq& s : batch)
        for (int64_t t = 0; t < int64_t(s.tokens.size()); ++t) indices.push_back(int32_t(s.start + t));
    for (const ForwardSeq& s : batch) {
        const std::vector<int32_t> seq_slots = cache.slots(*s.cache, s.start, int64_t(s.tokens.size()));
        indices.insert(indices.end(), seq_slots.begin(), seq_slots.end());
    }
    calls = plan_attention(batch, cache.block_size(), quantum_tokens, indices);
    return indices;
}

// A sampled pass's part of the index array: each input token's seen row (when any is marked), then,
// 8-byte aligned, the rows' SampleParams as raw words. Returns the offsets of the two (in int32s).
std::pair<size_t, size_t> append_choice(const TokenChoice& choice, std::vector<int32_t>& indices) {
    const size_t slots_at = indices.size();
    indices.insert(indices.end(), choice.seen_slots.begin(), choice.seen_slots.end());
    if (indices.size() % 2) indices.push_back(0);
    const size_t params_at = indices.size();
    static_assert(sizeof(SampleParams) % sizeof(int64_t) == 0 && alignof(SampleParams) <= sizeof(int64_t));
    const size_t words = choice.rows.size_bytes() / sizeof(int32_t);
    indices.resize(params_at + words);
    std::memcpy(indices.data() + params_at, choice.rows.data(), choice.rows.size_bytes());
    return {slots_at, params_at};
}

// The pass's views over `indices` (on a GPU over their device copy, which the caller fills before
// the first launch) and over `scratch`'s slots.
ForwardPass plan_pass(const Model& model, std::span<const ForwardSeq> batch, KvCache& cache, std::span<float> logits,
                      std::span<int32_t> tokens_out, const TokenChoice& choice, ForwardScratch& scratch,
                      std::vector<int32_t>& indices) {
    const QwenConfig& c = model.config();
    const Device device = model.device();
    const DType dtype = model.dtype();
    ForwardPass f;
    f.batch = batch;
    f.cache = &cache;
    f.eps = float(c.rms_norm_eps);
    f.rope = {c.rope_theta, 0};
    indices = batch_indices(batch, cache, scratch.table_quantum_tokens, f.attention);
    const bool sampled = !tokens_out.empty() && !choice.rows.empty();
    const auto [slots_at, params_at] = sampled ? append_choice(choice, indices) : std::pair<size_t, size_t>{0, 0};

    int64_t tokens = 0;
    for (const ForwardSeq& s : batch) tokens += int64_t(s.tokens.size());
    int32_t* idx = indices.data();
    if (!device.is_cpu()) idx = static_cast<int32_t*>(scratch.get(INDICES, indices.size() * sizeof(int32_t), device));
    f.indices = idx;
    f.ids = IndexView(idx, tokens, device);
    f.positions = IndexView(idx + tokens, tokens, device);
    f.slots = IndexView(idx + 2 * tokens, tokens, device);

    const auto buffer = [&](size_t slot, std::initializer_list<int64_t> shape) {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        return TensorView(scratch.get(slot, size_t(n) * dtype_size(dtype), device), dtype, shape, device);
    };
    const int64_t rows = Model::logit_rows(batch), hd = c.head_dim;
    const int64_t q_dim = c.q_dim(), kv_dim = c.kv_dim();              // n_heads * head_dim, n_kv_heads * head_dim
    f.x = buffer(X, {tokens, c.hidden_size});                          // [tokens, hidden]
    f.qkv = buffer(QKV, {tokens, q_dim + 2 * kv_dim});                 // [tokens, q_dim + 2 * kv_dim]
    f.q = f.qkv.narrowed(1, 0, q_dim).split_heads(hd);                 // [tokens, n_heads, head_dim]
    f.k = f.qkv.narrowed(1, q_dim, kv_dim).split_heads(hd);            // [tokens, n_kv_heads, head_dim]
    f.v = f.qkv.narrowed(1, q_dim + kv_dim, kv_dim).split_heads(hd);   // [tokens, n_kv_heads, head_dim]
    f.attn = buffer(ATTN, {tokens, q_dim});                            // [tokens, n_heads * head_dim]
    f.attn_heads = f.attn.split_heads(hd);                             // [tokens, n_heads, head_dim]
    f.act = buffer(ACT, {tokens, c.intermediate_size});                // [tokens, intermediate]
    f.selected = buffer(SELECTED, {rows, c.hidden_size});              // [rows, hidden]
    // Logits [rows, vocab] in the model dtype, rounded where transformers' lm_head rounds them before
    // the upcast; an fp32 model (CPU only) writes straight into the caller's `logits`.
    const int64_t vocab = c.vocab_size;
    f.logits = dtype == DType::F32 && !logits.empty() ? TensorView(logits.data(), DType::F32, {rows, vocab})
                                                      : buffer(LOGITS, {rows, vocab});
    // [rows]; on a GPU its device copy, brought back after the pass. An empty span may still point
    // at a vector's old storage: not wanted means null.
    f.tokens = tokens_out.empty() ? nullptr : tokens_out.data();
    if (!tokens_out.empty() && !device.is_cpu())
        f.tokens = static_cast<int32_t*>(scratch.get(TOKENS, tokens_out.size_bytes(), device));
    if (sampled) {
        f.sample_params = reinterpret_cast<const SampleParams*>(idx + params_at);
        f.seen = choice.seen;
        f.seen_slots = IndexView(idx + slots_at, int64_t(choice.seen_slots.size()), device);
        f.sample_workspace_bytes = sample_workspace_bytes(f.logits);
        if (f.sample_workspace_bytes > 0)
            f.sample_workspace = scratch.get(SAMPLE_WORKSPACE, f.sample_workspace_bytes, device);
    } else if (f.tokens) {  // the argmax's partials: the same slot, a pass runs one of the two
        f.argmax_workspace_bytes = argmax_workspace_bytes(f.logits);
        if (f.argmax_workspace_bytes > 0)
            f.argmax_workspace = scratch.get(SAMPLE_WORKSPACE, f.argmax_workspace_bytes, device);
    }

    for (size_t i = 0; i < f.attention.size(); ++i) {
        AttentionCall& call = f.attention[i];
        if (!call.paged) continue;
        call.table = idx + call.table_offset;
        call.lens = idx + call.lens_offset;
        call.workspace_bytes = attention_workspace_bytes(f, call);
        if (call.workspace_bytes > 0)
            call.workspace = scratch.get(ATTENTION_WORKSPACE + i, call.workspace_bytes, device);
    }
    f.workspace_bytes = blocks_workspace_bytes(f, model.layer(0));
    if (f.workspace_bytes > 0) f.workspace = scratch.get(LINEAR_WORKSPACE, f.workspace_bytes, device);
    return f;
}

// The key a single-sequence decode step is recorded under (DecodeGraphKey says what it holds).
DecodeGraphKey decode_graph_key(const ForwardPass& f) {
    FP_CHECK(f.attention.size() == 1 && f.attention[0].paged, "Model::forward: a decode graph records one paged call");
    const AttentionCall& call = f.attention[0];
    return {.sequences = call.b,
            .max_blocks = call.max_blocks,
            .cache_blocks = f.cache->num_blocks(),
            .cache_pool = reinterpret_cast<uintptr_t>(f.cache->k(0).data),
            .attention_workspace = call.workspace_bytes,
            .sampled = f.sample_params != nullptr,
            .marks_seen = f.seen_slots.size > 0,
            .seen_sets = reinterpret_cast<uintptr_t>(f.seen.data)};
}

void check_batch(std::span<const ForwardSeq> batch, const KvCache& cache, int64_t rows, int64_t vocab,
                 std::span<const float> logits, std::span<const int32_t> tokens, const TokenChoice& choice,
                 Device device) {
    for (const ForwardSeq& s : batch) {
        FP_CHECK(!s.tokens.empty(), "Model::forward: a sequence with no new tokens");
        FP_CHECK(s.cache && int64_t(s.cache->blocks.size()) * cache.block_size() >= s.start + int64_t(s.tokens.size()),
                 "Model::forward: the sequence's cache blocks are not reserved for ", s.start + s.tokens.size(),
                 " tokens");
    }
    FP_CHECK(int64_t(logits.size()) == rows * vocab || (logits.empty() && !tokens.empty()),
             "Model::forward: logits must hold ", rows, " x ", vocab, " floats, got ", logits.size());
    FP_CHECK(tokens.empty() || int64_t(tokens.size()) == rows, "Model::forward: tokens must hold ", rows,
             " ids (one per logit row), got ", tokens.size());
    if (tokens.empty() || choice.rows.empty()) return;
    FP_CHECK(int64_t(choice.rows.size()) == rows, "Model::forward: sampling needs one SampleParams per logit row (",
             rows, "), got ", choice.rows.size());
    for (const SampleParams& p : choice.rows) validate(p, choice.seen.rows);
    int64_t n = 0;
    for (const ForwardSeq& s : batch) n += int64_t(s.tokens.size());
    FP_CHECK(choice.seen_slots.empty() || int64_t(choice.seen_slots.size()) == n,
             "Model::forward: seen_slots must hold one entry per input token (", n, "), got ",
             choice.seen_slots.size());
    FP_CHECK(choice.seen.rows == 0 || choice.seen.device == device, "Model::forward: the seen sets are on ",
             choice.seen.device.name(), ", the model on ", device.name());
}

// The pass's model-dtype logits as the caller's fp32 (an fp32 model wrote them there already).
void copy_logits(const ForwardPass& f, std::span<float> logits) {
    if (logits.empty() || f.logits.data == logits.data()) return;
    std::vector<uint16_t> host(logits.size());
    copy_bytes(host.data(), Device::cpu(), f.logits.data, f.logits.device, host.size() * sizeof(uint16_t));
    for (size_t i = 0; i < host.size(); ++i)
        logits[i] = f.logits.dtype == DType::BF16 ? bf16_to_float(host[i]) : fp16_to_float(host[i]);
}

}  // namespace

int64_t Model::logit_rows(std::span<const ForwardSeq> batch) {
    int64_t rows = 0;
    for (const ForwardSeq& s : batch) rows += s.all_logits ? int64_t(s.tokens.size()) : 1;
    return rows;
}

void Model::forward(std::span<const ForwardSeq> batch, KvCache& cache, std::span<float> logits, ForwardScratch* scratch,
                    std::span<int32_t> tokens, const TokenChoice& choice) const {
    FP_CHECK(cache.dtype() == dtype_, "Model::forward: the KV cache is ", dtype_name(cache.dtype()),
             " but the model computes in ", dtype_name(dtype_));
    check_batch(batch, cache, logit_rows(batch), config_.vocab_size, logits, tokens, choice, device_);
    if (batch.empty()) return;
    ForwardScratch local;
    ForwardScratch& sc = scratch ? *scratch : local;
    std::vector<int32_t> indices;  // the host copy
    const ForwardPass pass = plan_pass(*this, batch, cache, logits, tokens, choice, sc, indices);

    // transformers' Qwen2Model / Qwen3Model and the lm_head of its ForCausalLM, layer by layer.
    const auto enqueue = [&](void* stream) {
        embed_tokens(pass, embed_, stream);
        for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
            attention_block(pass, layers_[size_t(l)], l, stream);
            mlp_block(pass, layers_[size_t(l)], stream);
        }
        final_norm(pass, final_norm_, stream);
        lm_head(pass, lm_head_, stream);
    };
    // A decode step on a GPU whose tokens are chosen there (every sequence of the batch adds one
    // token, so the pass is one paged attention call): recorded once per shape and replayed
    // (ForwardScratch::run_graph), its indices (sampling settings included) uploaded and its tokens
    // fetched on the graph's stream. Batched steps record their BLAS products too. Anything else
    // runs eagerly on the default stream.
    const size_t index_bytes = indices.size() * sizeof(int32_t);
    const bool decode_step = pass.attention.size() == 1 && pass.attention[0].paged && pass.attention[0].n == 1 &&
                             pass.ids.size == int64_t(batch.size());
    if (!device_.is_cpu() && scratch && sc.graphs_enabled() && decode_step && logits.empty() && !tokens.empty()) {
        const GpuStream& stream = sc.stream(device_);
        copy_bytes_async(pass.indices, device_, indices.data(), Device::cpu(), index_bytes, stream.get());
        sc.run_graph(decode_graph_key(pass), stream, [&] { enqueue(stream.get()); });
        copy_bytes_async(tokens.data(), Device::cpu(), pass.tokens, device_, tokens.size_bytes(), stream.get());
        stream.synchronize();
        return;
    }
    if (!device_.is_cpu()) copy_bytes(pass.indices, device_, indices.data(), Device::cpu(), index_bytes);
    enqueue(nullptr);
    if (!tokens.empty() && !device_.is_cpu())
        copy_bytes(tokens.data(), Device::cpu(), pass.tokens, device_, tokens.size_bytes());
    copy_logits(pass, logits);
}

}  // namespace flashport::engine
