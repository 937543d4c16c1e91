// Qwen2 / Qwen2.5 / Qwen3 model configuration from a Hugging Face folder.
//
// config.json is read the way transformers 5.x reads it (Qwen2Config / Qwen3Config): the names of
// released folders (rope_theta, rope_scaling, torch_dtype) and the names transformers 5 writes
// (rope_parameters, dtype) are both accepted, with the same defaults and precedence. Whatever the
// engine does not implement (another model_type, a rope_scaling type other than default, a sliding
// window that would take effect, a quantised checkpoint) is an Error naming the field, never a
// silently different model.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flashport/dtype.h"

namespace flashport::engine {

class SafetensorsSet;

enum class QwenArch : uint8_t { QWEN2, QWEN3 };
enum class LayerType : uint8_t { FULL_ATTENTION, SLIDING_ATTENTION };

struct QwenConfig {
    QwenArch arch = QwenArch::QWEN2;
    std::string model_type;  // "qwen2" or "qwen3"
    int64_t hidden_size = 0;
    int64_t intermediate_size = 0;
    int64_t num_hidden_layers = 0;
    int64_t num_attention_heads = 0;
    int64_t num_key_value_heads = 0;
    int64_t head_dim = 0;
    int64_t vocab_size = 0;
    int64_t max_position_embeddings = 0;
    double rms_norm_eps = 1e-6;
    double rope_theta = 10000.0;
    std::string rope_type = "default";  // the only one implemented
    bool tie_word_embeddings = false;
    bool qkv_bias = false;  // qwen2 always (its modeling hard-codes it); qwen3 when attention_bias
    bool o_bias = false;    // qwen3 when attention_bias (qwen2's o_proj never has one)
    bool qk_norm = false;   // qwen3: RMSNorm over head_dim on q and k, before RoPE
    std::string hidden_act = "silu";
    std::string dtype_name;      // dtype / torch_dtype as written ("bfloat16"), empty when absent
    std::optional<DType> dtype;  // the same, when it is F32, F16 or BF16

    // Sliding window, as transformers resolves it: sliding_window is kept only when
    // use_sliding_window is true, and layer_types says which layers would use it. Parsing fails if
    // it would change any result, so today every layer attends fully.
    bool use_sliding_window = false;
    std::optional<int64_t> sliding_window;
    int64_t max_window_layers = 0;
    std::vector<LayerType> layer_types;

    std::optional<int64_t> bos_token_id;
    std::optional<int64_t> pad_token_id;
    std::vector<int64_t> eos_token_ids;  // config.json's; generation_config.json's take precedence
    std::string source;                  // the file it came from, for messages

    int64_t q_dim() const { return num_attention_heads * head_dim; }
    int64_t kv_dim() const { return num_key_value_heads * head_dim; }
};

// `source` names the text in messages (normally the path of config.json).
QwenConfig parse_qwen_config(std::string_view json_text, std::string_view source);
// A model folder (reads DIR/config.json) or the path of a config.json.
QwenConfig load_qwen_config(const std::filesystem::path& dir_or_file);

// generation_config.json: EOS ids and sampling defaults. Fields the file does not give stay unset,
// so the caller's own defaults apply.
struct GenerationConfig {
    std::vector<int64_t> eos_token_ids;
    std::optional<int64_t> bos_token_id;
    std::optional<int64_t> pad_token_id;
    std::optional<bool> do_sample;
    std::optional<double> temperature;
    std::optional<double> top_p;
    std::optional<int64_t> top_k;
    std::optional<double> min_p;
    std::optional<double> repetition_penalty;
    std::optional<int64_t> max_new_tokens;
    std::string source;  // the file, or "" when the folder has none
};

GenerationConfig parse_generation_config(std::string_view json_text, std::string_view source);
// DIR/generation_config.json when it exists; the token ids it lacks come from `model` (config.json),
// and every id is checked against the vocabulary.
GenerationConfig load_generation_config(const std::filesystem::path& dir, const QwenConfig& model);

// A weight the config implies, with the shape it must have and why (for messages).
struct ExpectedTensor {
    std::string name;
    std::vector<int64_t> shape;
    std::string why;  // "num_key_value_heads 2 x head_dim 16, hidden_size 64"
};

// Every tensor a Qwen checkpoint with this config must hold, in load order. lm_head.weight is
// listed only when the embeddings are not tied.
std::vector<ExpectedTensor> expected_tensors(const QwenConfig& config);

// Checks that `weights` holds every expected tensor with its shape and a dtype the engine loads
// (F32/F16/BF16); throws an Error naming the first missing or mis-shaped tensor. Extra tensors
// (a tied checkpoint that still stores lm_head.weight, rotary inv_freq buffers) are allowed.
void check_weights(const QwenConfig& config, const SafetensorsSet& weights);

}  // namespace flashport::engine
