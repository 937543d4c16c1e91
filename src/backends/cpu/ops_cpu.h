// CPU kernels of the ops in flashport/ops.h, plus the row helpers they share. The public ops
// (src/ops/*.cpp) have already validated every view, so these functions only compute.
//
// Every op works on rows: the innermost dimension is contiguous (checked by the op), the outer
// dimensions are walked by index. Rows are converted to fp32 on the way in and rounded to the
// output dtype on the way out.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "flashport/dtype.h"
#include "flashport/ops.h"
#include "flashport/tensor.h"

namespace flashport::cpu {

// Walks the rows of a view: everything but its last `inner` dimensions is flattened into a row index.
class Rows {
public:
    Rows(const TensorView& t, int inner = 1) : t_(t), outer_(t.ndim - inner) {
        count_ = 1;
        for (int d = 0; d < outer_; ++d) count_ *= t.shape[size_t(d)];
    }
    int64_t count() const { return count_; }
    // The first element of row r, as bytes.
    char* operator()(int64_t r) const {
        int64_t off = 0;
        for (int d = outer_ - 1; d >= 0; --d) {
            const int64_t n = t_.shape[size_t(d)];
            off += (r % n) * t_.stride[size_t(d)];
            r /= n;
        }
        return static_cast<char*>(t_.data) + off * int64_t(dtype_size(t_.dtype));
    }

private:
    TensorView t_;
    int outer_;
    int64_t count_ = 1;
};

// dst[i] = float(src[i]). The dtype switch is outside the loops so each loop vectorises.
inline void load_row(float* dst, const void* src, DType dtype, int64_t n) {
    switch (dtype) {
        case DType::F32: std::memcpy(dst, src, size_t(n) * sizeof(float)); return;
        case DType::BF16: {
            const uint16_t* s = static_cast<const uint16_t*>(src);
            for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(s[i]);
            return;
        }
        case DType::F16: {
            const uint16_t* s = static_cast<const uint16_t*>(src);
            for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_float(s[i]);
            return;
        }
    }
}

// dst[i] = src[i] rounded to dtype (round to nearest even).
inline void store_row(void* dst, DType dtype, const float* src, int64_t n) {
    switch (dtype) {
        case DType::F32: std::memcpy(dst, src, size_t(n) * sizeof(float)); return;
        case DType::BF16: {
            uint16_t* d = static_cast<uint16_t*>(dst);
            for (int64_t i = 0; i < n; ++i) d[i] = float_to_bf16(src[i]);
            return;
        }
        case DType::F16: {
            uint16_t* d = static_cast<uint16_t*>(dst);
            for (int64_t i = 0; i < n; ++i) d[i] = float_to_fp16(src[i]);
            return;
        }
    }
}

// x[i] = round_to(dtype, x[i]): where transformers materialises an intermediate in the model dtype.
inline void round_row(float* x, DType dtype, int64_t n) {
    if (dtype == DType::F32) return;
    for (int64_t i = 0; i < n; ++i) x[i] = round_to(dtype, x[i]);
}

// Fewer rows than this run on one thread: an OpenMP fork costs more than the work (decode's rows).
constexpr int64_t PARALLEL_MIN_ELEMENTS = 1 << 15;

void rms_norm(const TensorView& out, const TensorView& x, const TensorView& weight, float eps);
// x, out: [..., n_heads, head_dim] (3 or 4 dims); positions has one entry per [...] index, row-major.
void rope(const TensorView& out, const TensorView& x, const IndexView& positions, double theta);
void swiglu(const TensorView& out, const TensorView& gate, const TensorView& up);
void add(const TensorView& out, const TensorView& a, const TensorView& b);
void embedding(const TensorView& out, const TensorView& table, const IndexView& ids);
void argmax(int32_t* ids, const TensorView& x);

// `impl` is resolved (never AUTO). The name of the kernel that serves it, e.g. "cpu.matmul.gemv.avx512";
// the BLAS route is "cpu.matmul.bf16.avx512bf16" where matmul_uses_bf16 holds, else "cpu.matmul.blas".
std::string matmul_kernel_name(MatmulImpl impl, const TensorView& x, const TensorView& weight);
// Whether the BLAS route of this x and weight runs the AVX512-BF16 GEMM (kernels/gemm_bf16.h): both
// bf16, a CPU with avx512_bf16, the avx512 tables in use (FLASHPORT_CPU_ISA), and FLASHPORT_CPU_GEMM
// not set to fp32 (which keeps the fp32 OpenBLAS path; "bf16" or unset picks the bf16 GEMM).
bool matmul_uses_bf16(const TensorView& x, const TensorView& weight);
void matmul(const TensorView& out, const TensorView& x, const TensorView& weight, const TensorView* bias,
            MatmulImpl impl);

}  // namespace flashport::cpu
