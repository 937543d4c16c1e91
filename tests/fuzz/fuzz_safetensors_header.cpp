// libFuzzer target: a whole safetensors file (8-byte header length, JSON header, data) through
// parse_safetensors_header. Every tensor of a header it accepts must lie inside the input.
#include <cstddef>
#include <cstdint>

#include "engine/safetensors_header.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    fuzz::refuse_with_error_only([&] {
        const auto h = flashport::engine::parse_safetensors_header({reinterpret_cast<const std::byte*>(data), size}, "fuzz");
        for (const auto& t : h.tensors) {
            fuzz::require(t.begin <= t.end, "a tensor's data range is reversed");
            fuzz::require(h.header_len <= size - 8 && t.end <= size - 8 - h.header_len,
                          "a tensor's data lies outside the file");
        }
    });
    return 0;
}
