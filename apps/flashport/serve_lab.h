// The attention lab behind `flashport serve`'s page: POST /lab/attention runs `bench attention`'s
// sweep on the server's device with sizes bounded so one run takes seconds, not minutes.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace flashport::app {

// {"seq_lens": [256, 512], "head_dim": 64, "dtype": "fp32", "impls": ["naive", "flash"], "causal": false}
// → {"device", "shape", "sweep": [{impl, seq, median_ms, tokens_per_s, extra_mb, rel_err} or {impl, seq, error}]}.
// Throws server::ApiError (400) for a request outside the bounds.
nlohmann::json run_attention_lab(const nlohmann::json& request, const std::string& device);

}  // namespace flashport::app
