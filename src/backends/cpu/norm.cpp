// RMSNorm on the CPU: one row at a time, in fp32, with transformers' casts (see flashport/ops.h):
//   var = mean(float(x)²)                 fp32 sum of squares, divided by dim
//   h   = round_x(float(x) · (1 / sqrt(var + eps)))
//   out = round_out(float(weight) · h)
// 1/sqrt rather than a fused rsqrt because PyTorch's CPU rsqrt is a division by a square root
// (two roundings); an approximate rsqrt would differ in bf16 outputs near rounding ties.
#include <omp.h>

#include <cmath>

#include "backends/cpu/ops_cpu.h"
#include "flashport/memory.h"

namespace flashport::cpu {

void rms_norm(const TensorView& out, const TensorView& x, const TensorView& weight, float eps) {
    const Rows x_rows(x), out_rows(out);
    const int64_t rows = x_rows.count(), dim = x.shape[size_t(x.ndim - 1)];
    if (rows == 0) return;
    const int threads = rows * dim >= PARALLEL_MIN_ELEMENTS ? omp_get_max_threads() : 1;
    // Per thread: the row in fp32, then the weight in fp32 (shared, converted once below).
    Buffer scratch(sizeof(float) * size_t(dim) * size_t(threads + 1));
    float* w = scratch.as<float>() + size_t(dim) * size_t(threads);
    load_row(w, weight.data, weight.dtype, dim);

#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        float* h = scratch.as<float>() + size_t(dim) * size_t(omp_get_thread_num());
        load_row(h, x_rows(r), x.dtype, dim);
        float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
        for (int64_t i = 0; i < dim; ++i) ss += h[i] * h[i];
        const float inv = 1.0f / std::sqrt(ss / float(dim) + eps);
        for (int64_t i = 0; i < dim; ++i) h[i] *= inv;
        round_row(h, x.dtype, dim);
        for (int64_t i = 0; i < dim; ++i) h[i] *= w[i];
        store_row(out_rows(r), out.dtype, h, dim);
    }
}

}  // namespace flashport::cpu
