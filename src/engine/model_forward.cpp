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

// `host` where the ops run: the vector itself on the CPU, a copy in `storage` on a GPU.
const int32_t* on_device(const std::vector<int32_t>& host, Device device, Buffer& storage) {
    if (device.is_cpu()) return host.data();
    storage = Buffer(std::max<size_t>(1, host.size()) * sizeof(int32_t), device);
    copy_bytes(storage.data(), device, host.data(), Device::cpu(), host.size() * sizeof(int32_t));
    return storage.as<int32_t>();
}

// One attention call of a forward pass: rows [row, row + b·n) of q/out, b sequences of n new tokens.
// Paged calls carry their block table and lengths (and, on a GPU, the device copies and the split-KV
// workspace); every layer runs the same calls, so they are planned once per forward pass.
struct AttentionCall {
    int64_t row = 0, b = 1, n = 0;
    bool paged = false;
    int64_t max_blocks = 1;
    std::vector<int32_t> table, lens;
    Buffer table_dev, lens_dev, workspace;

    const int32_t* table_at() const { return table_dev.data() ? table_dev.as<int32_t>() : table.data(); }
    const int32_t* lens_at() const { return lens_dev.data() ? lens_dev.as<int32_t>() : lens.data(); }
    PagedKVCache cache_view(const KvCache& cache, int64_t layer) const {
        return {cache.k(layer), cache.v(layer), table_at(), max_blocks, lens_at()};
    }
};

const PagedAttentionParams PAGED = [] {
    PagedAttentionParams p;
    p.causal = true;
    return p;
}();

// Decode (up to PAGED_DECODE_MAX_Q_LEN new tokens) and chunks after position 0 read the cache (which
// already holds the new tokens' K/V), one call per run of neighbouring sequences with the same number of
// new tokens; a longer chunk at position 0 attends to its own K/V densely.
std::vector<AttentionCall> plan_attention_calls(std::span<const ForwardSeq> batch, const KvCache& cache,
                                                Device device, const TensorView& q, const TensorView& out) {
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
            c.table.assign(size_t(c.b * c.max_blocks), -1);
            c.lens.assign(size_t(c.b), 0);
            for (int64_t s = 0; s < c.b; ++s) {
                const ForwardSeq& seq = batch[i + size_t(s)];
                std::copy(seq.cache->blocks.begin(), seq.cache->blocks.end(), c.table.begin() + s * c.max_blocks);
                c.lens[size_t(s)] = int32_t(seq.start + c.n);
            }
            on_device(c.table, device, c.table_dev);
            on_device(c.lens, device, c.lens_dev);
            // GPU split-KV decode keeps its partial results in a workspace (none on the CPU); every layer
            // has the same shapes, so layer 0's plan sizes it.
            const size_t ws = paged_attention_workspace_bytes(rows4(out, row, c.b, c.n), rows4(q, row, c.b, c.n),
                                                              c.cache_view(cache, 0), nullptr, PAGED);
            if (ws > 0) c.workspace = Buffer(ws, device);
        }
        row += c.b * c.n;
        i = j;
    }
    return calls;
}

void run_attention(int64_t layer, std::span<const AttentionCall> calls, const KvCache& cache, const TensorView& q,
                   const TensorView& k, const TensorView& v, const TensorView& out) {
    AttentionParams dense;
    dense.causal = true;
    dense.impl = AttentionImpl::FLASH;
    for (const AttentionCall& c : calls) {
        if (c.paged)
            paged_attention(rows4(out, c.row, c.b, c.n), rows4(q, c.row, c.b, c.n), c.cache_view(cache, layer), nullptr,
                            PAGED, c.workspace.data(), c.workspace.size());
        else
            flashport::attention(rows4(out, c.row, 1, c.n), rows4(q, c.row, 1, c.n), rows4(k, c.row, 1, c.n),
                                 rows4(v, c.row, 1, c.n), nullptr, dense);
    }
}

}  // namespace

int64_t Model::logit_rows(std::span<const ForwardSeq> batch) {
    int64_t rows = 0;
    for (const ForwardSeq& s : batch) rows += s.all_logits ? int64_t(s.tokens.size()) : 1;
    return rows;
}

void Model::forward(std::span<const ForwardSeq> batch, KvCache& cache, std::span<float> logits) const {
    const QwenConfig& c = config_;
    const int64_t hidden = c.hidden_size, inter = c.intermediate_size, hd = c.head_dim;
    const int64_t n_heads = c.num_attention_heads, n_kv = c.num_key_value_heads, vocab = c.vocab_size;
    const float eps = float(c.rms_norm_eps);
    FP_CHECK(cache.dtype() == dtype_, "Model::forward: the KV cache is ", dtype_name(cache.dtype()),
             " but the model computes in ", dtype_name(dtype_));

    // Token ids and positions of the flat batch.
    std::vector<int32_t> ids, positions;
    for (const ForwardSeq& s : batch) {
        FP_CHECK(!s.tokens.empty(), "Model::forward: a sequence with no new tokens");
        FP_CHECK(s.cache && int64_t(s.cache->blocks.size()) * cache.block_size() >= s.start + int64_t(s.tokens.size()),
                 "Model::forward: the sequence's cache blocks are not reserved for ", s.start + s.tokens.size(),
                 " tokens");
        for (size_t t = 0; t < s.tokens.size(); ++t) {
            ids.push_back(s.tokens[t]);
            positions.push_back(int32_t(s.start + int64_t(t)));
        }
    }
    const int64_t tokens = int64_t(ids.size()), rows = logit_rows(batch);
    FP_CHECK(int64_t(logits.size()) == rows * vocab, "Model::forward: logits must hold ", rows, " x ", vocab,
             " floats, got ", logits.size());
    if (tokens == 0) return;
    // Where each new token's K and V go in the cache: one slot map for the batch, written per layer.
    std::vector<int32_t> slots;
    for (const ForwardSeq& s : batch) {
        const std::vector<int32_t> seq_slots = cache.slots(*s.cache, s.start, int64_t(s.tokens.size()));
        slots.insert(slots.end(), seq_slots.begin(), seq_slots.end());
    }
    Buffer ids_dev, pos_dev, slots_dev;
    const IndexView ids_view(on_device(ids, device_, ids_dev), tokens, device_);
    const IndexView pos_view(on_device(positions, device_, pos_dev), tokens, device_);
    const IndexView slot_view(on_device(slots, device_, slots_dev), tokens, device_);

    // q, k and v are column ranges of one qkv buffer (one product on a GPU, where the weights are
    // [q; k; v]; three into their columns on the CPU).
    const int64_t q_cols = n_heads * hd, kv_cols = n_kv * hd;
    Tensor x(dtype_, {tokens, hidden}, device_), qkv(dtype_, {tokens, q_cols + 2 * kv_cols}, device_);
    Tensor attn(dtype_, {tokens, q_cols}, device_), act(dtype_, {tokens, inter}, device_);
    const auto columns = [](const TensorView& t, int64_t first, int64_t count) {
        TensorView v = t;
        v.data = t.at(0, first);
        v.shape[1] = count;
        return v;
    };
    const TensorView q = columns(qkv.view, 0, q_cols), k = columns(qkv.view, q_cols, kv_cols);
    const TensorView v = columns(qkv.view, q_cols + kv_cols, kv_cols);
    const TensorView q3 = split_heads(q, n_heads, hd), k3 = split_heads(k, n_kv, hd);
    const TensorView v3 = split_heads(v, n_kv, hd), attn3 = split_heads(attn.view, n_heads, hd);
    const std::vector<AttentionCall> calls = plan_attention_calls(batch, cache, device_, q3, attn3);
    const RopeParams rope_params{c.rope_theta, 0};

    // Each layer is four linear calls (flashport/linear.h): the norms ride on the products that read
    // them, the residual adds on o_proj and down_proj, SwiGLU on [gate; up] where the weights are
    // grouped (GPU). Without grouped weights (CPU) the norm, q/k/v and gate/up run as plain ops through
    // h, gate and up. Every layer has the same shapes: layer 0's calls size the shared workspace.
    const LayerWeights& w0 = layers_[0];
    const bool grouped = w0.qkv.data != nullptr;
    Tensor h, gate, up;
    if (!grouped) {
        h = Tensor(dtype_, {tokens, hidden}, device_);
        gate = Tensor(dtype_, {tokens, inter}, device_);
        up = Tensor(dtype_, {tokens, inter}, device_);
    }
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
        p.residual = &x.view;
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
    down_params.residual = &x.view;
    size_t ws_bytes = std::max(linear_workspace_bytes(x.view, attn.view, w0.o, o_params(w0)),
                               linear_workspace_bytes(x.view, act.view, w0.down, down_params));
    if (grouped)
        ws_bytes = std::max({ws_bytes, linear_workspace_bytes(qkv.view, x.view, w0.qkv, qkv_params(w0)),
                             linear_workspace_bytes(act.view, x.view, w0.gate_up, gate_up_params(w0))});
    Buffer workspace(std::max<size_t>(ws_bytes, 1), device_);
    const auto run_linear = [&](const TensorView& out, const TensorView& in, const TensorView& weight,
                                const LinearParams& p) { linear(out, in, weight, p, workspace.data(), workspace.size()); };

    embedding(x.view, embed_, ids_view);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
        const LayerWeights& w = layers_[size_t(l)];
        if (grouped) {
            run_linear(qkv.view, x.view, w.qkv, qkv_params(w));
        } else {
            rms_norm(h.view, x.view, w.input_norm, eps);
            matmul(q, h.view, w.q, optional(w.q_bias));
            matmul(k, h.view, w.k, optional(w.k_bias));
            matmul(v, h.view, w.v, optional(w.v_bias));
        }
        if (c.qk_norm) {  // Qwen3: per-head RMSNorm before RoPE
            rms_norm(q3, q3, w.q_norm, eps);
            rms_norm(k3, k3, w.k_norm, eps);
        }
        // RoPE on q and k, and the new K/V into the cache: one op (one launch on a GPU).
        cache.rope_write(l, slot_view, pos_view, rope_params, q3, k3, v3);
        run_attention(l, calls, cache, q3, k3, v3, attn3);
        run_linear(x.view, attn.view, w.o, o_params(w));  // x += o_proj(attn)

        if (grouped) {
            run_linear(act.view, x.view, w.gate_up, gate_up_params(w));
        } else {
            rms_norm(h.view, x.view, w.post_norm, eps);
            matmul(gate.view, h.view, w.gate);
            matmul(up.view, h.view, w.up);
            swiglu(act.view, gate.view, up.view);
        }
        run_linear(x.view, act.view, w.down, down_params);  // x += down(act)
    }

    // The final norm and lm_head only on the rows whose logits are wanted (RMSNorm is per row).
    Tensor sel(dtype_, {rows, hidden}, device_);
    const size_t row_bytes = size_t(hidden) * dtype_size(dtype_);
    int64_t src = 0, dst = 0;
    for (const ForwardSeq& s : batch) {
        const int64_t n = int64_t(s.tokens.size()), take = s.all_logits ? n : 1;
        copy_bytes(sel.view.at(dst), device_, x.view.at(src + n - take), device_, row_bytes * size_t(take));
        src += n;
        dst += take;
    }
    rms_norm(sel.view, sel.view, final_norm_, eps);
    if (dtype_ == DType::F32) {  // CPU only (the GPU engine computes in bf16 / fp16)
        const TensorView out_f32(logits.data(), DType::F32, {rows, vocab});
        matmul(out_f32, sel.view, lm_head_);
        return;
    }
    // transformers' logits are lm_head's output in the model dtype, upcast later: round the same way.
    Tensor lg(dtype_, {rows, vocab}, device_);
    matmul(lg.view, sel.view, lm_head_);
    std::vector<uint16_t> host(size_t(rows * vocab));
    copy_bytes(host.data(), Device::cpu(), lg.view.data, device_, host.size() * sizeof(uint16_t));
    const uint16_t* p = host.data();
    for (int64_t i = 0; i < rows * vocab; ++i)
        logits[size_t(i)] = dtype_ == DType::BF16 ? bf16_to_float(p[i]) : fp16_to_float(p[i]);
}

}  // namespace flashport::engine
