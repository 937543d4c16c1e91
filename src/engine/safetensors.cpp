// One safetensors file: the read-only mapping, its validated header, and views of its tensors.
#include "safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "flashport/checked.h"
#include "flashport/error.h"
#include "flashport/memory.h"
#include "safetensors_header.h"

namespace flashport::engine {

namespace {

struct DTypeRow {
    StDType dtype;
    const char* name;
    unsigned bits;
};

constexpr DTypeRow DTYPES[] = {
    {StDType::BOOL, "BOOL", 8},
    {StDType::U8, "U8", 8},
    {StDType::I8, "I8", 8},
    {StDType::F8_E5M2, "F8_E5M2", 8},
    {StDType::F8_E4M3, "F8_E4M3", 8},
    {StDType::F8_E8M0, "F8_E8M0", 8},
    {StDType::F8_E4M3FNUZ, "F8_E4M3FNUZ", 8},
    {StDType::F8_E5M2FNUZ, "F8_E5M2FNUZ", 8},
    {StDType::F4, "F4", 4},
    {StDType::F6_E2M3, "F6_E2M3", 6},
    {StDType::F6_E3M2, "F6_E3M2", 6},
    {StDType::I16, "I16", 16},
    {StDType::U16, "U16", 16},
    {StDType::F16, "F16", 16},
    {StDType::BF16, "BF16", 16},
    {StDType::I32, "I32", 32},
    {StDType::U32, "U32", 32},
    {StDType::F32, "F32", 32},
    {StDType::F64, "F64", 64},
    {StDType::I64, "I64", 64},
    {StDType::U64, "U64", 64},
    {StDType::C64, "C64", 64},
};

const DTypeRow& row(StDType dtype) {
    for (const DTypeRow& r : DTYPES)
        if (r.dtype == dtype) return r;
    fail("internal: safetensors dtype ", int(dtype), " has no table row");
}

// A read-only private mapping of a whole file, unmapped on destruction. The mapping outlives the
// descriptor, so a folder with hundreds of shards holds no open files.
class Mapping {
public:
    explicit Mapping(const std::filesystem::path& path) {
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        FP_CHECK(fd >= 0, path.string(), ": cannot open: ", std::strerror(errno));
        struct stat st {};
        if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            ::close(fd);
            fail(path.string(), ": not a regular file");
        }
        size_ = size_t(st.st_size);
        if (size_ > 0) {  // mmap of length 0 fails; an empty file is reported by the header check
            void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
            const int err = errno;
            ::close(fd);
            FP_CHECK(p != MAP_FAILED, path.string(), ": mmap of ", size_, " bytes failed: ", std::strerror(err));
            data_ = static_cast<const std::byte*>(p);
        } else {
            ::close(fd);
        }
    }
    ~Mapping() {
        if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
    }
    Mapping(const Mapping&) = delete;
    Mapping& operator=(const Mapping&) = delete;

    std::span<const std::byte> bytes() const { return {data_, size_}; }

private:
    const std::byte* data_ = nullptr;
    size_t size_ = 0;
};

}  // namespace

const char* st_dtype_name(StDType dtype) {
    return row(dtype).name;
}
unsigned st_dtype_bits(StDType dtype) {
    return row(dtype).bits;
}

std::optional<StDType> parse_st_dtype(std::string_view name) {
    for (const DTypeRow& r : DTYPES)
        if (name == r.name) return r.dtype;
    return std::nullopt;
}

std::optional<DType> engine_dtype(StDType dtype) {
    switch (dtype) {
        case StDType::F32:
            return DType::F32;
        case StDType::F16:
            return DType::F16;
        case StDType::BF16:
            return DType::BF16;
        default:
            return std::nullopt;
    }
}

std::string TensorInfo::shape_str() const {
    std::ostringstream os;
    os << "[";
    for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
    os << "]";
    return os.str();
}

struct SafetensorsFile::Impl {
    std::filesystem::path path;
    Mapping mapping;
    ParsedHeader header;
    std::unordered_map<std::string_view, size_t> index;  // name -> position in header.tensors
    // Aligned copies of misaligned tensors, made on first view() and kept for the file's life.
    mutable std::mutex copies_mutex;
    mutable std::unordered_map<std::string, Buffer> copies;

    explicit Impl(const std::filesystem::path& p)
        : path(p), mapping(p), header(parse_safetensors_header(mapping.bytes(), p.string())) {
        for (size_t i = 0; i < header.tensors.size(); ++i) index.emplace(header.tensors[i].name, i);
    }

    const std::byte* data_of(const TensorInfo& t) const {
        return mapping.bytes().data() + 8 + header.header_len + t.begin;
    }
    const TensorInfo& require(std::string_view name) const {
        const auto it = index.find(name);
        FP_CHECK(it != index.end(), "tensor '", name, "' not found in ", path.string());
        return header.tensors[it->second];
    }
};

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : impl_(std::make_unique<Impl>(path)) {}
SafetensorsFile::~SafetensorsFile() = default;
SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;

const std::filesystem::path& SafetensorsFile::path() const {
    return impl_->path;
}
const std::vector<TensorInfo>& SafetensorsFile::tensors() const {
    return impl_->header.tensors;
}
const std::map<std::string, std::string>& SafetensorsFile::metadata() const {
    return impl_->header.metadata;
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
    const auto it = impl_->index.find(name);
    return it == impl_->index.end() ? nullptr : &impl_->header.tensors[it->second];
}

std::span<const std::byte> SafetensorsFile::bytes(std::string_view name) const {
    const TensorInfo& t = impl_->require(name);
    return {impl_->data_of(t), size_t(t.nbytes())};
}

TensorView SafetensorsFile::view(std::string_view name) const {
    const TensorInfo& t = impl_->require(name);
    const auto dtype = engine_dtype(t.dtype);
    FP_CHECK(dtype, "dtype ", st_dtype_name(t.dtype), " not supported for tensor '", t.name, "' in file ",
             impl_->path.string(), ": the engine loads F32, F16 and BF16 tensors");
    FP_CHECK(t.shape.size() <= size_t(MAX_DIMS), "tensor '", t.name, "' in file ", impl_->path.string(), " has ",
             t.shape.size(), " dimensions ", t.shape_str(), "; a tensor view has at most ", MAX_DIMS);

    const std::byte* data = impl_->data_of(t);
    const size_t esize = dtype_size(*dtype);
    // The format puts no alignment on offsets (bf16 at an odd offset is legal), and the data section
    // starts at 8 + N for any N. Kernels load whole elements, so misaligned data gets an aligned copy.
    if (t.nbytes() > 0 && reinterpret_cast<uintptr_t>(data) % esize != 0) {
        std::lock_guard<std::mutex> lock(impl_->copies_mutex);
        auto it = impl_->copies.find(t.name);
        if (it == impl_->copies.end()) {
            Buffer copy(size_t(t.nbytes()));
            std::memcpy(copy.data(), data, size_t(t.nbytes()));
            it = impl_->copies.emplace(t.name, std::move(copy)).first;
        }
        data = static_cast<const std::byte*>(it->second.data());
    }

    TensorView v;
    v.data = const_cast<std::byte*>(data);  // read-only: the mapping is PROT_READ
    v.dtype = *dtype;
    v.device = Device::cpu();
    v.ndim = int(t.shape.size());
    int64_t stride = 1;
    for (int d = v.ndim - 1; d >= 0; --d) {
        v.shape[size_t(d)] = t.shape[size_t(d)];
        v.stride[size_t(d)] = stride;
        // numel fits in int64, but with a zero dimension the other dimensions' product need not.
        stride = checked_mul(stride, t.shape[size_t(d)], "tensor '", t.name, "' in file ", impl_->path.string(),
                             ": the strides of shape ", t.shape_str());
    }
    return v;
}

void SafetensorsFile::release(std::string_view name) const {
    const std::span<const std::byte> b = bytes(name);
    const auto page = uintptr_t(::sysconf(_SC_PAGESIZE));
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(b.data()) + page - 1) / page * page;
    const uintptr_t end = (reinterpret_cast<uintptr_t>(b.data()) + b.size()) / page * page;
    // A private read-only file mapping: dropped pages are read from the file again if touched, so
    // a failure (which leaves them resident) needs no handling.
    if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

size_t SafetensorsFile::aligned_copies() const {
    std::lock_guard<std::mutex> lock(impl_->copies_mutex);
    return impl_->copies.size();
}

}  // namespace flashport::engine
