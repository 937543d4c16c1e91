// libFuzzer target: generation_config.json through parse_generation_config.
#include <cstddef>
#include <cstdint>

#include "engine/model_config.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    fuzz::refuse_with_error_only(
        [&] { (void)flashport::engine::parse_generation_config(fuzz::as_text(data, size), "fuzz"); });
    return 0;
}
