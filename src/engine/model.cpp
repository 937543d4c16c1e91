// Model loading: config, safetensors, the weight check, and binding each weight as a view over the
// mapping (no copy, whatever its dtype: the ops read bf16 / fp16 / fp32 weights as they are).
#include "engine/model.h"

#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include "flashport/device.h"
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

Model Model::load(const std::filesystem::path& dir, const ModelOptions& options) {
    FP_CHECK(std::filesystem::is_directory(dir), dir.string(), ": not a model folder (no such directory)");
    Model m;
    m.dir_ = dir;
    m.device_ = options.device;
    m.config_ = load_qwen_config(dir);
    m.weights_ = SafetensorsSet::open(dir);
    check_weights(m.config_, m.weights_);

    const std::vector<ExpectedTensor> expected = expected_tensors(m.config_);
    for (const ExpectedTensor& e : expected) m.weight_bytes_ += m.weights_.info(e.name).nbytes();
    if (options.prefault || options.check_weights || options.on_progress) {
        size_t done = 0;
        volatile unsigned sink = 0;
        for (const ExpectedTensor& e : expected) {
            if (options.check_weights)  // reads every byte, so it prefaults too
                check_finite(m.weights_.view(e.name), e.name, m.weights_.source());
            else if (options.prefault)
                sink = sink + prefault(m.weights_.bytes(e.name));
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
    if (!m.device_.is_cpu() && !options.dtype && m.dtype_ == DType::F32) m.dtype_ = DType::BF16;

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
    if (!m.device_.is_cpu()) m.upload_weights();
    return m;
}

void Model::upload_weights() {
    FP_CHECK(dtype_ == DType::BF16 || dtype_ == DType::F16, "the engine on ", device_.name(),
             " computes in bf16 or fp16 (the GPU attention kernels' dtypes), not ", dtype_name(dtype_),
             "; choose one with --dtype");
    weight_bytes_ = 0;
    // One device copy per weight, in the compute dtype. A tied lm_head shares the embedding's copy.
    const bool tied = lm_head_.data == embed_.data;
    // Safetensors views are contiguous, so shape and strides (in elements) stay as they are. A group of
    // weights with the same inner shape goes into one buffer, rows after rows, and the returned view
    // spans them all (its members are repointed into it).
    auto upload_group = [&](std::initializer_list<TensorView*> group) {
        TensorView all;
        size_t total = 0;
        for (TensorView* t : group)
            if (t->data) total += size_t(t->numel()) * dtype_size(dtype_);
        if (total == 0) return all;  // absent optional weights (biases, q/k norms)
        Buffer& buf = device_weights_.emplace_back(total, device_);
        size_t offset = 0;
        int64_t rows = 0;
        for (TensorView* t : group) {
            if (!t->data) continue;
            const int64_t n = t->numel();
            const size_t bytes = size_t(n) * dtype_size(dtype_);
            void* dst = static_cast<char*>(buf.data()) + offset;
            if (t->dtype == dtype_) {
                copy_bytes(dst, device_, t->data, Device::cpu(), bytes);
            } else {
                std::vector<unsigned char> staged(bytes);
                const auto* src = static_cast<const unsigned char*>(t->data);
                for (int64_t i = 0; i < n; ++i)
                    store_from_float(staged.data() + size_t(i) * dtype_size(dtype_), dtype_,
                                     load_as_float(src + size_t(i) * dtype_size(t->dtype), t->dtype));
                copy_bytes(dst, device_, staged.data(), Device::cpu(), bytes);
            }
            if (all.data == nullptr) all = *t;
            t->data = dst;
            t->dtype = dtype_;
            t->device = device_;
            offset += bytes;
            rows += t->dim(0);
        }
        all.data = buf.data();
        all.dtype = dtype_;
        all.device = device_;
        all.shape[0] = rows;
        weight_bytes_ += total;
        return all;
    };
    upload_group({&embed_});
    upload_group({&final_norm_});
    if (tied)
        lm_head_ = embed_;
    else
        upload_group({&lm_head_});
    for (LayerWeights& l : layers_) {
        l.qkv = upload_group({&l.q, &l.k, &l.v});
        // Qwen2 has all three biases, the others none (check_weights): a group is all or nothing.
        l.qkv_bias = upload_group({&l.q_bias, &l.k_bias, &l.v_bias});
        l.gate_up = upload_group({&l.gate, &l.up});
        for (TensorView* t : {&l.input_norm, &l.post_norm, &l.o, &l.o_bias, &l.q_norm, &l.k_norm, &l.down})
            upload_group({t});
    }
}

KvCache Model::make_cache(const KvCacheOptions& options) const {
    return KvCache(config_.num_hidden_layers, config_.num_key_value_heads, config_.head_dim, dtype_, options, device_);
}

}  // namespace flashport::engine
