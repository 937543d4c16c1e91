// libFuzzer target for the engine's parsers of untrusted model files (build: see CMakeLists.txt
// here). The first input byte picks the parser, the rest is its input:
//   0: a whole safetensors file (header and data), through parse_safetensors_header
//   1: a config.json, through parse_qwen_config (and expected_tensors when it parses)
//   2: a generation_config.json
// Each must succeed or throw flashport::Error; anything else (a crash, a sanitizer report, another
// exception type) is a finding. Seeds: tests/data/safetensors/broken, tests/data/models.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "engine/model_config.h"
#include "engine/safetensors_header.h"
#include "flashport/error.h"

namespace fpe = flashport::engine;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const auto* rest = reinterpret_cast<const std::byte*>(data + 1);
    const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
    try {
        switch (data[0] % 3) {
            case 0: {
                const fpe::ParsedHeader h = fpe::parse_safetensors_header({rest, size - 1}, "fuzz");
                // The validated ranges must lie inside the input.
                for (const auto& t : h.tensors)
                    if (8 + h.header_len + t.end > size - 1) __builtin_trap();
                break;
            }
            case 1:
                (void)fpe::expected_tensors(fpe::parse_qwen_config(text, "fuzz"));
                break;
            default:
                (void)fpe::parse_generation_config(text, "fuzz");
                break;
        }
    } catch (const flashport::Error&) {
    }
    return 0;
}
