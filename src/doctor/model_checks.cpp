// model.*: with --model DIR [--ctx N], whether the weights and a KV cache of N tokens fit on each device,
// and by how much. The sizes are the engine's own (compute_dtype, placed_weight_bytes, kv_cache_bytes),
// read from config.json and the safetensors headers without loading the weights. Activations and scratch
// come on top: small beside the weights and the cache (tens of MiB for a 7B model's decode).
#include <algorithm>

#include "core/host_memory.h"
#include "doctor/checks.h"
#include "engine/model.h"
#include "engine/model_weights.h"
#include "flashport/checked.h"
#include "flashport/error.h"

namespace flashport::doctor {
namespace {

struct ModelSize {
    const engine::QwenConfig& config;
    const engine::SafetensorsSet& weights;
    int64_t ctx;
};

// One device's fit: weights in its placement, the cache in its compute dtype.
void fit_check(const ModelSize& m, Device device, const std::string& id, std::optional<int64_t> available,
               const std::string& source, Checks& out) {
    const engine::QwenConfig& c = m.config;
    engine::ModelOptions options;
    options.device = device;
    const DType dtype = engine::compute_dtype(c, m.weights, options);
    const int64_t weights = engine::placed_weight_bytes(c, m.weights, device, dtype);
    const auto kv = [&](int64_t tokens) {
        return engine::kv_cache_bytes(c.num_hidden_layers, c.num_key_value_heads, c.head_dim, dtype, tokens);
    };
    const int64_t cache = kv(m.ctx);
    const int64_t need = checked_add(weights, cache, "the weights and the KV cache of ", m.ctx, " tokens");
    const std::string what = "weights " + size_text(weights) + " (" + dtype_name(dtype) + " compute) + KV cache " +
                             size_text(cache) + " for " + std::to_string(m.ctx) + " tokens = " + size_text(need);
    if (!available) {
        out.add(id, Status::WARN, what + "; free memory unknown (" + source + " unreadable)",
                "check free memory by hand (free -g, nvidia-smi, rocm-smi)");
        return;
    }
    const std::string have = size_text(*available) + " free (" + source + ")";
    if (need <= *available) {
        out.ok(id, what + "; " + have + ": " + size_text(*available - need) + " to spare");
        return;
    }
    // The longest context that fits, in whole cache blocks, as the advice.
    std::string fix = "the weights alone need " + size_text(weights) + ": use a smaller model, or free memory";
    const int64_t block = engine::KvCacheOptions{}.block_size;
    if (weights < *available) {
        const int64_t tokens = (*available - weights) / kv(block) * block;
        fix = tokens < block
                  ? "no room for one block of the KV cache beside the weights: free memory"
                  : "use --ctx " + std::to_string(std::min(tokens, m.ctx)) + " (the most that fits), or free memory";
    }
    out.add(id, Status::FAIL, what + "; " + have + ": short by " + size_text(need - *available), fix);
}

}  // namespace

void model_checks(const Inputs& in, const Host& host, Checks& out) {
    const ModelQuery& q = *in.model;
    FP_CHECK(std::filesystem::is_directory(q.dir), q.dir.string(), ": not a model folder (no such directory)");
    const engine::QwenConfig config = engine::load_qwen_config(q.dir);
    const engine::SafetensorsSet weights = engine::SafetensorsSet::open(q.dir);
    engine::check_weights(config, weights);
    const int64_t ctx = q.ctx.value_or(config.max_position_embeddings);
    FP_CHECK(ctx > 0, "--ctx must be at least 1 token, got ", ctx);

    const std::string summary = config.model_type + ", " + std::to_string(config.num_hidden_layers) + " layers, " +
                                std::to_string(config.num_key_value_heads) + " KV heads, head_dim " +
                                std::to_string(config.head_dim) + ", context " +
                                std::to_string(config.max_position_embeddings) + " tokens (" + q.dir.string() + ")";
    if (ctx > config.max_position_embeddings)
        out.add("model.config", Status::WARN, summary + "; --ctx " + std::to_string(ctx) + " is beyond it",
                "use --ctx " + std::to_string(config.max_position_embeddings) +
                    " or less: the engine refuses longer sequences");
    else
        out.ok("model.config", summary);

    const ModelSize m{config, weights, ctx};
    try {
        fit_check(m, Device::cpu(), "model.fit_cpu", host_available_memory(host.root), "MemAvailable", out);
        for (size_t i = 0; i < in.runtime.gpus.size(); ++i)
            fit_check(m, Device::gpu(int(i)), "model.fit_gpu" + std::to_string(i), in.runtime.gpus[i].free_bytes,
                      "the driver's free memory", out);
    } catch (const Error& e) {
        fail(q.dir.string(), " with --ctx ", ctx, ": ", e.what());
    }
}

}  // namespace flashport::doctor
