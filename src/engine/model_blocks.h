// The blocks of the Qwen forward pass, one function each, in the order Model::forward runs them
// (model_forward.cpp plans the pass; model_blocks.cpp has the blocks):
//
//   embed_tokens         x = embed_tokens[ids]
//   for each layer:
//     attention_block    q, k, v = qkv_proj(rms_norm(x)); qwen3: rms_norm over each head of q and k;
//                        RoPE on q and k; k, v into the cache; x += o_proj(attention(q, k, v))
//     mlp_block          x += down_proj(silu(gate_proj(h)) * up_proj(h)) with h = rms_norm(x)
//   final_norm           the rows of x whose logits are wanted, normalised
//   lm_head              their logits, and each row's token when wanted (argmax, or sampled)
//
// Every block runs over the batch's tokens at once, as one flat [tokens, hidden] batch; only
// attention splits it per sequence. A block only enqueues device work on the stream it is given
// (no allocation, no host wait), so a whole decode step can be recorded into a graph.
//
// Shapes use the glossary: tokens (all the batch's new tokens), rows (those whose logits are
// wanted), hidden, intermediate, vocab, n_heads, n_kv_heads, head_dim.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/kv_cache.h"
#include "engine/model.h"
#include "flashport/ops.h"
#include "flashport/tensor.h"

namespace flashport::engine {

// One attention call of a forward pass: rows [row, row + b * n) of q and the output, b sequences of
// n new tokens each. A paged call reads K/V from the cache through its block table and lengths
// (views of the pass's index array) and has its own split-KV workspace; a dense one attends to the
// chunk's own K/V. Every layer runs the same calls, so they are planned once per pass.
struct AttentionCall {
    int64_t row = 0, b = 1, n = 0;
    bool paged = false;
    int64_t max_blocks = 1;                    // the block table's width
    size_t table_offset = 0, lens_offset = 0;  // into the index array
    const int32_t* table = nullptr;            // [b, max_blocks], where the ops read it
    const int32_t* lens = nullptr;             // [b]: each sequence's cached tokens, the new ones included
    void* workspace = nullptr;
    size_t workspace_bytes = 0;
};

// What the blocks of one forward pass share. Built once per pass (model_forward.cpp); the views
// stay valid while the pass's ForwardScratch and index array do.
struct ForwardPass {
    std::span<const ForwardSeq> batch;
    KvCache* cache = nullptr;
    float eps = 1e-6f;  // every RMSNorm's
    RopeParams rope;
    int32_t* indices = nullptr;            // the index array (model_forward.cpp); on a GPU its device copy
    IndexView ids, positions, slots;       // [tokens] each, in it: token ids, positions, cache slots
    std::vector<AttentionCall> attention;  // in batch order

    TensorView x;               // [tokens, hidden]: the residual stream, which each block adds to in place
    TensorView qkv;             // [tokens, (n_heads + 2 * n_kv_heads) * head_dim]
    TensorView q;               // [tokens, n_heads, head_dim]: qkv's first columns
    TensorView k, v;            // [tokens, n_kv_heads, head_dim]: qkv's next columns
    TensorView attn;            // [tokens, n_heads * head_dim]: attention's output
    TensorView attn_heads;      // [tokens, n_heads, head_dim]: the same
    TensorView act;             // [tokens, intermediate]: silu(gate) * up
    TensorView selected;        // [rows, hidden]: the rows of x whose logits are wanted, normalised
    TensorView logits;          // [rows, vocab], in the model dtype (fp32: the caller's span)
    int32_t* tokens = nullptr;  // [rows]: each row's chosen token, where the model runs; null: not wanted
    // Sampled choice (TokenChoice, model.h): per-row settings in the index array's device copy, the
    // seen sets, each input token's seen row (its length 0: nothing to mark) and the op's workspace.
    // sample_params null: the argmax.
    const SampleParams* sample_params = nullptr;
    SeenSets seen;
    IndexView seen_slots;
    void* sample_workspace = nullptr;
    size_t sample_workspace_bytes = 0;
    void* argmax_workspace = nullptr;  // the argmax's (flashport/ops.h), when tokens are wanted unsampled
    size_t argmax_workspace_bytes = 0;

    void* workspace = nullptr;  // linear's: the norm's output, the product before its add / SwiGLU
    size_t workspace_bytes = 0;
};

// Workspace bytes a paged call needs (GPU split-KV decode; 0 on the CPU and for dense calls).
size_t attention_workspace_bytes(const ForwardPass& f, const AttentionCall& call);
// Workspace bytes the blocks' linear calls need at most. Every layer has layer 0's shapes.
size_t blocks_workspace_bytes(const ForwardPass& f, const LayerWeights& w);

void embed_tokens(const ForwardPass& f, const TensorView& embed, void* stream);
void attention_block(const ForwardPass& f, const LayerWeights& w, int64_t layer, void* stream);
void mlp_block(const ForwardPass& f, const LayerWeights& w, void* stream);
void final_norm(const ForwardPass& f, const TensorView& norm, void* stream);
void lm_head(const ForwardPass& f, const TensorView& weight, void* stream);

}  // namespace flashport::engine
