#include "flashport/tensor.h"

#include <sstream>
#include <utility>

#include "flashport/checked.h"
#include "flashport/error.h"

namespace flashport {
namespace {

// Message parts that format only when streamed, i.e. only when a check fails: numel() and the
// constructor run for every view of every op, so they must not build strings on the happy path.
struct ShapeText {
    std::initializer_list<int64_t> dims;
    friend std::ostream& operator<<(std::ostream& os, const ShapeText& s) {
        os << "[";
        const char* sep = "";
        for (int64_t d : s.dims) os << std::exchange(sep, ", ") << d;
        return os << "]";
    }
};

struct ViewText {
    const TensorView& view;
    friend std::ostream& operator<<(std::ostream& os, const ViewText& v) { return os << v.view.describe(); }
};

}  // namespace

std::string Device::name() const { return is_cpu() ? "cpu" : "gpu:" + std::to_string(index); }

Device parse_device(const std::string& name) {
    if (name == "cpu") return Device::cpu();
    const auto colon = name.find(':');
    const std::string kind = name.substr(0, colon);
    if (kind == "gpu" || kind == "cuda" || kind == "hip") {
        int index = 0;
        if (colon != std::string::npos) {
            const std::string idx = name.substr(colon + 1);
            FP_CHECK(!idx.empty() && idx.find_first_not_of("0123456789") == std::string::npos && idx.size() < 4,
                     "bad device '", name, "': the index after ':' must be a small non-negative integer");
            index = std::stoi(idx);
        }
        return Device::gpu(index);
    }
    fail("unknown device '", name, "': expected cpu, gpu, gpu:N (cuda and hip mean gpu)");
}

TensorView::TensorView(void* data_, DType dtype_, std::initializer_list<int64_t> shape_, Device device_)
    : data(data_), dtype(dtype_), device(device_), ndim(int(shape_.size())) {
    FP_CHECK(shape_.size() <= MAX_DIMS, "a tensor view has at most ", MAX_DIMS, " dimensions, got ", shape_.size());
    int i = 0;
    for (int64_t s : shape_) {
        FP_CHECK(s >= 0, "negative dimension ", s, " in a tensor shape");
        shape[size_t(i++)] = s;
    }
    // The last product is the element count, so a shape whose numel or byte size overflows is refused
    // here, before any allocation is sized from it.
    int64_t st = 1;
    for (int d = ndim - 1; d >= 0; --d) {
        stride[size_t(d)] = st;
        st = checked_mul(st, shape[size_t(d)], "a tensor of shape ", ShapeText{shape_});
    }
    (void)checked_mul(st, int64_t(dtype_size(dtype)), "the byte size of a ", dtype_name(dtype), " tensor of shape ",
                      ShapeText{shape_});
}

int64_t TensorView::numel() const {
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d) n = checked_mul(n, shape[size_t(d)], "the element count of ", ViewText{*this});
    return n;
}

size_t TensorView::nbytes() const {
    return size_t(checked_mul(numel(), int64_t(dtype_size(dtype)), "the byte size of ", ViewText{*this}));
}

bool TensorView::is_contiguous() const {
    int64_t st = 1;
    for (int d = ndim - 1; d >= 0; --d) {
        if (shape[size_t(d)] != 1 && stride[size_t(d)] != st) return false;
        st *= shape[size_t(d)];
    }
    return true;
}

TensorView TensorView::transposed(int a, int b) const {
    FP_CHECK(a >= 0 && b >= 0 && a < ndim && b < ndim, "transpose(", a, ", ", b, ") out of range for ", ndim,
             " dimensions");
    TensorView t = *this;
    std::swap(t.shape[size_t(a)], t.shape[size_t(b)]);
    std::swap(t.stride[size_t(a)], t.stride[size_t(b)]);
    return t;
}

TensorView TensorView::narrowed(int dim, int64_t start, int64_t length) const {
    FP_CHECK(dim >= 0 && dim < ndim && start >= 0 && length >= 0 && length <= shape[size_t(dim)] - start, "narrow(",
             dim, ", ", start, ", ", length, ") out of range for ", describe());
    TensorView t = *this;
    t.data = static_cast<char*>(data) + start * stride[size_t(dim)] * int64_t(dtype_size(dtype));
    t.shape[size_t(dim)] = length;
    return t;
}

TensorView TensorView::split_heads(int64_t head_dim) const {
    FP_CHECK(ndim == 2 && head_dim >= 1 && shape[1] % head_dim == 0 && (stride[1] == 1 || shape[1] <= 1),
             "split_heads(", head_dim, ") needs a 2-D view with packed rows of whole heads, got ", describe());
    TensorView t = *this;
    t.ndim = 3;
    t.shape = {shape[0], shape[1] / head_dim, head_dim, 0};
    t.stride = {stride[0], head_dim, 1, 0};
    return t;
}

std::string TensorView::describe() const {
    std::ostringstream os;
    os << dtype_name(dtype) << "[";
    for (int d = 0; d < ndim; ++d) os << (d ? ", " : "") << shape[size_t(d)];
    os << "] strides [";
    for (int d = 0; d < ndim; ++d) os << (d ? ", " : "") << stride[size_t(d)];
    os << "] on " << device.name();
    return os.str();
}

}  // namespace flashport
