// Host tensors for the op tests: a row-major view whose rows may sit in a wider buffer (`pad` spare
// elements after each row), everything NaN-poisoned first, so a kernel that reads past a row poisons
// its result and one that writes past it is caught by padding_intact().
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "flashport/dtype.h"
#include "flashport/tensor.h"
#include "poison.h"
#include "rng.h"

namespace flashport::test {

struct HostTensor {
    std::vector<uint8_t> bytes;  // the whole buffer: rows, padding and 64 spare bytes, all poisoned
    TensorView view;
    int64_t pad = 0;

    HostTensor(DType dtype, std::vector<int64_t> shape, int64_t pad_ = 0) : pad(pad_) {
        view.dtype = dtype;
        view.ndim = int(shape.size());
        int64_t st = 1;
        for (int d = view.ndim - 1; d >= 0; --d) {
            view.shape[size_t(d)] = shape[size_t(d)];
            view.stride[size_t(d)] = st;
            st *= shape[size_t(d)] + (d == view.ndim - 1 ? pad : 0);
        }
        bytes.resize(size_t(std::max<int64_t>(st, 1)) * dtype_size(dtype) + 64);
        view.data = bytes.data();
        poison();
    }
    HostTensor(const HostTensor&) = delete;  // the view points into bytes

    int64_t numel() const { return view.numel(); }
    int64_t cols() const { return view.shape[size_t(view.ndim - 1)]; }
    // Flat index (row-major over the view's shape) -> element address.
    void* addr(int64_t flat) const {
        int64_t off = 0;
        for (int d = view.ndim - 1; d >= 0; --d) {
            off += (flat % view.shape[size_t(d)]) * view.stride[size_t(d)];
            flat /= view.shape[size_t(d)];
        }
        return static_cast<char*>(view.data) + off * int64_t(dtype_size(view.dtype));
    }
    double get(int64_t flat) const { return load_as_float(addr(flat), view.dtype); }
    void set(int64_t flat, double v) { store_from_float(addr(flat), view.dtype, float(v)); }

    void poison() { fill_poison(bytes.data(), bytes.size(), view.dtype); }
    void fill_normal(Rng& rng, double std = 1.0, double mean = 0.0) {
        for (int64_t i = 0; i < numel(); ++i) set(i, mean + std * rng.normal());
    }
    // True when every padding element still holds NaN (nothing wrote outside the view).
    bool padding_intact() const {
        if (pad == 0) return true;
        const size_t es = dtype_size(view.dtype);
        const int64_t rows = numel() / std::max<int64_t>(cols(), 1);
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t j = 0; j < pad; ++j) {
                const char* p = static_cast<const char*>(addr(r * cols())) + (cols() + j) * int64_t(es);
                if (!std::isnan(load_as_float(p, view.dtype))) return false;
            }
        return true;
    }
};

// Every element of t (row-major over its shape), as doubles.
inline std::vector<double> values(const HostTensor& t) {
    std::vector<double> v(size_t(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) v[size_t(i)] = t.get(i);
    return v;
}

}  // namespace flashport::test
