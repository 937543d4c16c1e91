// A Qwen2 / Qwen2.5 / Qwen3 causal LM: its weights (mapped from the safetensors files, the stacked
// projections copied; model_weights.h) and the forward pass, written only against the op API
// (flashport/ops.h, linear.h, attention.h, paged_attention.h) so that a GPU backend slots in under
// the same code.
//
//   auto model = Model::load("path/to/folder");
//   KvCache cache = model.make_cache();
//   ... (the Engine in engine.h does the bookkeeping; use it rather than forward() directly)
//
// One forward pass runs a flat batch: the new tokens of several sequences, each continuing from its
// own position in the KV cache. Per layer (transformers' Qwen2DecoderLayer / Qwen3DecoderLayer):
//   h = rms_norm(x) → q, k, v = h·Wᵀ (+ bias, qwen2) → qwen3: rms_norm per head on q and k
//     → RoPE (half-split) on q, k → k, v into the cache → attention (GQA, causal)
//     → x += o_proj(attn) → h = rms_norm(x) → x += down(silu(gate(h)) · up(h))
// then the final norm and lm_head on the rows whose logits are wanted.
//
// Numerics: activations and the KV cache are in the model dtype (config.json's dtype, as
// transformers loads the model), and every op rounds where PyTorch rounds in that dtype (see
// flashport/ops.h), so a bf16 model follows transformers' bf16 run, not an fp32 one. Logits are
// rounded to the model dtype (transformers' lm_head output) and returned as fp32.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "engine/forward_scratch.h"
#include "engine/kv_cache.h"
#include "engine/model_config.h"
#include "engine/safetensors.h"
#include "flashport/memory.h"
#include "flashport/sample.h"
#include "flashport/tensor.h"

namespace flashport::engine {

struct ModelOptions {
    // Activation and KV-cache dtype. Unset: config.json's dtype (what transformers computes in), or
    // the embedding's dtype when the config gives none. F32 on a bf16 folder gives the fp32 run.
    std::optional<DType> dtype;
    // Reads every weight page once while loading, so the first token's latency is not page faults
    // and the progress can be shown. Called with (bytes done, bytes total) after each tensor.
    bool prefault = true;
    // Scans every weight for NaN and +-Inf while loading and refuses the folder, naming the first bad
    // tensor and index (a NaN weight otherwise shows up, if at all, as NaN logits mid-generation; or
    // not at all where attention treats a NaN score row as masked). On by default everywhere: the load
    // reads every byte anyway (the CPU's prefault, the GPU's upload), and the scan runs at memory
    // bandwidth (docs/architecture.md, "Bad input"). It replaces the prefault when on.
    bool check_weights = true;
    // CPU: run on the files' mappings for the weights the forward reads alone (the stacks are copies
    // either way) instead of copying every weight into anonymous memory. Mapping loads faster and
    // shares the page cache between processes, but file pages are 4 KiB pages, which the kernel may
    // also scan and reclaim while they are in use: on the development VM decode ran at 7-32 tok/s
    // mapped against 33-36 copied (docs/perf.md, "CPU decode: weights in anonymous memory").
    bool map_weights = false;
    std::function<void(size_t, size_t)> on_progress;
    // Where the forward pass runs. On a GPU every weight is uploaded once, in the compute dtype, which
    // must be bf16 or fp16 there (the attention kernels' dtypes): an fp32 folder without an explicit
    // dtype computes in bf16, and a weight stored in another dtype is rounded to it on upload.
    Device device = Device::cpu();
};

// A decoder layer's weights, in one layout on every device: the projections that read the same
// input are stacked, so each is one product (flashport/linear.h; one GEMV launch per decode token on
// a GPU). Where each lives, and in which dtype: model_weights.h.
struct LayerWeights {
    TensorView input_norm;      // [hidden]
    TensorView qkv;             // [(n_heads + 2 * n_kv_heads) * head_dim, hidden]: q_proj, k_proj, v_proj rows
    TensorView qkv_bias;        // [(n_heads + 2 * n_kv_heads) * head_dim]: qwen2 (data null when absent)
    TensorView q_norm, k_norm;  // [head_dim]: qwen3 (data null when absent)
    TensorView o;               // [hidden, n_heads * head_dim]
    TensorView o_bias;          // [hidden]: qwen3 with attention_bias (data null when absent)
    TensorView post_norm;       // [hidden]
    TensorView gate_up;         // [2 * intermediate, hidden]: gate_proj rows, then up_proj rows
    TensorView down;            // [hidden, intermediate]
};

// One sequence's share of a forward pass.
struct ForwardSeq {
    const BlockList* cache = nullptr;  // reserved for start + tokens.size() tokens; forward writes K/V into it
    std::span<const int32_t> tokens;   // the new tokens
    int64_t start = 0;                 // position of tokens[0]: how many tokens the cache already holds
    bool all_logits = false;           // logits for every new token (perplexity); else the last one only
};

// How a forward pass picks each logit row's token where the model runs (Model::forward's `tokens`):
// the argmax when `rows` is empty, else the `sample` op (flashport/sample.h) with one SampleParams
// per logit row. `seen` holds the sequences' repetition-penalty sets on the model's device; the
// pass first marks its own input tokens in them, through `seen_slots` (one per token of the pass,
// in batch order: that token's sequence's row of `seen`, or -1).
struct TokenChoice {
    std::span<const SampleParams> rows;
    SeenSets seen;
    std::span<const int32_t> seen_slots;  // empty: nothing to mark
};

// The dtype a model computes in (activations and KV cache) under `options`: options.dtype, else
// config.json's, else the embedding's; on a GPU an fp32 folder without an explicit dtype computes in
// bf16. Model::load uses it, and so does `flashport doctor` to size a model it does not load.
DType compute_dtype(const QwenConfig& config, const SafetensorsSet& weights, const ModelOptions& options);

class Model {
public:
    // Reads DIR/config.json and DIR's safetensors (single or sharded), checks every weight's name,
    // shape and dtype, and binds them. Errors name the folder, file and tensor.
    static Model load(const std::filesystem::path& dir, const ModelOptions& options = {});

    const QwenConfig& config() const { return config_; }
    DType dtype() const { return dtype_; }
    Device device() const { return device_; }
    const std::filesystem::path& dir() const { return dir_; }
    // The weights' bytes as the forward reads them: the copies (counted by the tracked allocator) and,
    // on the CPU with map_weights, the views of the files' mappings (not counted).
    size_t weight_bytes() const { return weight_bytes_; }
    // Of those, the bytes the forward reads from the files' mappings (ModelOptions::map_weights).
    size_t mapped_weight_bytes() const { return mapped_weight_bytes_; }
    const LayerWeights& layer(int64_t i) const { return layers_[size_t(i)]; }

    // A cache shaped for this model (its dtype, layers, kv heads, head_dim).
    KvCache make_cache(const KvCacheOptions& options = {}) const;

    // Runs the batch. logits: [rows, vocab_size] fp32, rows = Σ (all_logits ? tokens.size() : 1) in
    // batch order. Writes each sequence's K/V at positions [start, start + tokens.size()). `scratch`:
    // buffers kept between calls (null: allocated for this call only). `tokens` (empty, or one per
    // logit row): each row's token chosen where the model runs, as `choice` says (by default the
    // argmax: flashport/ops.h argmax, -1 for a NaN / +inf row; sampled: flashport/sample.h's ids);
    // logits may then be empty, which skips bringing them to the host.
    void forward(std::span<const ForwardSeq> batch, KvCache& cache, std::span<float> logits,
                 ForwardScratch* scratch = nullptr, std::span<int32_t> tokens = {},
                 const TokenChoice& choice = {}) const;

    static int64_t logit_rows(std::span<const ForwardSeq> batch);

private:
    Model() = default;

    std::filesystem::path dir_;
    QwenConfig config_;
    SafetensorsSet weights_;
    DType dtype_ = DType::F32;
    Device device_;
    size_t weight_bytes_ = 0, mapped_weight_bytes_ = 0;
    TensorView embed_, final_norm_, lm_head_;
    std::vector<LayerWeights> layers_;
    std::vector<Buffer> weight_copies_;  // what the copied weights' views point into (model_weights.h)
};

}  // namespace flashport::engine
