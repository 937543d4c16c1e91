// config.json for model_type qwen2 and qwen3, read as transformers 5.x does: defaults are those of
// Qwen2Config / Qwen3Config, and the modelling code's hard-wired choices (qwen2's q/k/v bias, qwen3's
// q_norm/k_norm) are filled in here so the forward pass reads them from one place.
#include "model_config.h"

#include <algorithm>

#include "flashport/error.h"
#include "flashport/json_limits.h"
#include "json_fields.h"
#include "json_strict.h"

namespace flashport::engine {
namespace {

using Json = nlohmann::json;

// transformers refuses nothing here and would run a quantised checkpoint's packed weights through
// its quantiser; the engine has no such path, so it stops with the method's name.
void reject_quantised(const JsonFields& f) {
    for (const char* key : {"quantization_config", "compression_config"}) {
        const Json* q = f.find(key);
        if (!q) continue;
        std::string method = "unknown";
        if (q->is_object() && q->contains("quant_method") && (*q)["quant_method"].is_string())
            method = (*q)["quant_method"].get<std::string>();
        fail(f.where(), ": quantised checkpoints are not supported yet (quant_method ", excerpt(method),
             ", from field \"", key, "\")");
    }
}

// RoPE, following transformers' convert_rope_params_to_dict: a non-empty rope_scaling (the old name)
// wins over rope_parameters (the new one); rope_theta inside it wins over the top-level rope_theta;
// the default base is 10000; the type is rope_type, or the legacy "type", or "default".
void read_rope(const JsonFields& f, QwenConfig& c) {
    const Json* scaling = f.find("rope_scaling");
    const Json* params = f.find("rope_parameters");
    const char* field = "rope_parameters";
    if (scaling && !(scaling->is_object() && scaling->empty())) {
        params = scaling;
        field = "rope_scaling";
    }
    c.rope_theta = f.get_number("rope_theta").value_or(10000.0);
    if (params) {
        if (!params->is_object()) f.fail_field(field, "must be an object or null, got " + json_excerpt(*params));
        const JsonFields p(*params, f.where() + ": " + field);
        for (const auto& [key, value] : params->items())
            if (value.is_object())
                fail(p.where(), ": per-layer-type RoPE parameters (\"", excerpt(key), "\") are not supported for Qwen");
        if (const auto theta = p.get_number("rope_theta")) c.rope_theta = *theta;
        c.rope_type = p.get_string("rope_type").value_or(p.get_string("type").value_or("default"));
        if (c.rope_type != "default")
            fail(f.where(), ": ", field, " type '", excerpt(c.rope_type),
                 "' is not supported yet (only the default rotary embedding is implemented)");
    }
    if (!(c.rope_theta > 0)) f.fail_field("rope_theta", "must be positive");
}

std::optional<DType> dtype_from_name(const std::string& name) {
    if (name == "float32") return DType::F32;
    if (name == "float16") return DType::F16;
    if (name == "bfloat16") return DType::BF16;
    return std::nullopt;
}

// Sliding window, resolved as Qwen2Config/Qwen3Config.__post_init__ do, then refused if it would
// change a result: a windowed layer with window w differs from full attention only when a query
// sees more than w keys, which cannot happen within max_position_embeddings when w is at least that.
void read_sliding_window(const JsonFields& f, QwenConfig& c) {
    c.use_sliding_window = f.get_bool("use_sliding_window").value_or(false);
    c.max_window_layers = f.get_int("max_window_layers").value_or(28);
    if (c.max_window_layers < 0) f.fail_field("max_window_layers", "must not be negative");
    // The dataclass default 4096 applies when the key is absent; null means no window.
    std::optional<int64_t> window = f.has_key("sliding_window") ? f.get_int("sliding_window") : 4096;
    if (c.use_sliding_window && window) {
        if (*window < 1) f.fail_field("sliding_window", "must be a positive integer, got " + std::to_string(*window));
        c.sliding_window = window;
    }

    c.layer_types.clear();
    if (const Json* types = f.find("layer_types")) {
        if (!types->is_array() || int64_t(types->size()) != c.num_hidden_layers)
            f.fail_field("layer_types", "must be a list of " + std::to_string(c.num_hidden_layers) +
                                            " layer types (num_hidden_layers), got " + json_excerpt(*types));
        for (const Json& t : *types) {
            if (t == "full_attention")
                c.layer_types.push_back(LayerType::FULL_ATTENTION);
            else if (t == "sliding_attention")
                c.layer_types.push_back(LayerType::SLIDING_ATTENTION);
            else
                f.fail_field("layer_types", "holds " + json_excerpt(t) +
                                                "; Qwen layers are \"full_attention\" or \"sliding_attention\"");
        }
    } else {
        for (int64_t i = 0; i < c.num_hidden_layers; ++i)
            c.layer_types.push_back(c.sliding_window && i >= c.max_window_layers ? LayerType::SLIDING_ATTENTION
                                                                                 : LayerType::FULL_ATTENTION);
    }

    if (!c.sliding_window || *c.sliding_window >= c.max_position_embeddings) return;
    std::vector<int64_t> windowed;
    for (int64_t i = 0; i < c.num_hidden_layers; ++i)
        if (c.layer_types[size_t(i)] == LayerType::SLIDING_ATTENTION) windowed.push_back(i);
    if (windowed.empty()) return;
    fail(f.where(), ": sliding-window attention is not supported yet (use_sliding_window is true, sliding_window ",
         *c.sliding_window, " < max_position_embeddings ", c.max_position_embeddings, ", on ", windowed.size(), " of ",
         c.num_hidden_layers, " layers from layer ", windowed.front(), ")");
}

void check_token_id(const JsonFields& f, const char* field, int64_t id, int64_t vocab) {
    if (id >= vocab)
        f.fail_field(field, "holds token id " + std::to_string(id) + ", outside the vocabulary (vocab_size " +
                                std::to_string(vocab) + ")");
}

}  // namespace

QwenConfig parse_qwen_config(std::string_view json_text, std::string_view source) {
    const Json j = parse_json_strict(json_text, source);
    const JsonFields f(j, std::string(source));
    QwenConfig c;
    c.source = std::string(source);
    reject_quantised(f);

    const auto model_type = f.get_string("model_type");
    if (!model_type) f.fail_field("model_type", "is missing; supported: qwen2 (Qwen2, Qwen2.5), qwen3");
    c.model_type = *model_type;
    if (c.model_type == "qwen2")
        c.arch = QwenArch::QWEN2;
    else if (c.model_type == "qwen3")
        c.arch = QwenArch::QWEN3;
    else
        fail(f.where(), ": model_type '", excerpt(c.model_type),
             "' is not supported (supported: qwen2 for Qwen2 and Qwen2.5, ", "qwen3 for Qwen3)");

    // Sizes that define the weights are required: a default would only move the error to the
    // shape check, further from its cause.
    c.hidden_size = f.require_positive("hidden_size");
    c.intermediate_size = f.require_positive("intermediate_size");
    c.num_hidden_layers = f.require_positive("num_hidden_layers", 1 << 16);
    c.num_attention_heads = f.require_positive("num_attention_heads", 1 << 16);
    c.vocab_size = f.require_positive("vocab_size");
    c.num_key_value_heads = f.positive_or("num_key_value_heads", c.num_attention_heads, 1 << 16);
    if (c.num_key_value_heads > c.num_attention_heads || c.num_attention_heads % c.num_key_value_heads != 0)
        f.fail_field("num_key_value_heads", "(" + std::to_string(c.num_key_value_heads) +
                                                ") must divide num_attention_heads (" +
                                                std::to_string(c.num_attention_heads) + ")");

    if (c.arch == QwenArch::QWEN2) {
        // Qwen2Config has no head_dim; the modelling code uses one if the file sets it, else
        // hidden_size / num_attention_heads, which must then divide exactly.
        if (!f.has("head_dim") && c.hidden_size % c.num_attention_heads != 0)
            f.fail_field("hidden_size", "(" + std::to_string(c.hidden_size) + ") is not divisible by " +
                                            "num_attention_heads (" + std::to_string(c.num_attention_heads) +
                                            "), and no head_dim is given");
        c.head_dim = f.positive_or("head_dim", c.hidden_size / c.num_attention_heads, 1 << 16);
        c.qkv_bias = true;
    } else {
        c.head_dim = f.positive_or("head_dim", 128, 1 << 16);  // Qwen3Config's default, not hidden/heads
        c.qkv_bias = c.o_bias = f.get_bool("attention_bias").value_or(false);
        c.qk_norm = true;
    }
    if (c.head_dim % 2 != 0)
        f.fail_field("head_dim", "(" + std::to_string(c.head_dim) + ") must be even for the rotary embedding");

    c.max_position_embeddings = f.positive_or("max_position_embeddings", 32768);
    c.rms_norm_eps = f.get_number("rms_norm_eps").value_or(1e-6);
    if (!(c.rms_norm_eps > 0)) f.fail_field("rms_norm_eps", "must be positive");
    c.tie_word_embeddings = f.get_bool("tie_word_embeddings").value_or(false);
    c.hidden_act = f.get_string("hidden_act").value_or("silu");
    if (c.hidden_act != "silu" && c.hidden_act != "swish")  // transformers maps both to SiLU
        f.fail_field("hidden_act", "is '" + excerpt(c.hidden_act) + "'; only silu is supported");
    c.hidden_act = "silu";

    // transformers 5 writes "dtype"; released folders have "torch_dtype".
    c.dtype_name = f.get_string("dtype").value_or(f.get_string("torch_dtype").value_or(""));
    c.dtype = dtype_from_name(c.dtype_name);

    read_rope(f, c);
    read_sliding_window(f, c);

    if (const auto bos = f.get_ids("bos_token_id"); !bos.empty()) c.bos_token_id = bos.front();
    if (const auto pad = f.get_ids("pad_token_id"); !pad.empty()) c.pad_token_id = pad.front();
    c.eos_token_ids = f.get_ids("eos_token_id");
    if (c.bos_token_id) check_token_id(f, "bos_token_id", *c.bos_token_id, c.vocab_size);
    if (c.pad_token_id) check_token_id(f, "pad_token_id", *c.pad_token_id, c.vocab_size);
    for (int64_t id : c.eos_token_ids) check_token_id(f, "eos_token_id", id, c.vocab_size);
    return c;
}

QwenConfig load_qwen_config(const std::filesystem::path& dir_or_file) {
    const std::filesystem::path file =
        std::filesystem::is_directory(dir_or_file) ? dir_or_file / "config.json" : dir_or_file;
    FP_CHECK(std::filesystem::exists(file), file.string(), ": no such file (a model folder needs config.json)");
    return parse_qwen_config(read_text_file(file), file.string());
}

}  // namespace flashport::engine
