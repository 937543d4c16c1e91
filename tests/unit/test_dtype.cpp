// fp16 / bf16 conversions: round to nearest even, Inf and NaN kept, subnormals exact. Checked against
// independent references (exact rounding in double, and the F16C instruction where the CPU has it),
// exhaustively where the space is small (all 2^16 half patterns) and on every rounding-relevant bit
// pattern where it is not (float inputs).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "flashport/dtype.h"
#include "flashport/error.h"

namespace flashport {
namespace {

// The exact IEEE round-to-nearest-even of a float into a binary format with `precision` significand
// bits (hidden bit included), smallest normal exponent `min_exp` and overflow threshold 2^(max_exp+1),
// computed in double: x / ulp(x) is exact in double (x has 24 bits), nearbyint rounds it to nearest
// even, and the product back is exact. Shares no code or bit tricks with flashport's conversions.
double round_exact(float xf, int precision, int min_exp, int max_exp) {
    const double x = xf;
    if (std::isnan(x) || std::isinf(x) || x == 0.0) return x;
    int e;
    std::frexp(x, &e);  // x = f · 2^e, f in [0.5, 1): the leading bit has weight 2^(e-1)
    const int exp = std::max(e - 1, min_exp);
    const double ulp = std::ldexp(1.0, exp - precision + 1);
    const double r = std::nearbyint(x / ulp) * ulp;
    if (std::abs(r) >= std::ldexp(1.0, max_exp + 1)) return std::copysign(INFINITY, x);
    return r == 0.0 ? std::copysign(0.0, x) : r;
}
double fp16_exact(float x) { return round_exact(x, 11, -14, 15); }
double bf16_exact(float x) { return round_exact(x, 8, -126, 127); }

// fp16 bits -> value, straight from the definition.
double fp16_value(uint16_t h) {
    const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    double v;
    if (exp == 0x1f) v = mant ? NAN : INFINITY;
    else if (exp == 0) v = std::ldexp(double(mant), -24);
    else v = std::ldexp(double(1024 + mant), exp - 25);
    return sign ? -v : v;
}

bool same_bits(float a, float b) { return float_bits(a) == float_bits(b); }

// Every float pattern whose low bits sit where rounding to a 16-bit format decides something: exact,
// just above/below a tie, on a tie, for both even and odd kept mantissas, over every exponent, sign
// and top mantissa pattern; plus a pseudo-random sweep of all the rest.
std::vector<float> rounding_probe_floats(int dropped_bits) {
    std::vector<float> xs;
    const uint32_t half = 1u << (dropped_bits - 1), full = 1u << dropped_bits;
    const uint32_t lows[] = {0, 1, half - 1, half, half + 1, full - 1, half / 2, half + half / 2};
    for (uint32_t sign = 0; sign < 2; ++sign)
        for (uint32_t exp = 0; exp < 256; ++exp)
            for (uint32_t top = 0; top < (1u << (23 - dropped_bits)); ++top)
                for (uint32_t low : lows) xs.push_back(bits_float(sign << 31 | exp << 23 | top << dropped_bits | low));
    uint64_t s = 0x1234567;
    for (int n = 0; n < (1 << 22); ++n) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        xs.push_back(bits_float(uint32_t(s >> 32)));
    }
    return xs;
}

TEST(DType, SizesNamesAndParsing) {
    EXPECT_EQ(dtype_size(DType::F32), 4u);
    EXPECT_EQ(dtype_size(DType::F16), 2u);
    EXPECT_EQ(dtype_size(DType::BF16), 2u);
    for (DType t : {DType::F32, DType::F16, DType::BF16}) EXPECT_EQ(parse_dtype(dtype_name(t)), t) << dtype_name(t);
    EXPECT_EQ(parse_dtype("float16"), DType::F16);
    EXPECT_EQ(parse_dtype("HALF"), DType::F16) << "names are case-insensitive";
    EXPECT_EQ(parse_dtype("bfloat16"), DType::BF16);
    EXPECT_EQ(parse_dtype("f32"), DType::F32);
}

TEST(Fp16, DecodesEveryPatternExactly) {
    for (uint32_t h = 0; h < 65536; ++h) {
        const float got = fp16_to_float(uint16_t(h));
        const double want = fp16_value(uint16_t(h));
        if (std::isnan(want)) {
            ASSERT_TRUE(std::isnan(got)) << std::hex << h;
            ASSERT_EQ(std::signbit(got), bool(h & 0x8000)) << std::hex << h;
        } else {
            ASSERT_TRUE(same_bits(got, float(want))) << std::hex << "pattern 0x" << h << ": " << got << " vs " << want;
        }
    }
}

TEST(Fp16, EveryPatternRoundTrips) {
    for (uint32_t h = 0; h < 65536; ++h) {
        const uint16_t back = float_to_fp16(fp16_to_float(uint16_t(h)));
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) {  // NaN stays NaN (quieted), sign kept
            ASSERT_EQ(back & 0x7c00, 0x7c00) << std::hex << h;
            ASSERT_NE(back & 0x3ff, 0) << std::hex << h;
            ASSERT_EQ(back & 0x8000, h & 0x8000) << std::hex << h;
        } else {
            ASSERT_EQ(back, h) << std::hex << "pattern 0x" << h;
        }
    }
}

TEST(Fp16, TiesOverflowAndSubnormals) {
    auto rt = [](float x) { return fp16_to_float(float_to_fp16(x)); };
    const float ulp1 = std::ldexp(1.0f, -10);  // fp16 ulp at 1.0
    EXPECT_EQ(rt(1.0f + ulp1 / 2), 1.0f) << "tie rounds to the even neighbour (down)";
    EXPECT_EQ(rt(1.0f + 3 * ulp1 / 2), 1.0f + 2 * ulp1) << "tie rounds to the even neighbour (up)";
    EXPECT_EQ(rt(std::nextafter(1.0f + ulp1 / 2, 2.0f)), 1.0f + ulp1) << "just above a tie rounds up";
    EXPECT_EQ(rt(65504.0f), 65504.0f) << "the largest finite half";
    EXPECT_EQ(rt(65519.99f), 65504.0f) << "below the overflow threshold";
    EXPECT_EQ(float_to_fp16(65520.0f), 0x7c00) << "65520 is the tie to 2^16: overflows to +Inf";
    EXPECT_EQ(float_to_fp16(-65520.0f), 0xfc00);
    EXPECT_EQ(float_to_fp16(1e30f), 0x7c00);
    EXPECT_EQ(float_to_fp16(INFINITY), 0x7c00);
    EXPECT_EQ(float_to_fp16(-INFINITY), 0xfc00);
    const float tiny = std::ldexp(1.0f, -24);  // smallest subnormal half
    EXPECT_EQ(float_to_fp16(tiny), 0x0001);
    EXPECT_EQ(float_to_fp16(tiny / 2), 0x0000) << "half the smallest subnormal ties to zero (even)";
    EXPECT_EQ(float_to_fp16(std::nextafter(tiny / 2, 1.0f)), 0x0001);
    EXPECT_EQ(float_to_fp16(1.5f * tiny), 0x0002) << "tie between subnormals 1 and 2 goes to 2 (even)";
    EXPECT_EQ(float_to_fp16(std::ldexp(1023.5f, -24)), 0x0400) << "the largest subnormal rounds up into the normals";
    EXPECT_EQ(float_to_fp16(-0.0f), 0x8000) << "negative zero keeps its sign";
    EXPECT_EQ(float_to_fp16(-tiny / 4), 0x8000) << "underflow keeps the sign";
    EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(NAN))));
    EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(bits_float(0x7f800001u))))) << "a NaN with payload only in "
                                                                                        "the low bits stays NaN";
    EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(bits_float(0xffc00000u)))));
}

TEST(Fp16, EncodeMatchesExactRounding) {
    for (float x : rounding_probe_floats(13)) {
        const float got = fp16_to_float(float_to_fp16(x));
        const double want = fp16_exact(x);
        if (std::isnan(x)) {
            ASSERT_TRUE(std::isnan(got)) << std::hex << float_bits(x);
        } else {
            ASSERT_TRUE(same_bits(got, float(want)))
                << std::hex << "input 0x" << float_bits(x) << " (" << x << "): got " << got << ", want " << want;
        }
    }
}

#if defined(__x86_64__)
__attribute__((target("f16c"))) uint16_t f16c_encode(float x) {
    return uint16_t(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("f16c"))) float f16c_decode(uint16_t h) { return _cvtsh_ss(h); }
#endif

// The hardware conversion is the arbiter for the exact bits, NaN payloads included.
TEST(Fp16, MatchesF16CInstruction) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "this CPU has no F16C";
    for (float x : rounding_probe_floats(13))
        ASSERT_EQ(float_to_fp16(x), f16c_encode(x)) << std::hex << "input 0x" << float_bits(x) << " (" << x << ")";
    for (uint32_t h = 0; h < 65536; ++h) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff) && !(h & 0x200)) continue;  // F16C quiets signalling NaNs
        ASSERT_EQ(float_bits(fp16_to_float(uint16_t(h))), float_bits(f16c_decode(uint16_t(h)))) << std::hex << h;
    }
#else
    GTEST_SKIP() << "not an x86-64 build";
#endif
}

TEST(Bf16, EveryPatternRoundTrips) {
    for (uint32_t h = 0; h < 65536; ++h) {
        const float x = bf16_to_float(uint16_t(h));
        ASSERT_EQ(float_bits(x), h << 16) << "bf16 is the top half of a float";
        const uint16_t back = float_to_bf16(x);
        if ((h & 0x7f80) == 0x7f80 && (h & 0x7f)) {  // NaN
            ASSERT_TRUE(std::isnan(bf16_to_float(back))) << std::hex << h;
            ASSERT_EQ(back & 0x8000, h & 0x8000) << std::hex << h;
        } else {
            ASSERT_EQ(back, h) << std::hex << "pattern 0x" << h;
        }
    }
}

TEST(Bf16, EncodeMatchesExactRounding) {
    for (float x : rounding_probe_floats(16)) {
        const uint16_t got = float_to_bf16(x);
        if (std::isnan(x)) {
            ASSERT_TRUE(std::isnan(bf16_to_float(got))) << std::hex << "NaN 0x" << float_bits(x) << " became 0x" << got;
            ASSERT_EQ(got & 0x8000, (float_bits(x) >> 16) & 0x8000);
        } else {
            const double want = bf16_exact(x);
            ASSERT_TRUE(same_bits(bf16_to_float(got), float(want)))
                << std::hex << "input 0x" << float_bits(x) << " (" << x << "): got 0x" << got << ", want " << want;
        }
    }
}

TEST(Bf16, TiesOverflowAndSubnormals) {
    auto rt = [](float x) { return bf16_to_float(float_to_bf16(x)); };
    const float ulp1 = std::ldexp(1.0f, -7);
    EXPECT_EQ(rt(1.0f + ulp1 / 2), 1.0f) << "tie to even (down)";
    EXPECT_EQ(rt(1.0f + 3 * ulp1 / 2), 1.0f + 2 * ulp1) << "tie to even (up)";
    EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80) << "FLT_MAX is past bf16's max + half an ulp";
    EXPECT_EQ(float_to_bf16(bits_float(0x7f7f7fffu)), 0x7f7f) << "just below the overflow tie stays finite";
    EXPECT_EQ(float_to_bf16(bits_float(0x7f7f8000u)), 0x7f80) << "the overflow tie goes to Inf (even)";
    EXPECT_EQ(float_to_bf16(-INFINITY), 0xff80);
    EXPECT_EQ(float_to_bf16(bits_float(0x00018000u)), 0x0002) << "subnormal tie to even (up)";
    EXPECT_EQ(float_to_bf16(bits_float(0x00008000u)), 0x0000) << "subnormal tie to even (down to zero)";
    EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
    EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(bits_float(0x7f800001u)))))
        << "a NaN whose payload is only in the dropped bits must not become Inf";
    EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(bits_float(0xff80ffffu)))));
}

TEST(DType, LoadStoreAndRoundTo) {
    const float x = 1.0f + std::ldexp(1.0f, -9) + std::ldexp(1.0f, -20);
    EXPECT_EQ(round_to(DType::F32, x), x);
    EXPECT_EQ(round_to(DType::F16, x), fp16_to_float(float_to_fp16(x)));
    EXPECT_EQ(round_to(DType::BF16, x), bf16_to_float(float_to_bf16(x)));
    EXPECT_NE(round_to(DType::BF16, x), x);
    for (DType t : {DType::F32, DType::F16, DType::BF16}) {
        alignas(4) unsigned char buf[4] = {};
        store_from_float(buf, t, x);
        EXPECT_EQ(load_as_float(buf, t), round_to(t, x)) << dtype_name(t);
    }
}

TEST(DType, BadNameNamesTheChoices) {
    try {
        parse_dtype("fp8");
        FAIL() << "parse_dtype(\"fp8\") should throw";
    } catch (const Error& e) {
        EXPECT_THAT(e.what(), ::testing::HasSubstr("'fp8'"));
        EXPECT_THAT(e.what(), ::testing::HasSubstr("fp32, fp16 or bf16"));
    }
}

}  // namespace
}  // namespace flashport
