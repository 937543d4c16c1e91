// Rotary position embedding on the CPU, half-split, with transformers' dtype behaviour (Qwen2 /
// Qwen3 modeling files, Qwen2RotaryEmbedding and apply_rotary_pos_emb):
//   inv_freq[i] = 1 / theta^(2i/d)          fp32: (2i)/d rounded to fp32, powf, fp32 reciprocal
//   angle       = inv_freq[i] · float(pos)  fp32 product (their matmul has an inner size of 1)
//   c, s        = round_x(cos(angle)), round_x(sin(angle))   computed in fp32, cast to x's dtype
//   out[i]      = round_x(round_x(x[i] · c) - round_x(x[i+d/2] · s))          first half
//   out[i+d/2]  = round_x(round_x(x[i+d/2] · c) + round_x(x[i] · s))          second half
// Every product of bf16 or fp16 values is rounded before the sum because PyTorch evaluates
// `q * cos + rotate_half(q) * sin` as three separate ops in the model dtype.
//
// Layout: x, out [tokens..., n_heads, head_dim] (3 or 4 dims, inner stride 1), one position per token.
#include <omp.h>

#include <cmath>

#include "backends/cpu/ops_cpu.h"
#include "flashport/memory.h"

namespace flashport::cpu {

void rope(const TensorView& out, const TensorView& x, const IndexView& positions, double theta) {
    const Rows x_tokens(x, 2), out_tokens(out, 2);
    const int64_t tokens = x_tokens.count();
    const int64_t n_heads = x.shape[size_t(x.ndim - 2)], head_dim = x.shape[size_t(x.ndim - 1)];
    const int64_t half = head_dim / 2;
    const int64_t xs = x.stride[size_t(x.ndim - 2)] * int64_t(dtype_size(x.dtype));
    const int64_t os = out.stride[size_t(out.ndim - 2)] * int64_t(dtype_size(out.dtype));
    if (tokens == 0 || n_heads == 0) return;

    const int threads = tokens * n_heads * head_dim >= PARALLEL_MIN_ELEMENTS ? omp_get_max_threads() : 1;
    // inv_freq, then per thread: cos, sin, and one head in fp32.
    const size_t per_thread = size_t(2 * half + head_dim);
    Buffer scratch(sizeof(float) * (size_t(half) + per_thread * size_t(threads)));
    float* inv_freq = scratch.as<float>();
    const float base = float(theta);
    for (int64_t i = 0; i < half; ++i)
        inv_freq[i] = 1.0f / std::pow(base, float(2 * i) / float(head_dim));

    const DType dt = x.dtype;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t t = 0; t < tokens; ++t) {
        float* c = scratch.as<float>() + size_t(half) + per_thread * size_t(omp_get_thread_num());
        float* s = c + half;
        float* h = s + half;
        const float pos = float(positions[t]);
        for (int64_t i = 0; i < half; ++i) {
            const float angle = inv_freq[i] * pos;
            c[i] = round_to(dt, std::cos(angle));
            s[i] = round_to(dt, std::sin(angle));
        }
        const char* xt = x_tokens(t);
        char* ot = out_tokens(t);
        for (int64_t hd = 0; hd < n_heads; ++hd) {
            load_row(h, xt + hd * xs, dt, head_dim);
            for (int64_t i = 0; i < half; ++i) {
                const float x1 = h[i], x2 = h[i + half];
                h[i] = round_to(dt, x1 * c[i]) - round_to(dt, x2 * s[i]);
                h[i + half] = round_to(dt, x2 * c[i]) + round_to(dt, x1 * s[i]);
            }
            store_row(ot + hd * os, out.dtype, h, head_dim);
        }
    }
}

}  // namespace flashport::cpu
