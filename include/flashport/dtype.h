// Element types and their conversions. fp16 and bf16 are stored as raw 16-bit patterns; every
// conversion rounds to nearest even and keeps NaN and Inf, so CPU and GPU agree bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace flashport {

enum class DType : uint8_t { F32, F16, BF16 };

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);
// Accepts "fp32"/"f32"/"float32", "fp16"/"f16"/"float16"/"half", "bf16"/"bfloat16".
DType parse_dtype(const std::string& name);

// The index of the first NaN or +-Inf among `n` contiguous elements of `dtype` at `data` (host
// memory), or -1 when all are finite. Runs at memory bandwidth (parallel, vectorised): the engine
// scans its weights at load and its logits every step with it.
int64_t find_non_finite(const void* data, DType dtype, int64_t n);
// "NaN", "+inf" or "-inf", for messages about a value find_non_finite found.
inline const char* non_finite_name(float x) {
    if (x != x) return "NaN";
    return x > 0 ? "+inf" : "-inf";
}

inline uint32_t float_bits(float x) {
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    return u;
}
inline float bits_float(uint32_t u) {
    float x;
    std::memcpy(&x, &u, sizeof x);
    return x;
}

inline float bf16_to_float(uint16_t h) { return bits_float(uint32_t(h) << 16); }

inline uint16_t float_to_bf16(float x) {
    uint32_t u = float_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN, sign kept
    u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even; overflow carries into Inf correctly
    return uint16_t(u >> 16);
}

inline float fp16_to_float(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t mant = h & 0x3ffu;
    if (exp == 0x1fu) return bits_float(sign | 0x7f800000u | (mant << 13));  // Inf / NaN
    if (exp != 0) return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
    // Zero or subnormal: value = mant * 2^-24, exact in fp32.
    const float v = float(mant) * 5.9604644775390625e-8f;
    return sign ? -v : v;
}

inline uint16_t float_to_fp16(float x) {
    const uint32_t u = float_bits(x);
    const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN stays NaN
    if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65520: Inf
    if (a >= 0x38800000u) {                                 // normal fp16 range
        const uint32_t r = a + 0xfffu + ((a >> 13) & 1u) - (112u << 23);
        return uint16_t(sign | (r >> 13));
    }
    // Subnormal or zero: scale so the fp16 subnormal step (2^-24) becomes 1, then let the FPU round
    // to nearest even.
    const float scaled = bits_float(a) * 16777216.0f;
    return uint16_t(sign | uint16_t(__builtin_nearbyintf(scaled)));
}

inline float load_as_float(const void* p, DType dtype) {
    switch (dtype) {
        case DType::F32: return *static_cast<const float*>(p);
        case DType::F16: return fp16_to_float(*static_cast<const uint16_t*>(p));
        case DType::BF16: return bf16_to_float(*static_cast<const uint16_t*>(p));
    }
    return 0.0f;
}

inline void store_from_float(void* p, DType dtype, float x) {
    switch (dtype) {
        case DType::F32: *static_cast<float*>(p) = x; return;
        case DType::F16: *static_cast<uint16_t*>(p) = float_to_fp16(x); return;
        case DType::BF16: *static_cast<uint16_t*>(p) = float_to_bf16(x); return;
    }
}

// Rounds x to the nearest value representable in dtype (identity for F32).
inline float round_to(DType dtype, float x) {
    switch (dtype) {
        case DType::F32: return x;
        case DType::F16: return fp16_to_float(float_to_fp16(x));
        case DType::BF16: return bf16_to_float(float_to_bf16(x));
    }
    return x;
}

}  // namespace flashport
