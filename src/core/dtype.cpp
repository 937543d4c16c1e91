#include "flashport/dtype.h"

#include <algorithm>

#include "flashport/error.h"

namespace flashport {

size_t dtype_size(DType dtype) { return dtype == DType::F32 ? 4 : 2; }

const char* dtype_name(DType dtype) {
    switch (dtype) {
        case DType::F32: return "fp32";
        case DType::F16: return "fp16";
        case DType::BF16: return "bf16";
    }
    return "?";
}

DType parse_dtype(const std::string& name) {
    std::string s = name;
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    if (s == "fp32" || s == "f32" || s == "float32" || s == "float") return DType::F32;
    if (s == "fp16" || s == "f16" || s == "float16" || s == "half") return DType::F16;
    if (s == "bf16" || s == "bfloat16") return DType::BF16;
    fail("unknown dtype '", name, "': expected fp32, fp16 or bf16");
}

}  // namespace flashport
