// Parsing and validating a safetensors header, separate from file mapping so that it is a pure
// function of bytes (tests and the fuzz target call it on buffers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "safetensors.h"

namespace flashport::engine {

// The spec's limit (safetensors' MAX_HEADER_SIZE): larger headers are refused before parsing.
constexpr uint64_t MAX_HEADER_BYTES = 100'000'000;

struct ParsedHeader {
    uint64_t header_len = 0;                      // N: the data section starts at 8 + N
    std::vector<TensorInfo> tensors;              // sorted by data offset
    std::map<std::string, std::string> metadata;  // __metadata__, empty when absent
};

// `file` is the whole file. Throws Error naming `source` (and the tensor, where one is at fault).
ParsedHeader parse_safetensors_header(std::span<const std::byte> file, std::string_view source);

}  // namespace flashport::engine
