// The Qwen forward pass over a flat batch of sequences (see model.h for the layer recipe).
//
// Every projection, norm and MLP runs once over all the batch's tokens ([tokens, hidden] rows), so a
// decode step of B sequences is one GEMV pass over the weights, not B. Only attention is per
// sequence, because each sequence sees its own keys:
//   - decode (up to PAGED_DECODE_MAX_Q_LEN new tokens) and any chunk after position 0 (a chat turn,
//     chunked prefill): paged_attention straight from the cache blocks, which already hold the new
//     tokens' K/V; one call for each run of neighbouring sequences with the same number of new tokens
//     (the engine puts decode sequences first, so a decode step is one call);
//   - a longer chunk at position 0: dense flash attention, causal, on its own freshly computed K/V
//     (what transformers does), which skips the block-table indirection.
// Activation buffers and the ops' workspace are allocated per call from the tracked allocator, so peak
// memory reports see them.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "engine/model.h"
#include "flashport/attention.h"
#include "flashport/device.h"
#include "flashport/error.h"
#include "flashport/linear.h"
#include "flashport/memory.h"
#include "flashport/ops.h"
#include "flashport/paged_attention.h"

namespace flashport::engine {
namespace {

// Rows [row, row + b·n) of a [tokens, heads, head_dim] view as [b, n, heads, head_dim].
TensorView rows4(const TensorView& t3, int64_t row, int64_t b, int64_t n) {
    TensorView v = t3;
    v.data = t3.at(row);
    v.ndim = 4;
    v.shape = {b, n, t3.shape[1], t3.shape[2]};
    v.stride = {n * t3.stride[0], t3.stride[0], t3.stride[1], t3.stride[2]};
    return v;
}

// [tokens, heads · head_dim] as [tokens, heads, head_dim] (no data moves).
TensorView split_heads(const TensorView& t, int64_t heads, int64_t head_dim) {
    TensorView v = t;
    v.ndim = 3;
    v.shape = {t.shape[0], heads, head_dim, 0};
    v.stride = {t.stride[0], head_dim, 1, 0};
    return v;
}

const TensorView* optional(const TensorView& t) {
    return t.data ? &t : nullptr;
}

// The buffers of one forward pass, by role: each is a ForwardScratch slot (model.h). Paged attention
// calls take one workspace slot each, from ATTENTION_WORKSPACE on.
enum Slot : size_t {
    INDICES, X, QKV, ATTN, ACT, LINEAR_WORKSPACE, SELECTED, LOGITS, GREEDY, ATTENTION_WORKSPACE
};

// One attention call of a forward pass: rows [row, row + b·n) of q/out, b sequences of n new tokens.
// Paged calls carry their block table and lengths (at offsets of the pass's index array, which goes to
// the device in one copy) and the split-KV workspace; every layer runs the same calls, so they are
// planned once per forward pass.
struct AttentionCall {
    int64_t row = 0, b = 1, n = 0;
    bool paged = false;
    int64_t max_blocks = 1;
    size_t table_offset = 0, lens_offset = 0;  // into the index array
    const int32_t* table = nullptr;            // where the ops read them (set once the indices are placed)
    const int32_t* lens = nullptr;
    void* workspace = nullptr;
    size_t workspace_bytes = 0;

    PagedKVCache cache_view(const KvCache& cache, int64_t layer) const {
        return {cache.k(layer), cache.v(layer), table, max_blocks, lens};
    }
};

const PagedAttentionParams PAGED = [] {
    PagedAttentionParams p;
    p.causal = true;
    return p;
}();

// Decode (up to PAGED_DECODE_MAX_Q_LEN new tokens) and chunks after position 0 read the cache (which
// already holds the new tokens' K/V), one call per run of neighbouring sequences with the same number of
// new tokens; a longer chunk at position 0 attends to its own K/V densely. Paged calls append their
// block table and lengths to `indices`.
std::vector<AttentionCall> plan_attention_calls(std::span<const ForwardSeq> batch, std::vector<int32_t>& indices) {
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
            for (size_t s = i; s < j; ++s) c.max_blocks = std::max<int64_t>(c.max_blocks, int64_t(batch[s].cache->blocks.size()));
            c.table_offset = indices.size();
            indices.resize(indices.size() + size_t(c.b * c.max_blocks), -1);
            for (int64_t s = 0; s < c.b; ++s) {
                const std::vector<int32_t>& blocks = batch[i + size_t(s)].cache->blocks;
                std::copy(blocks.begin(), blocks.end(), indices.begin() + std::ptrdiff_t(c.table_offset) + s * c.max_blocks);
            }
            c.lens_offset = indices.size();
            for (int64_t s = 0; s < c.b; ++s) indices.push_back(int32_t(batch[i + size_t(s)].start + c.n));
        }
        row += c.b * c.n;
        i = j;
    }
    return calls;
}

void run_attention(int64_t layer, std::span<const AttentionCall> calls, const KvCache& cache, const TensorView& q,
                   const TensorView& k, const TensorView& v, const TensorView& out, void* stream) {
    AttentionParams dense;
    dense.causal = true;
    dense.impl = AttentionImpl::FLASH;
    for (const AttentionCall& c : calls) {
        if (c.paged)
            paged_attention(rows4(out, c.row, c.b, c.n), rows4(q, c.row, c.b, c.n), c.cache_view(cache, layer), nullptr,
                            PAGED, c.workspace, c.workspace_bytes, stream);
        else
            flashport::attention(rows4(out, c.row, 1, c.n), rows4(q, c.row, 1, c.n), rows4(k, c.row, 1, c.n),
                                 rows4(v, c.row, 1, c.n), nullptr, dense, stream);
    }
}

}  // namespace

int64_t Model::logit_rows(std::span<const ForwardSeq> batch) {
    int64_t rows = 0;
    for (const ForwardSeq& s : batch) rows += s.all_logits ? int64_t(s.tokens.size()) : 1;
    return rows;
}

void Model::forward(std::span<const ForwardSeq> batch, KvCache& cache, std::span<float> logits,
                    ForwardScratch* scratch, std::span<int32_t> greedy) const {
    const QwenConfig& c = config_;
    const int64_t hidden = c.hidden_size, inter = c.intermediate_size, hd = c.head_dim;
    const int64_t n_heads = c.num_attention_heads, n_kv = c.num_key_value_heads, vocab = c.vocab_size;
    const float eps = float(c.rms_norm_eps);
    FP_CHECK(cache.dtype() == dtype_, "Model::forward: the KV cache is ", dtype_name(cache.dtype()),
             " but the model computes in ", dtype_name(dtype_));

    ForwardScratch local;
    ForwardScratch& sc = scratch ? *scratch : local;
    const auto buffer = [&](size_t slot, DType dt, std::initializer_list<int64_t> shape) {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        return TensorView(sc.get(slot, size_t(n) * dtype_size(dt), device_), dt, shape, device_);
    };

    // The pass's int32 indices in one array (one upload on a GPU): token ids, positions, cache slots,
    // then each paged attention call's block table and lengths.
    std::vector<int32_t> indices;
    for (const ForwardSeq& s : batch) {
        FP_CHECK(!s.tokens.empty(), "Model::forward: a sequence with no new tokens");
        FP_CHECK(s.cache && int64_t(s.cache->blocks.size()) * cache.block_size() >= s.start + int64_t(s.tokens.size()),
                 "Model::forward: the sequence's cache blocks are not reserved for ", s.start + s.tokens.size(),
                 " tokens");
        indices.insert(indices.end(), s.tokens.begin(), s.tokens.end());
    }
    const int64_t tokens = int64_t(indices.size()), rows = logit_rows(batch);
    FP_CHECK(int64_t(logits.size()) == rows * vocab || (logits.empty() && !greedy.empty()),
             "Model::forward: logits must hold ", rows, " x ", vocab, " floats, got ", logits.size());
    FP_CHECK(greedy.empty() || int64_t(greedy.size()) == rows, "Model::forward: greedy must hold ", rows,
             " ids (one per logit row), got ", greedy.size());
    if (tokens == 0) return;
    for (const ForwardSeq& s : batch)
        for (int64_t t = 0; t < int64_t(s.tokens.size()); ++t) indices.push_back(int32_t(s.start + t));
    // Where each new token's K and V go in the cache: one slot map for the batch, written per layer.
    for (const ForwardSeq& s : batch) {
        const std::vector<int32_t> seq_slots = cache.slots(*s.cache, s.start, int64_t(s.tokens.size()));
        indices.insert(indices.end(), seq_slots.begin(), seq_slots.end());
    }
    std::vector<AttentionCall> calls = plan_attention_calls(batch, indices);
    const size_t index_bytes = indices.size() * sizeof(int32_t);
    int32_t* idx = indices.data();  // on a GPU, the device copy (uploaded below, before the device work)
    if (!device_.is_cpu()) idx = static_cast<int32_t*>(sc.get(INDICES, index_bytes, device_));
    const IndexView ids_view(idx, tokens, device_), pos_view(idx + tokens, tokens, device_);
    const IndexView slot_view(idx + 2 * tokens, tokens, device_);

    // q, k and v are column ranges of one qkv buffer, the product with [q; k; v].
    const int64_t q_cols = n_heads * hd, kv_cols = n_kv * hd;
    const TensorView x = buffer(X, dtype_, {tokens, hidden}), qkv = buffer(QKV, dtype_, {tokens, q_cols + 2 * kv_cols});
    const TensorView attn = buffer(ATTN, dtype_, {tokens, q_cols}), act = buffer(ACT, dtype_, {tokens, inter});
    const TensorView q = qkv.narrowed(1, 0, q_cols), k = qkv.narrowed(1, q_cols, kv_cols);
    const TensorView v = qkv.narrowed(1, q_cols + kv_cols, kv_cols);
    const TensorView q3 = split_heads(q, n_heads, hd), k3 = split_heads(k, n_kv, hd);
    const TensorView v3 = split_heads(v, n_kv, hd), attn3 = split_heads(attn, n_heads, hd);
    // GPU split-KV decode keeps its partial results in a workspace (none on the CPU); every layer has
    // the same shapes, so layer 0's plan sizes it.
    for (size_t i = 0; i < calls.size(); ++i) {
        AttentionCall& call = calls[i];
        if (!call.paged) continue;
        call.table = idx + call.table_offset;
        call.lens = idx + call.lens_offset;
        call.workspace_bytes =
            paged_attention_workspace_bytes(rows4(attn3, call.row, call.b, call.n), rows4(q3, call.row, call.b, call.n),
                                            call.cache_view(cache, 0), nullptr, PAGED);
        if (call.workspace_bytes > 0) call.workspace = sc.get(ATTENTION_WORKSPACE + i, call.workspace_bytes, device_);
    }
    const RopeParams rope_params{c.rope_theta, 0};

    // Each layer is four linear calls (flashport/linear.h): the norms ride on the products that read
    // them, the residual adds on o_proj and down_proj, SwiGLU on [gate; up]. Every layer has the same
    // shapes: layer 0's calls size the shared workspace.
    const LayerWeights& w0 = layers_[0];
    const auto qkv_params = [&](const LayerWeights& w) {
        LinearParams p;
        p.bias = optional(w.qkv_bias);
        p.norm_weight = &w.input_norm;
        p.eps = eps;
        return p;
    };
    const auto o_params = [&](const LayerWeights& w) {
        LinearParams p;
        p.bias = optional(w.o_bias);
        p.residual = &x;
        return p;
    };
    const auto gate_up_params = [&](const LayerWeights& w) {
        LinearParams p;
        p.norm_weight = &w.post_norm;
        p.eps = eps;
        p.swiglu = true;
        return p;
    };
    LinearParams down_params;
    down_params.residual = &x;
    const size_t ws_bytes = std::max({linear_workspace_bytes(qkv, x, w0.qkv, qkv_params(w0)),
                                      linear_workspace_bytes(x, attn, w0.o, o_params(w0)),
                                      linear_workspace_bytes(act, x, w0.gate_up, gate_up_params(w0)),
                                      linear_workspace_bytes(x, act, w0.down, down_params)});
    void* workspace = ws_bytes > 0 ? sc.get(LINEAR_WORKSPACE, ws_bytes, device_) : nullptr;
    // The final norm and lm_head only on the rows whose logits are wanted (RMSNorm is per row); the
    // argmax of each (greedy) on the device.
    const TensorView sel = buffer(SELECTED, dtype_, {rows, hidden});
    // transformers' logits are lm_head's output in the model dtype, upcast later: round the same way.
    // An fp32 model (CPU only) writes them straight into `logits`.
    const bool direct = dtype_ == DType::F32 && !logits.empty();
    const TensorView lg = direct ? TensorView(logits.data(), DType::F32, {rows, vocab})
                                 : buffer(LOGITS, dtype_, {rows, vocab});
    int32_t* greedy_ids = greedy.data();
    if (!greedy.empty() && !device_.is_cpu())
        greedy_ids = static_cast<int32_t*>(sc.get(GREEDY, greedy.size() * sizeof(int32_t), device_));

    // Everything from here to the argmax only enqueues device work on `stream` (no allocation, no host
    // wait), so a decode step can be recorded into a graph (ForwardScratch::run_graph).
    const auto enqueue = [&](void* stream) {
        const auto run_linear = [&](const TensorView& out, const TensorView& in, const TensorView& weight,
                                    const LinearParams& p) { linear(out, in, weight, p, workspace, ws_bytes, stream); };

        embedding(x, embed_, ids_view, stream);
        for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
            const LayerWeights& w = layers_[size_t(l)];
            run_linear(qkv, x, w.qkv, qkv_params(w));
            if (c.qk_norm) {  // Qwen3: per-head RMSNorm before RoPE
                rms_norm(q3, q3, w.q_norm, eps, stream);
                rms_norm(k3, k3, w.k_norm, eps, stream);
            }
            // RoPE on q and k, and the new K/V into the cache: one op (one launch on a GPU).
            cache.rope_write(l, slot_view, pos_view, rope_params, q3, k3, v3, stream);
            run_attention(l, calls, cache, q3, k3, v3, attn3, stream);
            run_linear(x, attn, w.o, o_params(w));  // x += o_proj(attn)

            run_linear(act, x, w.gate_up, gate_up_params(w));
            run_linear(x, act, w.down, down_params);  // x += down(act)
        }

        // When every row's logits are wanted (decode: one token per sequence), x is normalised as it is.
        if (rows == tokens) {
            rms_norm(sel, x, final_norm_, eps, stream);
        } else {
            const size_t row_bytes = size_t(hidden) * dtype_size(dtype_);
            int64_t src = 0, dst = 0;
            for (const ForwardSeq& s : batch) {
                const int64_t n = int64_t(s.tokens.size()), take = s.all_logits ? n : 1;
                copy_bytes_async(sel.at(dst), device_, x.at(src + n - take), device_, row_bytes * size_t(take), stream);
                src += n;
                dst += take;
            }
            rms_norm(sel, sel, final_norm_, eps, stream);
        }
        matmul(lg, sel, lm_head_, nullptr, MatmulImpl::AUTO, stream);
        if (!greedy.empty()) argmax(greedy_ids, lg, stream);
    };

    // A single sequence's one-token decode step on a GPU, greedy: recorded once per shape and
    // replayed (ForwardScratch::run_graph), its indices uploaded and its token fetched on the graph's
    // stream. Anything else runs eagerly on the default stream.
    if (!device_.is_cpu() && scratch && sc.graphs_enabled() && tokens == 1 && logits.empty() && !greedy.empty()) {
        FP_CHECK(calls.size() == 1 && calls[0].paged, "Model::forward: a decode graph records one paged call");
        const DecodeGraphKey key{.sequences = calls[0].b,
                                 .max_blocks = calls[0].max_blocks,
                                 .cache_blocks = cache.num_blocks(),
                                 .cache_pool = reinterpret_cast<uintptr_t>(cache.k(0).data),
                                 .attention_workspace = calls[0].workspace_bytes};
        const GpuStream& stream = sc.stream(device_);
        copy_bytes_async(idx, device_, indices.data(), Device::cpu(), index_bytes, stream.get());
        sc.run_graph(key, stream, [&] { enqueue(stream.get()); });
        copy_bytes_async(greedy.data(), Device::cpu(), greedy_ids, device_, greedy.size() * sizeof(int32_t),
                         stream.get());
        stream.synchronize();
        return;
    }
    if (!device_.is_cpu()) copy_bytes(idx, device_, indices.data(), Device::cpu(), index_bytes);
    enqueue(nullptr);
    if (!greedy.empty() && !device_.is_cpu())
        copy_bytes(greedy.data(), Device::cpu(), greedy_ids, device_, greedy.size() * sizeof(int32_t));
    if (logits.empty() || direct) return;
    std::vector<uint16_t> host(size_t(rows * vocab));
    copy_bytes(host.data(), Device::cpu(), lg.data, device_, host.size() * sizeof(uint16_t));
    const uint16_t* p = host.data();
    for (int64_t i = 0; i < rows * vocab; ++i)
        logits[size_t(i)] = dtype_ == DType::BF16 ? bf16_to_float(p[i]) : fp16_to_float(p[i]);
}

}  // namespace flashport::engine
