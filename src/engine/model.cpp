// Model loading: config, safetensors, the weight check, and placing each weight where the forward
// reads it (model_weights.h: on the CPU a copy each in its stored dtype, or with map_weights a view of
// the mapping, as the ops read bf16 / fp16 / fp32 weights as they are; on a GPU one copy each, all in
// one buffer).
#include "engine/model.h"

#include <cstdlib>

#include <sstream>
#include <string>
#include <vector>

#include "engine/model_weights.h"
#include "flashport/error.h"

namespace flashport::engine {
namespace {

// Touches one byte per page so the kernel reads the file now (and the progress bar means something)
// rather than on the first token. Returns a value derived from the bytes so it is not optimised away.
unsigned prefault(std::span<const std::byte> bytes) {
    constexpr size_t PAGE = 4096;
    unsigned sum = 0;
    for (size_t i = 0; i < bytes.size(); i += PAGE) sum += unsigned(bytes[i]);
    if (!bytes.empty()) sum += unsigned(bytes.back());
    return sum;
}

// A NaN or Inf weight poisons every activation it touches, yet an attention kernel that treats a
// NaN score row as masked hides it and the model "works", producing plausible text. Naming the first
// bad element at load turns that into an error that says where the checkpoint is broken.
void check_finite(const TensorView& w, const std::string& name, const std::string& source) {
    const int64_t bad = find_non_finite(w.data, w.dtype, w.numel());
    if (bad < 0) return;
    std::vector<int64_t> index(size_t(w.ndim));
    int64_t rest = bad;
    for (int d = w.ndim - 1; d >= 0; --d) {
        index[size_t(d)] = rest % w.shape[size_t(d)];
        rest /= w.shape[size_t(d)];
    }
    std::ostringstream at;
    for (size_t d = 0; d < index.size(); ++d) at << (d ? ", " : "") << index[d];
    const float value = load_as_float(static_cast<const char*>(w.data) + size_t(bad) * dtype_size(w.dtype), w.dtype);
    fail("tensor '", name, "' in ", source, " holds ", non_finite_name(value), " at index [", at.str(),
         "]: the checkpoint is corrupt (--no-check-weights loads it anyway)");
}

}  // namespace

DType compute_dtype(const QwenConfig& config, const SafetensorsSet& weights, const ModelOptions& options) {
    if (options.dtype) return *options.dtype;
    const DType d = config.dtype ? *config.dtype : weights.view("model.embed_tokens.weight").dtype;
    return !options.device.is_cpu() && d == DType::F32 ? DType::BF16 : d;
}

Model Model::load(const std::filesystem::path& dir, const ModelOptions& options) {
    FP_CHECK(std::filesystem::is_directory(dir), dir.string(), ": not a model folder (no such directory)");
    Model m;
    m.dir_ = dir;
    m.device_ = options.device;
    m.config_ = load_qwen_config(dir);
    m.weights_ = SafetensorsSet::open(dir);
    check_weights(m.config_, m.weights_);

    const std::vector<ExpectedTensor> expected = expected_tensors(m.config_);
    size_t file_bytes = 0;
    for (const ExpectedTensor& e : expected) file_bytes += m.weights_.info(e.name).nbytes();
    if (options.prefault || options.check_weights || options.on_progress) {
        size_t done = 0;
        volatile unsigned sink = 0;
        for (const ExpectedTensor& e : expected) {
            if (options.check_weights)  // reads every byte, so it prefaults too
                check_finite(m.weights_.view(e.name), e.name, m.weights_.source());
            else if (options.prefault)
                sink = sink + prefault(m.weights_.bytes(e.name));
            done += m.weights_.info(e.name).nbytes();
            if (options.on_progress) options.on_progress(done, file_bytes);
        }
    }

    const QwenConfig& c = m.config_;
    m.dtype_ = compute_dtype(c, m.weights_, options);
    FP_CHECK(m.device_.is_cpu() || m.dtype_ == DType::BF16 || m.dtype_ == DType::F16, "the engine on ",
             m.device_.name(), " computes in bf16 or fp16 (the GPU attention kernels' dtypes), not ",
             dtype_name(m.dtype_), "; choose one with --dtype");

    // A GPU's weights in one buffer (WeightPlacer): room for each at its alignment.
    // FLASHPORT_WEIGHT_ARENA=0 gives each its own buffer again, for the A/B of docs/perf.md.
    const char* arena_env = std::getenv("FLASHPORT_WEIGHT_ARENA");
    const size_t arena = m.device_.is_cpu() || (arena_env && std::string(arena_env) == "0")
                             ? 0
                             : size_t(placed_weight_bytes(c, m.weights_, m.device_, m.dtype_)) +
                                   WeightPlacer::WEIGHT_ALIGN * expected.size();
    WeightPlacer place(m.weights_, m.device_, m.dtype_, m.weight_copies_, options.map_weights, arena);
    m.embed_ = place.single("model.embed_tokens.weight");
    m.final_norm_ = place.single("model.norm.weight");
    m.lm_head_ = c.tie_word_embeddings ? m.embed_ : place.single("lm_head.weight");
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
        const std::string p = "model.layers." + std::to_string(i) + ".";
        const auto attn = [&](const char* proj, const char* what) { return p + "self_attn." + proj + "_proj." + what; };
        LayerWeights l;
        l.input_norm = place.single(p + "input_layernorm.weight");
        l.qkv = place.stacked({attn("q", "weight"), attn("k", "weight"), attn("v", "weight")});
        if (c.qkv_bias) l.qkv_bias = place.stacked({attn("q", "bias"), attn("k", "bias"), attn("v", "bias")});
        if (c.qk_norm) {
            l.q_norm = place.single(p + "self_attn.q_norm.weight");
            l.k_norm = place.single(p + "self_attn.k_norm.weight");
        }
        l.o = place.single(attn("o", "weight"));
        if (c.o_bias) l.o_bias = place.single(attn("o", "bias"));
        l.post_norm = place.single(p + "post_attention_layernorm.weight");
        l.gate_up = place.stacked({p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"});
        l.down = place.single(p + "mlp.down_proj.weight");
        m.layers_.push_back(l);
    }
    m.weight_bytes_ = place.bytes();
    m.mapped_weight_bytes_ = place.mapped_bytes();
    return m;
}

KvCache Model::make_cache(const KvCacheOptions& options) const {
    return KvCache(config_.num_hidden_layers, config_.num_key_value_heads, config_.head_dim, dtype_, options, device_);
}

}  // namespace flashport::engine
