// The safetensors loader on valid files written by the test itself: values, dtypes, alignment,
// metadata, edge shapes; and the failures that need a file built on the spot.
#include <gtest/gtest.h>

#include <thread>

#include "engine/safetensors.h"
#include "engine/safetensors_header.h"
#include "engine_test_util.h"
#include "flashport/dtype.h"

namespace flashport::engine {
namespace {

using test::bytes_of;
using test::expect_error;
using test::make_safetensors;
using test::raw_file;
using test::StTensor;
using test::TempDir;

std::vector<uint16_t> to_bf16(const std::vector<float>& x) {
    std::vector<uint16_t> out;
    for (float v : x) out.push_back(float_to_bf16(v));
    return out;
}

TEST(Safetensors, ReadsF32F16Bf16ValuesAndShapes) {
    TempDir dir;
    const std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -0.5f};
    std::vector<uint16_t> h;
    for (float v : a) h.push_back(float_to_fp16(v));
    const auto path = dir.write("m.safetensors", make_safetensors({
                                                     {"a", "F32", {2, 3}, bytes_of(a)},
                                                     {"h", "F16", {6}, bytes_of(h)},
                                                     {"b", "BF16", {3, 2}, bytes_of(to_bf16(a))},
                                                 }));
    SafetensorsFile f(path);
    ASSERT_EQ(f.tensors().size(), 3u);
    EXPECT_EQ(f.tensors()[0].name, "a");  // in offset order

    const TensorView va = f.view("a");
    EXPECT_EQ(va.dtype, DType::F32);
    EXPECT_EQ(va.ndim, 2);
    EXPECT_EQ(va.shape[0], 2);
    EXPECT_EQ(va.shape[1], 3);
    EXPECT_EQ(va.stride[0], 3);
    EXPECT_TRUE(va.is_contiguous());
    EXPECT_EQ(load_as_float(va.at(1, 2), DType::F32), -0.5f);

    const TensorView vh = f.view("h");
    EXPECT_EQ(vh.dtype, DType::F16);
    for (int i = 0; i < 6; ++i) EXPECT_EQ(load_as_float(vh.at(i), DType::F16), a[size_t(i)]);

    const TensorView vb = f.view("b");
    EXPECT_EQ(vb.dtype, DType::BF16);
    EXPECT_EQ(load_as_float(vb.at(2, 1), DType::BF16), -0.5f);
    EXPECT_EQ(f.bytes("b").size(), 12u);
    EXPECT_EQ(f.aligned_copies(), 0u);  // the reference layout keeps everything aligned
}

TEST(Safetensors, MetadataScalarsEmptyTensorsAndOtherDtypes) {
    TempDir dir;
    const auto path =
        dir.write("m.safetensors", make_safetensors({{"scalar", "F32", {}, bytes_of(std::vector<float>{42.0f})},
                                                     {"empty", "BF16", {0, 4}, ""},
                                                     {"ids", "I64", {2}, bytes_of(std::vector<int64_t>{7, 9})},
                                                     {"mask", "BOOL", {3}, std::string("\1\0\1", 3)}},
                                                    {{"format", "pt"}, {"note", "made by a test"}}));
    SafetensorsFile f(path);
    EXPECT_EQ(f.metadata().at("format"), "pt");
    EXPECT_EQ(f.metadata().at("note"), "made by a test");

    const TensorView s = f.view("scalar");
    EXPECT_EQ(s.ndim, 0);
    EXPECT_EQ(s.numel(), 1);
    EXPECT_EQ(*static_cast<const float*>(s.data), 42.0f);

    const TensorView e = f.view("empty");
    EXPECT_EQ(e.numel(), 0);
    EXPECT_EQ(f.find("empty")->nbytes(), 0u);

    // Non-float dtypes parse and their bytes are reachable, but they are not engine tensors.
    EXPECT_EQ(f.find("ids")->dtype, StDType::I64);
    int64_t second;
    std::memcpy(&second, f.bytes("ids").data() + 8, 8);
    EXPECT_EQ(second, 9);
    expect_error([&] { f.view("ids"); }, {"dtype I64 not supported for tensor 'ids' in file", "m.safetensors"});
    expect_error([&] { f.view("mask"); }, {"dtype BOOL not supported for tensor 'mask'"});
}

TEST(Safetensors, Bf16AtOddOffsetIsCopiedToAlignedMemory) {
    TempDir dir;
    const std::vector<float> vals = {1.0f, -2.0f, 0.5f, 3.0f};
    // A one-byte tensor first puts the bf16 data at offset 1 of the data section, and the f32 after
    // it at offset 9; an even header length starts the data section at an even address, so both are
    // misaligned in memory.
    const std::string file = make_safetensors({{"flag", "U8", {1}, std::string("\x01", 1)},
                                               {"w", "BF16", {2, 2}, bytes_of(to_bf16(vals))},
                                               {"x", "F32", {1}, bytes_of(std::vector<float>{6.0f})}},
                                              {}, /*header_align=*/2);
    const auto path = dir.write("odd.safetensors", file);
    SafetensorsFile f(path);
    EXPECT_EQ(f.find("w")->begin, 1u);

    const TensorView w = f.view("w");
    EXPECT_EQ(reinterpret_cast<uintptr_t>(w.data) % 2, 0u);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(load_as_float(w.at(i / 2, i % 2), DType::BF16), vals[size_t(i)]);
    const TensorView x = f.view("x");
    EXPECT_EQ(reinterpret_cast<uintptr_t>(x.data) % 4, 0u);
    EXPECT_EQ(*static_cast<const float*>(x.data), 6.0f);

    const size_t copies = f.aligned_copies();
    EXPECT_GE(copies, 1u);
    EXPECT_EQ(f.view("w").data, w.data);  // the copy is made once and kept
    EXPECT_EQ(f.aligned_copies(), copies);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(f.bytes("w").data()) % 2, 1u);  // raw bytes stay in the mapping
}

TEST(Safetensors, ConcurrentViewsOfMisalignedTensorsAgree) {
    TempDir dir;
    const auto path = dir.write("odd.safetensors",
                                make_safetensors({{"flag", "U8", {1}, std::string("\x01", 1)},
                                                  {"w", "BF16", {64}, bytes_of(std::vector<uint16_t>(64, 0x3f80))}},
                                                 {}, 2));
    SafetensorsFile f(path);
    std::vector<const void*> seen(8);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < seen.size(); ++i) threads.emplace_back([&, i] { seen[i] = f.view("w").data; });
    for (auto& t : threads) t.join();
    for (const void* p : seen) EXPECT_EQ(p, seen[0]);
    EXPECT_EQ(f.aligned_copies(), 1u);
}

TEST(Safetensors, MissingTensorNamesTheTensorAndTheFile) {
    TempDir dir;
    const auto path =
        dir.write("m.safetensors", make_safetensors({{"a", "F32", {1}, bytes_of(std::vector<float>{1})}}));
    SafetensorsFile f(path);
    EXPECT_EQ(f.find("b"), nullptr);
    expect_error([&] { f.view("b"); }, {"tensor 'b' not found in", "m.safetensors"});
    expect_error([&] { f.bytes("b"); }, {"tensor 'b' not found"});
}

TEST(Safetensors, MoreThanFourDimensionsCannotBeViewed) {
    TempDir dir;
    const auto path = dir.write("m.safetensors",
                                make_safetensors({{"t", "F32", {1, 1, 1, 1, 2}, bytes_of(std::vector<float>{1, 2})}}));
    SafetensorsFile f(path);
    EXPECT_EQ(f.find("t")->shape.size(), 5u);
    expect_error([&] { f.view("t"); }, {"tensor 't'", "5 dimensions", "at most 4"});
}

TEST(Safetensors, ZeroDimensionWithHugeOthersIsValidButNotViewable) {
    // numel is 0, so the file is valid by the spec; the strides would overflow, so no view.
    TempDir dir;
    const std::string big = std::to_string(int64_t(1) << 40);
    const std::string header =
        "{\"t\":{\"dtype\":\"F32\",\"shape\":[0," + big + "," + big + "],\"data_offsets\":[0,0]}}";
    const auto path = dir.write("m.safetensors", raw_file(header));
    SafetensorsFile f(path);
    EXPECT_EQ(f.find("t")->numel, 0);
    expect_error([&] { f.view("t"); }, {"tensor 't'", "strides", "overflow"});
}

TEST(Safetensors, EmptyHeaderIsAValidFileWithNoTensors) {
    TempDir dir;
    SafetensorsFile f(dir.write("m.safetensors", raw_file("{}      ")));
    EXPECT_TRUE(f.tensors().empty());
    EXPECT_TRUE(f.metadata().empty());
}

TEST(Safetensors, UnknownMembersOfAnEntryAreIgnoredAsByTheReference) {
    TempDir dir;
    const std::string header = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"extra\":1}}";
    SafetensorsFile f(dir.write("m.safetensors", raw_file(header, test::bytes_of(std::vector<float>{2}))));
    EXPECT_EQ(*static_cast<const float*>(f.view("a").data), 2.0f);
}

TEST(Safetensors, DtypeTableRoundTripsAndKnowsSizes) {
    for (const char* name :
         {"BOOL", "U8",  "I8",   "F8_E5M2", "F8_E4M3", "F8_E8M0", "F4",  "F6_E2M3", "F6_E3M2", "I16",
          "U16",  "F16", "BF16", "I32",     "U32",     "F32",     "F64", "I64",     "U64",     "C64"}) {
        const auto d = parse_st_dtype(name);
        ASSERT_TRUE(d) << name;
        EXPECT_STREQ(st_dtype_name(*d), name);
    }
    EXPECT_FALSE(parse_st_dtype("float32"));
    EXPECT_EQ(st_dtype_bits(StDType::BF16), 16u);
    EXPECT_EQ(st_dtype_bits(StDType::F4), 4u);
    EXPECT_EQ(st_dtype_bits(StDType::C64), 64u);
    EXPECT_EQ(engine_dtype(StDType::BF16), DType::BF16);
    EXPECT_FALSE(engine_dtype(StDType::F64));
}

TEST(Safetensors, SubByteDtypesCountBits) {
    // Eight F4 values are four bytes; the header check computes numel x bits / 8.
    TempDir dir;
    const std::string header = "{\"q\":{\"dtype\":\"F4\",\"shape\":[8],\"data_offsets\":[0,4]}}";
    SafetensorsFile f(dir.write("m.safetensors", raw_file(header, std::string(4, '\0'))));
    EXPECT_EQ(f.find("q")->nbytes(), 4u);
    expect_error([&] { f.view("q"); }, {"dtype F4 not supported"});
}

TEST(SafetensorsHeader, HeaderLimitIsCheckedBeforeTheFileSize) {
    // A length just over the limit is refused as too large even when the file could hold it.
    const std::string file = raw_file("{}", std::string(16, ' '), int64_t(MAX_HEADER_BYTES) + 1);
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(file.data()), file.size());
    expect_error([&] { parse_safetensors_header(bytes, "buf"); }, {"buf: header length 100000001", "100,000,000"});
}

TEST(SafetensorsHeader, NotARegularFileOrMissing) {
    TempDir dir;
    expect_error([&] { SafetensorsFile f(dir.path()); }, {"not a regular file"});
    expect_error([&] { SafetensorsFile f(dir / "absent.safetensors"); }, {"absent.safetensors", "cannot open"});
}

}  // namespace
}  // namespace flashport::engine
