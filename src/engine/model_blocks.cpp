// The blocks of the Qwen forward pass (model_blocks.h): transformers' Qwen2DecoderLayer /
// Qwen3DecoderLayer as four `linear` calls (flashport/linear.h: each norm rides on the product that
// reads it, the residual adds on o_proj and down_proj, SwiGLU on [gate; up]) plus RoPE, the cache
// write and attention, paged or dense as the pass planned each call (model_forward.cpp says which
// and why).
#include "engine/model_blocks.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "flashport/attention.h"
#include "flashport/device.h"
#include "flashport/linear.h"
#include "flashport/paged_attention.h"
#include "flashport/sample.h"

namespace flashport::engine {
namespace {

const TensorView* optional(const TensorView& t) {
    return t.data ? &t : nullptr;
}

// Qwen2's RoPE and cache write ride on the qkv projection (one GEMV launch for a decode token) unless
// FLASHPORT_QKV_ROPE=separate, which keeps rope_qk_cache_write's own launch: the A/B switch of
// docs/perf.md's measurement. Read once.
bool rope_in_qkv_projection() {
    static const bool in = [] {
        const char* env = std::getenv("FLASHPORT_QKV_ROPE");
        return !(env && std::strcmp(env, "separate") == 0);
    }();
    return in;
}

// The GEMV of a decode token runs its norm in its own launch (the faster on the H200) unless
// FLASHPORT_GEMV_NORM=fused, which folds it into the GEMV's prologue: the A/B switch of docs/perf.md's
// "the norm apart". Read once, so the workspace sized and the kernels run always agree.
bool norm_in_gemv_prologue() {
    static const bool fused = [] {
        const char* env = std::getenv("FLASHPORT_GEMV_NORM");
        return env && std::strcmp(env, "fused") == 0;
    }();
    return fused;
}

// The residual adds of o_proj and down ride on the GEMM at 2+ tokens (beta = 1 onto x) unless
// FLASHPORT_RESIDUAL=add, which keeps add's own launch: the A/B switch of docs/perf.md's "the residual
// in the GEMM". Read once.
bool residual_in_gemm() {
    static const bool in = [] {
        const char* env = std::getenv("FLASHPORT_RESIDUAL");
        return !(env && std::strcmp(env, "add") == 0);
    }();
    return in;
}

// FLASHPORT_BATCH_GEMV=mma: batched decode's products (2 to 32 tokens) ask for the GEMV (impl GEMV),
// which a GPU with matrix instructions runs as the matrix-core GEMV (linear_tc.cuh), instead of AUTO's
// cuBLAS: the A/B switch of docs/perf.md's "A matrix-core GEMV for batched decode". Where the GPU has
// no such kernel, products of more than 8 tokens are then refused with matmul's error. Read once.
bool batch_gemv_asked() {
    static const bool asked = [] {
        const char* env = std::getenv("FLASHPORT_BATCH_GEMV");
        return env && std::strcmp(env, "mma") == 0;
    }();
    return asked;
}
// The impl of a projection of `tokens` rows.
MatmulImpl projection_impl(int64_t tokens) {
    return batch_gemv_asked() && tokens > 1 && tokens <= LINEAR_GEMV_MAX_TOKENS ? MatmulImpl::GEMV : MatmulImpl::AUTO;
}

// Rows [row, row + b * n) of a [tokens, heads, head_dim] view as [b, n, heads, head_dim].
TensorView rows4(const TensorView& t3, int64_t row, int64_t b, int64_t n) {
    TensorView v = t3;
    v.data = t3.at(row);
    v.ndim = 4;
    v.shape = {b, n, t3.shape[1], t3.shape[2]};
    v.stride = {n * t3.stride[0], t3.stride[0], t3.stride[1], t3.stride[2]};
    return v;
}

const PagedAttentionParams PAGED = [] {
    PagedAttentionParams p;
    p.causal = true;
    return p;
}();

PagedKVCache paged_view(const ForwardPass& f, const AttentionCall& call, int64_t layer) {
    return {f.cache->k(layer), f.cache->v(layer), call.table, call.max_blocks, call.lens};
}

// attn_heads = softmax(q kᵀ · scale, causal) v, GQA, in the pass's attention calls: each call's rows
// as [b, n, heads, head_dim].
void run_attention(const ForwardPass& f, int64_t layer, void* stream) {
    AttentionParams dense;
    dense.causal = true;
    dense.impl = AttentionImpl::FLASH;
    for (const AttentionCall& c : f.attention) {
        const TensorView out = rows4(f.attn_heads, c.row, c.b, c.n), q = rows4(f.q, c.row, c.b, c.n);
        if (c.paged)
            paged_attention(out, q, paged_view(f, c, layer), nullptr, PAGED, c.workspace, c.workspace_bytes, stream);
        else
            flashport::attention(out, q, rows4(f.k, c.row, 1, c.n), rows4(f.v, c.row, 1, c.n), nullptr, dense, stream);
    }
}

// A projection by one of the model's weights, which no kernel writes while the model runs.
LinearParams model_weight() {
    LinearParams p;
    p.constant_weight = true;
    return p;
}

// The four projections of a layer, with what surrounds each.
LinearParams qkv_proj(const ForwardPass& f, const LayerWeights& w) {  // rms_norm(x) · [q; k; v]ᵀ + bias
    LinearParams p = model_weight();
    p.norm_weight = &w.input_norm;
    p.norm_in_prologue = norm_in_gemv_prologue();
    p.eps = f.eps;
    p.bias = optional(w.qkv_bias);
    return p;
}
LinearParams o_proj(const ForwardPass& f, const LayerWeights& w) {  // x + attn · oᵀ (+ bias)
    LinearParams p = model_weight();
    p.bias = optional(w.o_bias);
    p.residual = &f.x;
    p.residual_in_gemm = residual_in_gemm();
    return p;
}
LinearParams gate_up_proj(const ForwardPass& f, const LayerWeights& w) {  // swiglu(rms_norm(x) · [gate; up]ᵀ)
    LinearParams p = model_weight();
    p.norm_weight = &w.post_norm;
    p.norm_in_prologue = norm_in_gemv_prologue();
    p.eps = f.eps;
    p.swiglu = true;
    return p;
}
LinearParams down_proj(const ForwardPass& f) {  // x + act · downᵀ
    LinearParams p = model_weight();
    p.residual = &f.x;
    p.residual_in_gemm = residual_in_gemm();
    return p;
}

void project(const ForwardPass& f, const TensorView& out, const TensorView& in, const TensorView& weight,
             LinearParams p, void* stream) {
    p.impl = projection_impl(in.dim(0));
    linear(out, in, weight, p, f.workspace, f.workspace_bytes, stream);
}

}  // namespace

size_t attention_workspace_bytes(const ForwardPass& f, const AttentionCall& call) {
    if (!call.paged) return 0;
    return paged_attention_workspace_bytes(rows4(f.attn_heads, call.row, call.b, call.n),
                                           rows4(f.q, call.row, call.b, call.n), paged_view(f, call, 0), nullptr,
                                           PAGED);
}

size_t blocks_workspace_bytes(const ForwardPass& f, const LayerWeights& w) {
    return std::max({linear_workspace_bytes(f.qkv, f.x, w.qkv, qkv_proj(f, w)),
                     linear_workspace_bytes(f.x, f.attn, w.o, o_proj(f, w)),
                     linear_workspace_bytes(f.act, f.x, w.gate_up, gate_up_proj(f, w)),
                     linear_workspace_bytes(f.x, f.act, w.down, down_proj(f))});
}

void embed_tokens(const ForwardPass& f, const TensorView& embed, void* stream) {
    embedding(f.x, embed, f.ids, stream);
}

void attention_block(const ForwardPass& f, const LayerWeights& w, int64_t layer, void* stream) {
    // qkv [tokens, (n_heads + 2 * n_kv_heads) * head_dim], then RoPE on q and k in place and the new K/V
    // into the cache. Qwen2: one op, in the projection's epilogue (one GEMV launch for a decode token).
    // Qwen3: an RMSNorm over each head of q and k comes before RoPE, so the three run apart.
    if (!w.q_norm.data && rope_in_qkv_projection()) {
        RopeCacheWrite rc;
        rc.n_heads = f.q.dim(1);
        rc.n_kv_heads = f.k.dim(1);
        rc.rope = f.rope;
        rc.positions = f.positions;
        rc.slots = f.slots;
        rc.k_cache = f.cache->k(layer);
        rc.v_cache = f.cache->v(layer);
        LinearParams p = qkv_proj(f, w);
        p.rope_cache = &rc;
        project(f, f.qkv, f.x, w.qkv, p, stream);
    } else {
        project(f, f.qkv, f.x, w.qkv, qkv_proj(f, w), stream);
        if (w.q_norm.data) {
            rms_norm(f.q, f.q, w.q_norm, f.eps, stream);  // q [tokens, n_heads, head_dim]
            rms_norm(f.k, f.k, w.k_norm, f.eps, stream);  // k [tokens, n_kv_heads, head_dim]
        }
        f.cache->rope_write(layer, f.slots, f.positions, f.rope, f.q, f.k, f.v, stream);
    }
    run_attention(f, layer, stream);                     // attn [tokens, n_heads * head_dim]
    project(f, f.x, f.attn, w.o, o_proj(f, w), stream);  // x [tokens, hidden] += o_proj(attn)
}

void mlp_block(const ForwardPass& f, const LayerWeights& w, void* stream) {
    project(f, f.act, f.x, w.gate_up, gate_up_proj(f, w), stream);  // act [tokens, intermediate]
    project(f, f.x, f.act, w.down, down_proj(f), stream);           // x [tokens, hidden] += down_proj(act)
}

void final_norm(const ForwardPass& f, const TensorView& norm, void* stream) {
    if (f.selected.dim(0) == f.x.dim(0)) {  // every row wanted (decode: one token per sequence)
        rms_norm(f.selected, f.x, norm, f.eps, stream);
        return;
    }
    const size_t row_bytes = size_t(f.x.dim(1)) * dtype_size(f.x.dtype);
    int64_t src = 0, dst = 0;
    for (const ForwardSeq& s : f.batch) {  // each sequence's last row, or all of them (all_logits)
        const int64_t n = int64_t(s.tokens.size()), take = s.all_logits ? n : 1;
        copy_bytes_async(f.selected.at(dst), f.x.device, f.x.at(src + n - take), f.x.device, row_bytes * size_t(take),
                         stream);
        src += n;
        dst += take;
    }
    rms_norm(f.selected, f.selected, norm, f.eps, stream);
}

void lm_head(const ForwardPass& f, const TensorView& weight, void* stream) {
    LinearParams p = model_weight();
    p.impl = projection_impl(f.selected.dim(0));
    linear(f.logits, f.selected, weight, p, nullptr, 0, stream);
    if (!f.tokens) return;
    if (!f.sample_params) {
        argmax(f.tokens, f.logits, f.argmax_workspace, f.argmax_workspace_bytes, stream);
        return;
    }
    // This pass's input tokens join their sequences' seen sets before the penalty reads them.
    if (f.seen_slots.size > 0) mark_seen(f.seen, f.ids, static_cast<const int32_t*>(f.seen_slots.data), stream);
    sample(f.tokens, f.logits, f.sample_params, f.seen, f.sample_workspace, f.sample_workspace_bytes, stream);
}

}  // namespace flashport::engine
