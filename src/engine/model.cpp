// Model loading: config, safetensors, the weight check, and binding each weight as a view over the
// mapping (no copy, whatever its dtype: the ops read bf16 / fp16 / fp32 weights as they are).
#include "engine/model.h"

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

}  // namespace

Model Model::load(const std::filesystem::path& dir, const ModelOptions& options) {
    FP_CHECK(options.device.is_cpu(), "the engine runs on the CPU only for now (asked for ", options.device.name(),
             ")");
    FP_CHECK(std::filesystem::is_directory(dir), dir.string(), ": not a model folder (no such directory)");
    Model m;
    m.dir_ = dir;
    m.device_ = options.device;
    m.config_ = load_qwen_config(dir);
    m.weights_ = SafetensorsSet::open(dir);
    check_weights(m.config_, m.weights_);

    const std::vector<ExpectedTensor> expected = expected_tensors(m.config_);
    for (const ExpectedTensor& e : expected) m.weight_bytes_ += m.weights_.info(e.name).nbytes();
    if (options.prefault || options.on_progress) {
        size_t done = 0;
        volatile unsigned sink = 0;
        for (const ExpectedTensor& e : expected) {
            if (options.prefault) sink = sink + prefault(m.weights_.bytes(e.name));
            done += m.weights_.info(e.name).nbytes();
            if (options.on_progress) options.on_progress(done, m.weight_bytes_);
        }
    }

    const QwenConfig& c = m.config_;
    const SafetensorsSet& w = m.weights_;
    m.embed_ = w.view("model.embed_tokens.weight");
    m.final_norm_ = w.view("model.norm.weight");
    m.lm_head_ = c.tie_word_embeddings ? m.embed_ : w.view("lm_head.weight");
    m.dtype_ = options.dtype ? *options.dtype : c.dtype ? *c.dtype : m.embed_.dtype;

    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
        const std::string p = "model.layers." + std::to_string(i) + ".";
        LayerWeights l;
        l.input_norm = w.view(p + "input_layernorm.weight");
        l.post_norm = w.view(p + "post_attention_layernorm.weight");
        l.q = w.view(p + "self_attn.q_proj.weight");
        l.k = w.view(p + "self_attn.k_proj.weight");
        l.v = w.view(p + "self_attn.v_proj.weight");
        l.o = w.view(p + "self_attn.o_proj.weight");
        if (c.qkv_bias) {
            l.q_bias = w.view(p + "self_attn.q_proj.bias");
            l.k_bias = w.view(p + "self_attn.k_proj.bias");
            l.v_bias = w.view(p + "self_attn.v_proj.bias");
        }
        if (c.o_bias) l.o_bias = w.view(p + "self_attn.o_proj.bias");
        if (c.qk_norm) {
            l.q_norm = w.view(p + "self_attn.q_norm.weight");
            l.k_norm = w.view(p + "self_attn.k_norm.weight");
        }
        l.gate = w.view(p + "mlp.gate_proj.weight");
        l.up = w.view(p + "mlp.up_proj.weight");
        l.down = w.view(p + "mlp.down_proj.weight");
        m.layers_.push_back(l);
    }
    return m;
}

KvCache Model::make_cache(const KvCacheOptions& options) const {
    return KvCache(config_.num_hidden_layers, config_.num_key_value_heads, config_.head_dim, dtype_, options, device_);
}

}  // namespace flashport::engine
