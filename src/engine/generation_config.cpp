// generation_config.json: the EOS ids generation stops on, and the sampling defaults a model ships
// with. transformers lets generation_config.json's ids override config.json's; so does this.
#include <cmath>

#include "flashport/error.h"
#include "json_fields.h"
#include "json_strict.h"
#include "model_config.h"

namespace flashport::engine {
namespace {

// A value in [lo, hi] (or (lo, hi] when lo_open), else an error naming the field.
void check_range(const JsonFields& f, const char* key, const std::optional<double>& v, double lo, bool lo_open,
                 double hi) {
    if (!v) return;
    if ((lo_open ? *v > lo : *v >= lo) && *v <= hi) return;
    f.fail_field(key, "is " + std::to_string(*v) + ", outside " + (lo_open ? "(" : "[") + std::to_string(lo) + ", " +
                          (std::isinf(hi) ? std::string("inf)") : std::to_string(hi) + "]"));
}

}  // namespace

GenerationConfig parse_generation_config(std::string_view json_text, std::string_view source) {
    const nlohmann::json j = parse_json_strict(json_text, source);
    const JsonFields f(j, std::string(source));
    GenerationConfig g;
    g.source = std::string(source);
    g.eos_token_ids = f.get_ids("eos_token_id");
    if (const auto bos = f.get_ids("bos_token_id"); !bos.empty()) g.bos_token_id = bos.front();
    if (const auto pad = f.get_ids("pad_token_id"); !pad.empty()) g.pad_token_id = pad.front();
    g.do_sample = f.get_bool("do_sample");
    g.temperature = f.get_number("temperature");
    g.top_p = f.get_number("top_p");
    g.min_p = f.get_number("min_p");
    g.repetition_penalty = f.get_number("repetition_penalty");
    g.top_k = f.get_int("top_k");
    g.max_new_tokens = f.get_int("max_new_tokens");

    const double inf = INFINITY;
    check_range(f, "temperature", g.temperature, 0.0, false, inf);
    check_range(f, "top_p", g.top_p, 0.0, true, 1.0);
    check_range(f, "min_p", g.min_p, 0.0, false, 1.0);
    check_range(f, "repetition_penalty", g.repetition_penalty, 0.0, true, inf);
    if (g.top_k && *g.top_k < 0) f.fail_field("top_k", "must not be negative (0 disables it)");
    if (g.max_new_tokens && *g.max_new_tokens < 1) f.fail_field("max_new_tokens", "must be positive");
    return g;
}

GenerationConfig load_generation_config(const std::filesystem::path& dir, const QwenConfig& model) {
    const std::filesystem::path file = dir / "generation_config.json";
    GenerationConfig g;
    if (std::filesystem::exists(file)) g = parse_generation_config(read_text_file(file), file.string());
    if (g.eos_token_ids.empty()) g.eos_token_ids = model.eos_token_ids;
    if (!g.bos_token_id) g.bos_token_id = model.bos_token_id;
    if (!g.pad_token_id) g.pad_token_id = model.pad_token_id;

    const std::string where = g.source.empty() ? model.source : g.source;
    const auto check = [&](const char* field, int64_t id) {
        FP_CHECK(id < model.vocab_size, where, ": field \"", field, "\" holds token id ", id,
                 ", outside the vocabulary (vocab_size ", model.vocab_size, ")");
    };
    for (int64_t id : g.eos_token_ids) check("eos_token_id", id);
    if (g.bos_token_id) check("bos_token_id", *g.bos_token_id);
    if (g.pad_token_id) check("pad_token_id", *g.pad_token_id);
    return g;
}

}  // namespace flashport::engine
