// Non-owning tensor views: a data pointer with dtype, device, shape and strides (in elements).
// Strides let one kernel read FlashAttention's [batch, len, heads, dim] and PyTorch's
// [batch, heads, len, dim] without a copy.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "flashport/dtype.h"

namespace flashport {

enum class DeviceType : uint8_t { CPU, GPU };

struct Device {
    DeviceType type = DeviceType::CPU;
    int index = 0;

    static Device cpu() { return {DeviceType::CPU, 0}; }
    static Device gpu(int index = 0) { return {DeviceType::GPU, index}; }
    bool is_cpu() const { return type == DeviceType::CPU; }
    bool operator==(const Device&) const = default;
    std::string name() const;  // "cpu", "gpu:0"
};

// "cpu", "gpu", "gpu:1"; "cuda" and "hip" are accepted as synonyms of "gpu".
Device parse_device(const std::string& name);

constexpr int MAX_DIMS = 4;

struct TensorView {
    void* data = nullptr;
    DType dtype = DType::F32;
    Device device;
    int ndim = 0;
    std::array<int64_t, MAX_DIMS> shape{};
    std::array<int64_t, MAX_DIMS> stride{};  // in elements, not bytes

    TensorView() = default;
    // A contiguous (row-major) view.
    TensorView(void* data, DType dtype, std::initializer_list<int64_t> shape, Device device = Device::cpu());

    // Both throw flashport::Error when the product overflows (a view filled in by hand; the
    // constructor refuses such shapes).
    int64_t numel() const;
    size_t nbytes() const;
    bool is_contiguous() const;
    int64_t dim(int i) const { return shape[size_t(i)]; }
    // Returns a view with dimensions a and b exchanged (no data moves).
    TensorView transposed(int a, int b) const;
    // Returns the view of positions [start, start + length) along dimension `dim` (no data moves): a
    // sequence of a packed batch, the q / k / v columns of a fused projection.
    TensorView narrowed(int dim, int64_t start, int64_t length) const;
    // Returns a 2-D view [rows, n_heads · head_dim] whose heads are packed (a fused projection's
    // columns) as [rows, n_heads, head_dim] (no data moves).
    TensorView split_heads(int64_t head_dim) const;
    std::string describe() const;  // "bf16[2, 7, 4, 64] strides [..] on cpu"

    // Address of element (i0, i1, i2, i3) for a view of up to four dimensions.
    void* at(int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) const {
        const int64_t off = i0 * stride[0] + i1 * stride[1] + i2 * stride[2] + i3 * stride[3];
        return static_cast<char*>(data) + off * int64_t(dtype_size(dtype));
    }
};

}  // namespace flashport
