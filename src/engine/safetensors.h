// safetensors: memory-mapped, fully validated model weights.
//
// The format (huggingface/safetensors): an 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype", "shape", "data_offsets": [begin, end]}, ..., "__metadata__": {str: str}},
// then the data section. Everything is checked before any byte of data is touched, because a model
// folder is untrusted input: a bad file gets an Error that names the file and the tensor, never a
// read out of bounds. See safetensors_header.cpp for the list of checks.
//
// SafetensorsFile is one file; SafetensorsSet is a model folder (one file, or shards listed by
// model.safetensors.index.json). Lookups return TensorViews over the read-only mapping; a tensor
// whose data is not aligned to its element size (legal in the format: bf16 at an odd offset) is
// copied once into an aligned buffer from the tracked allocator, so kernels never see a misaligned
// pointer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "flashport/dtype.h"
#include "flashport/tensor.h"

namespace flashport::engine {

// Every dtype name the safetensors spec defines. Only F32, F16 and BF16 can be viewed as
// TensorViews; the others parse (so a file that holds, say, an I64 buffer still opens) and fail
// with a clear message when accessed as a tensor.
enum class StDType : uint8_t {
    BOOL,
    U8,
    I8,
    F8_E5M2,
    F8_E4M3,
    F8_E8M0,
    F8_E4M3FNUZ,
    F8_E5M2FNUZ,
    F4,
    F6_E2M3,
    F6_E3M2,
    I16,
    U16,
    F16,
    BF16,
    I32,
    U32,
    F32,
    F64,
    I64,
    U64,
    C64,
};

const char* st_dtype_name(StDType dtype);
std::optional<StDType> parse_st_dtype(std::string_view name);
// Bits per element: F4 is 4, F6_* are 6 (packed), the rest whole bytes.
unsigned st_dtype_bits(StDType dtype);
// The engine dtype, for the three it computes in.
std::optional<DType> engine_dtype(StDType dtype);

struct TensorInfo {
    std::string name;
    StDType dtype = StDType::F32;
    std::vector<int64_t> shape;
    int64_t numel = 1;
    uint64_t begin = 0;  // byte offsets into the data section, [begin, end)
    uint64_t end = 0;

    uint64_t nbytes() const { return end - begin; }
    std::string shape_str() const;  // "[2, 3]"
};

class SafetensorsFile {
public:
    // Maps and validates the file; throws Error naming it on any problem.
    explicit SafetensorsFile(const std::filesystem::path& path);
    ~SafetensorsFile();
    SafetensorsFile(SafetensorsFile&&) noexcept;
    SafetensorsFile& operator=(SafetensorsFile&&) noexcept;

    const std::filesystem::path& path() const;
    // In data-offset order.
    const std::vector<TensorInfo>& tensors() const;
    const std::map<std::string, std::string>& metadata() const;
    const TensorInfo* find(std::string_view name) const;  // nullptr if absent
    bool contains(std::string_view name) const { return find(name) != nullptr; }

    // The tensor as a CPU TensorView (F32/F16/BF16 only, at most MAX_DIMS dimensions). The view
    // stays valid as long as this object; its memory is read-only.
    TensorView view(std::string_view name) const;
    // The raw bytes of any tensor, whatever its dtype. May be unaligned.
    std::span<const std::byte> bytes(std::string_view name) const;
    // How many tensors view() had to copy because of alignment (for tests and load reports).
    size_t aligned_copies() const;
    // The caller keeps its own copy of the tensor: the mapping's whole pages inside it leave the
    // process's resident memory (madvise). Views stay valid; touching them reads the file again.
    void release(std::string_view name) const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// A model's weights: a single .safetensors file, or the shards of a sharded checkpoint.
class SafetensorsSet {
public:
    // `path` may be a .safetensors file, a model.safetensors.index.json, or a folder holding one
    // of model.safetensors.index.json / model.safetensors (the index wins, as in transformers).
    static SafetensorsSet open(const std::filesystem::path& path);

    const TensorInfo* find(std::string_view name) const;
    bool contains(std::string_view name) const { return find(name) != nullptr; }
    // Throws "tensor 'x' not found in <files searched>" when absent.
    const TensorInfo& info(std::string_view name) const;
    TensorView view(std::string_view name) const;
    std::span<const std::byte> bytes(std::string_view name) const;
    void release(std::string_view name) const;  // SafetensorsFile::release
    // Sorted tensor names.
    std::vector<std::string> names() const;
    size_t size() const { return where_.size(); }
    const std::vector<SafetensorsFile>& files() const { return files_; }
    // "model.safetensors" or "model.safetensors.index.json (3 shards: a, b, c)", for messages.
    const std::string& source() const { return source_; }

private:
    const SafetensorsFile& file_of(std::string_view name) const;

    std::vector<SafetensorsFile> files_;
    std::map<std::string, size_t, std::less<>> where_;  // tensor name -> index in files_
    std::string source_;
};

}  // namespace flashport::engine
