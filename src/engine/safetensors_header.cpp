// The checks, in the order they run (each failure is its own message):
//   1. the file holds the 8-byte length N; N <= 100,000,000 (the spec's limit); 8 + N <= file size
//   2. the header is valid JSON (UTF-8, no duplicate keys at any level) and a JSON object
//   3. __metadata__, if present, maps strings to strings
//   4. each tensor: an object with a known dtype, a shape of non-negative integers whose product
//      (and byte size) does not overflow, and data_offsets [begin, end] with begin <= end
//   5. end - begin == numel x element size, and end is inside the data section
//   6. sorted by offset, the tensors tile the data section exactly: no overlap, no gap, nothing
//      after the last one. The reference implementation (safetensors' Metadata::validate plus
//      MetadataIncompleteBuffer) requires exactly this, so a file with holes is refused there too.
#include "safetensors_header.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <tuple>

#include "flashport/checked.h"
#include "flashport/error.h"
#include "flashport/json_limits.h"
#include "json_strict.h"

namespace flashport::engine {
namespace {

using Json = nlohmann::json;

uint64_t read_le_u64(const std::byte* p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | uint64_t(std::to_integer<uint8_t>(p[i]));
    return v;
}

// A non-negative integer member of a tensor entry; `what` names it in messages.
uint64_t as_u64(const Json& j, std::string_view source, std::string_view tensor, std::string_view what) {
    if (j.is_number_unsigned()) return j.get<uint64_t>();
    if (j.is_number_integer()) fail(source, ": tensor '", tensor, "': ", what, " is negative (", json_excerpt(j), ")");
    // (Separate arguments rather than string +: GCC 12 raises a false -Wrestrict on the latter.)
    fail(source, ": tensor '", tensor, "': ", what, " must be a non-negative integer, got ", json_type_name(j), " ",
         json_excerpt(j));
}

TensorInfo parse_entry(const std::string& name, const Json& entry, uint64_t data_size, std::string_view source) {
    std::string where_text(source);
    where_text.append(": tensor '").append(excerpt(name)).append("'");
    const auto where = [&] { return where_text; };
    FP_CHECK(entry.is_object(), where(), ": expected an object with dtype, shape and data_offsets, got ",
             json_type_name(entry));
    // Unknown members are ignored, as the reference implementation does.
    for (const char* key : {"dtype", "shape", "data_offsets"})
        FP_CHECK(entry.contains(key), where(), ": missing \"", key, "\"");

    TensorInfo t;
    t.name = name;
    const Json& dtype = entry["dtype"];
    FP_CHECK(dtype.is_string(), where(), ": dtype must be a string, got ", json_type_name(dtype));
    const auto parsed = parse_st_dtype(dtype.get<std::string>());
    FP_CHECK(parsed, where(), ": unknown dtype \"", excerpt(dtype.get<std::string>()),
             "\" (the safetensors dtypes are BOOL, U8, I8, F8_*, F4, F6_*, I16, U16, F16, BF16, I32, U32, F32, "
             "F64, I64, U64, C64)");
    t.dtype = *parsed;

    const Json& shape = entry["shape"];
    FP_CHECK(shape.is_array(), where(), ": shape must be an array, got ", json_type_name(shape));
    uint64_t numel = 1;
    for (const Json& d : shape) {
        const uint64_t dim = as_u64(d, source, name, "a shape dimension");
        FP_CHECK(dim <= uint64_t(std::numeric_limits<int64_t>::max()), where(), ": shape dimension ", dim,
                 " is too large");
        numel = checked_mul(numel, dim, where(), ": the element count of shape ", json_excerpt(shape));
        t.shape.push_back(int64_t(dim));
    }
    FP_CHECK(numel <= uint64_t(std::numeric_limits<int64_t>::max()), where(), ": shape ", json_excerpt(shape),
             " has too many elements");
    t.numel = int64_t(numel);
    const uint64_t bits = checked_mul(numel, uint64_t(st_dtype_bits(t.dtype)), where(), ": the byte size of ",
                                      st_dtype_name(t.dtype), " ", json_excerpt(shape));
    FP_CHECK(bits % 8 == 0, where(), ": ", numel, " elements of ", st_dtype_name(t.dtype), " (", st_dtype_bits(t.dtype),
             " bits each) are not a whole number of bytes");
    const uint64_t nbytes = bits / 8;

    const Json& offsets = entry["data_offsets"];
    FP_CHECK(offsets.is_array() && offsets.size() == 2, where(), ": data_offsets must be [begin, end], got ",
             json_excerpt(offsets));
    t.begin = as_u64(offsets[0], source, name, "data_offsets[0]");
    t.end = as_u64(offsets[1], source, name, "data_offsets[1]");
    FP_CHECK(t.begin <= t.end, where(), ": data_offsets [", t.begin, ", ", t.end, "] end before they begin");
    FP_CHECK(t.end - t.begin == nbytes, where(), ": data_offsets [", t.begin, ", ", t.end, "] hold ", t.end - t.begin,
             " bytes, but ", st_dtype_name(t.dtype), " ", t.shape_str(), " needs ", nbytes);
    FP_CHECK(t.end <= data_size, where(), ": data_offsets [", t.begin, ", ", t.end,
             "] run past the end of the data section (", data_size, " bytes): the file is truncated or corrupt");
    return t;
}

void parse_metadata(const Json& meta, std::map<std::string, std::string>& out, std::string_view source) {
    if (meta.is_null()) return;
    FP_CHECK(meta.is_object(), source, ": __metadata__ must be an object of strings, got ", json_type_name(meta));
    for (const auto& [k, v] : meta.items()) {
        FP_CHECK(v.is_string(), source, ": __metadata__[\"", excerpt(k), "\"] must be a string, got ",
                 json_type_name(v));
        out[k] = v.get<std::string>();
    }
}

// Check 6: the tensors, sorted by offset, cover [0, data_size) with no overlap and no gap.
void check_tiling(std::vector<TensorInfo>& tensors, uint64_t data_size, std::string_view source) {
    std::sort(tensors.begin(), tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
        return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
    });
    uint64_t pos = 0;
    const TensorInfo* prev = nullptr;
    for (const TensorInfo& t : tensors) {
        FP_CHECK(t.begin >= pos, source, ": tensor '", t.name, "' (bytes [", t.begin, ", ", t.end,
                 ")) overlaps tensor '", prev ? prev->name : "", "' (bytes [", prev ? prev->begin : 0, ", ", pos, "))");
        FP_CHECK(t.begin == pos, source, ": ", t.begin - pos, " unused bytes before tensor '", t.name, "' (at ", pos,
                 "); safetensors requires the tensors to cover the data section contiguously");
        pos = t.end;
        prev = &t;
    }
    FP_CHECK(prev || data_size == 0, source, ": the header lists no tensors, but ", data_size,
             " bytes of data follow it");
    FP_CHECK(pos == data_size, source, ": ", data_size - pos, " bytes after the last tensor '", prev->name,
             "'; safetensors requires the tensors to end exactly at the end of the file");
}

}  // namespace

ParsedHeader parse_safetensors_header(std::span<const std::byte> file, std::string_view source) {
    FP_CHECK(file.size() >= 8, source, ": the file is ", file.size(),
             " bytes; a safetensors file starts with an 8-byte header length");
    ParsedHeader h;
    h.header_len = read_le_u64(file.data());
    FP_CHECK(h.header_len <= MAX_HEADER_BYTES, source, ": header length ", h.header_len,
             " exceeds the safetensors limit of 100,000,000 bytes (corrupt, or not a safetensors file)");
    FP_CHECK(h.header_len <= file.size() - 8, source, ": header length ", h.header_len,
             " runs past the end of the file (", file.size(), " bytes): truncated, or not a safetensors file");
    const std::string_view text(reinterpret_cast<const char*>(file.data() + 8), size_t(h.header_len));
    const Json header = parse_json_strict(text, std::string(source) + ": header");
    FP_CHECK(header.is_object(), source, ": the header must be a JSON object, got ", json_type_name(header));

    const uint64_t data_size = file.size() - 8 - h.header_len;
    for (const auto& [key, value] : header.items()) {
        if (key == "__metadata__")
            parse_metadata(value, h.metadata, source);
        else
            h.tensors.push_back(parse_entry(key, value, data_size, source));
    }
    check_tiling(h.tensors, data_size, source);
    return h;
}

}  // namespace flashport::engine
