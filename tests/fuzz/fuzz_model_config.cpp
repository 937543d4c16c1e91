// libFuzzer target: config.json through parse_qwen_config, and the weight list a config it accepts
// implies (expected_tensors).
#include <cstddef>
#include <cstdint>

#include "engine/model_config.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    fuzz::refuse_with_error_only([&] {
        namespace fpe = flashport::engine;
        (void)fpe::expected_tensors(fpe::parse_qwen_config(fuzz::as_text(data, size), "fuzz"));
    });
    return 0;
}
