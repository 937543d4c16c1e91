// Elementwise ops on the CPU: SwiGLU and the residual add, row by row in fp32.
//   swiglu: out = round_out(round_g(silu(g)) · u), silu(g) = g / (1 + exp(-g))
//     The activation is rounded to gate's dtype before the product, as PyTorch materialises
//     act_fn(gate_proj(x)) in the model dtype. exp is libm's expf: silu is < 1% of a decode step.
//   add:    out = round_out(a + b)
#include <omp.h>

#include <cmath>

#include "backends/cpu/ops_cpu.h"
#include "flashport/memory.h"

namespace flashport::cpu {
namespace {

// Runs f(dst_row_fp32, a_row_fp32, b_row_fp32, n) over the rows of three same-shaped views and
// stores the result into out. The fp32 rows live in per-thread scratch.
template <typename F>
void binary_rows(const TensorView& out, const TensorView& a, const TensorView& b, F&& f) {
    const Rows a_rows(a), b_rows(b), out_rows(out);
    const int64_t rows = a_rows.count(), n = a.shape[size_t(a.ndim - 1)];
    if (rows == 0 || n == 0) return;
    const int threads = rows * n >= PARALLEL_MIN_ELEMENTS ? omp_get_max_threads() : 1;
    Buffer scratch(sizeof(float) * size_t(2 * n) * size_t(threads));
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        float* fa = scratch.as<float>() + size_t(2 * n) * size_t(omp_get_thread_num());
        float* fb = fa + n;
        load_row(fa, a_rows(r), a.dtype, n);
        load_row(fb, b_rows(r), b.dtype, n);
        f(fa, fb, n);
        store_row(out_rows(r), out.dtype, fa, n);
    }
}

}  // namespace

void swiglu(const TensorView& out, const TensorView& gate, const TensorView& up) {
    const DType gate_dtype = gate.dtype;
    binary_rows(out, gate, up, [gate_dtype](float* g, const float* u, int64_t n) {
        for (int64_t i = 0; i < n; ++i) g[i] = g[i] / (1.0f + std::exp(-g[i]));
        round_row(g, gate_dtype, n);
        for (int64_t i = 0; i < n; ++i) g[i] *= u[i];
    });
}

void add(const TensorView& out, const TensorView& a, const TensorView& b) {
    binary_rows(out, a, b, [](float* x, const float* y, int64_t n) {
        for (int64_t i = 0; i < n; ++i) x[i] += y[i];
    });
}

}  // namespace flashport::cpu
