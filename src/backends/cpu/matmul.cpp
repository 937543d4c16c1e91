// matmul on the CPU: out = x · weightᵀ (+ bias), fp32 accumulation, rounded once to out's dtype.
//
// Two kernels, because the two phases of inference are limited by different things:
// - GEMV (decode, 1-8 tokens): every weight is used once per token, so the time is the time to read
//   the weight. The kernel streams it in its own dtype (bf16: 2 bytes an element) and widens it in
//   registers; converting the matrix to fp32 first would read 2 and write 4 extra bytes an element.
//   Rows are split between threads; each thread handles its rows' epilogue while they are in cache.
// - BLAS (prefill, more tokens): 2·tokens FLOPs per weight element, compute-bound. With bf16 x and
//   weight on an AVX512-BF16 CPU, the bf16 GEMM (kernels/gemm_bf16.h) multiplies them as they are, at
//   twice the fp32 FMA rate and with no conversion. Otherwise the weight is converted to fp32 one tile
//   of rows at a time (so the copy stays in L2/L3 and never costs a whole fp32 matrix of memory) and
//   each tile goes through OpenBLAS sgemm.
//   Both run on OpenMP's threads, one tile per thread at a time, with OpenBLAS held to one thread
//   for the call: one pool for the whole forward pass. OpenBLAS's own threads next to OpenMP's took
//   the cores from each other (libgomp's workers spin after each region; prefill ran at 30-40% of
//   sgemm's rate, docs/perf.md "CPU engine").
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backends/cpu/blas.h"
#include "backends/cpu/kernels/gemm_bf16.h"
#include "backends/cpu/kernels/gemv_kernels.h"
#include "backends/cpu/kernels/tile_kernels.h"
#include "backends/cpu/ops_cpu.h"
#include "flashport/error.h"
#include "flashport/memory.h"

namespace flashport::cpu {

extern const GemvKernels gemv_kernels_generic;
#if defined(__x86_64__)
extern const GemvKernels gemv_kernels_avx2;
extern const GemvKernels gemv_kernels_avx512;
#endif

const GemvKernels* gemv_kernels_for(const char* isa) {
    const std::string name = isa;
    if (name == "generic") return &gemv_kernels_generic;
#if defined(__x86_64__)
    if (name == "avx2") return &gemv_kernels_avx2;
    if (name == "avx512") return &gemv_kernels_avx512;
#endif
    return nullptr;
}

namespace {

// The weight tile of the BLAS path holds about this many fp32 values (4 MiB: L2-to-L3 sized, and
// a fixed, small extra memory whatever the matrix).
constexpr int64_t BLAS_TILE_FLOATS = int64_t(1) << 20;
// GEMV work is split into about this many chunks per thread (see matmul_gemv).
constexpr int64_t GEMV_CHUNKS_PER_THREAD = 8;
// Narrower tiles make sgemm inefficient (its n-blocking is 4-16 wide, plus per-call overhead).
constexpr int64_t BLAS_MIN_TILE_ROWS = 64;
// Rows of a bf16 GEMM chunk: one packed panel of the kernel (64 rows, kernels/gemm_bf16_avx512.cpp),
// so no vector of it runs on zero rows; gate/up's 9728 rows make 152 chunks and down_proj's 896 make
// 14 to balance between threads.
constexpr int64_t BF16_CHUNK_ROWS = 64;

// Shares the ISA choice (and FLASHPORT_CPU_ISA) with the attention kernels.
const GemvKernels& gemv_kernels() {
    const GemvKernels* k = gemv_kernels_for(tile_kernels().isa);
    return k ? *k : gemv_kernels_generic;
}

// x as fp32 rows: the view itself when it already is one with a BLAS-usable row stride, else a copy.
const float* x_as_f32(const TensorView& x, Buffer& copy, int64_t& ldx) {
    const int64_t tokens = x.dim(0), in = x.dim(1);
    if (x.dtype == DType::F32 && x.stride[0] >= std::max<int64_t>(1, in)) {
        ldx = x.stride[0];
        return static_cast<const float*>(x.data);
    }
    ldx = std::max<int64_t>(1, in);
    copy = Buffer(sizeof(float) * size_t(tokens * ldx));
    for (int64_t t = 0; t < tokens; ++t) load_row(copy.as<float>() + t * ldx, x.at(t), x.dtype, in);
    return copy.as<float>();
}

// out[t, n0:n1] = round(c[t·ldc + (n - n0)] + bias[n]).
void epilogue(const TensorView& out, const TensorView* bias, const float* c, int64_t ldc, int64_t n0, int64_t n1,
              float* bias_f32, float* row) {
    const int64_t tokens = out.dim(0), n = n1 - n0;
    if (bias) load_row(bias_f32, bias->at(n0), bias->dtype, n);
    for (int64_t t = 0; t < tokens; ++t) {
        const float* ct = c + t * ldc;
        if (bias) {
            for (int64_t j = 0; j < n; ++j) row[j] = ct[j] + bias_f32[j];
            ct = row;
        }
        store_row(out.at(t, n0), out.dtype, ct, n);
    }
}

void matmul_gemv(const TensorView& out, const TensorView& x, const TensorView& weight, const TensorView* bias) {
    const int64_t tokens = x.dim(0), in = x.dim(1), n_out = weight.dim(0);
    const GemvKernels& kernels = gemv_kernels();
    Buffer x_copy;
    int64_t ldx = 0;
    const float* xf = x_as_f32(x, x_copy, ldx);
    const int threads = std::max<int64_t>(1, std::min<int64_t>(omp_get_max_threads(), n_out / 16));
    // y is [tokens, n_out] fp32; then per thread a bias row and an epilogue row.
    Buffer scratch(sizeof(float) * size_t(tokens * n_out + 2 * n_out));
    float* y = scratch.as<float>();
    float* bias_f32 = y + tokens * n_out;
    float* row = bias_f32 + n_out;
    const int64_t wsize = int64_t(dtype_size(weight.dtype));

    // Chunks of rows handed out dynamically: each is a long contiguous stream of W (>= 64 KB for
    // Qwen2.5-0.5B's shapes) and its epilogue runs while its rows of y are in cache. Dynamic rather
    // than one static range per thread because on a shared machine a descheduled thread would
    // otherwise hold up the whole call (measured: 8 ms instead of 0.5 ms with a compiler on one core).
    const int64_t chunk = std::max<int64_t>(16, (n_out / (threads * GEMV_CHUNKS_PER_THREAD) + 15) / 16 * 16);
    const int64_t n_chunks = (n_out + chunk - 1) / chunk;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (int64_t c = 0; c < n_chunks; ++c) {
        const int64_t n0 = c * chunk, n1 = std::min(n_out, n0 + chunk);
        const char* w0 = static_cast<const char*>(weight.data) + n0 * weight.stride[0] * wsize;
        for (int64_t t0 = 0; t0 < tokens; t0 += GEMV_MAX_TOKENS) {
            const int tb = int(std::min(GEMV_MAX_TOKENS, tokens - t0));
            kernels.gemv[int(weight.dtype)](xf + t0 * ldx, ldx, tb, w0, weight.stride[0], n1 - n0, in,
                                            y + t0 * n_out + n0, n_out);
        }
        epilogue(out, bias, y + n0, n_out, n0, n1, bias_f32 + n0, row + n0);
    }
}

// out = x · weightᵀ (+ bias) with bf16 x and weight (matmul_uses_bf16): chunks of rows handed out
// dynamically, each chunk's epilogue while its fp32 sums are in cache.
void matmul_bf16(const TensorView& out, const TensorView& x, const TensorView& weight, const TensorView* bias) {
    const int64_t tokens = x.dim(0), in = x.dim(1), n_out = weight.dim(0);
    Buffer scratch(sizeof(float) * size_t(tokens * n_out + 2 * n_out));  // y [tokens, n_out], bias, row
    float* y = scratch.as<float>();
    float* bias_f32 = y + tokens * n_out;
    float* row = bias_f32 + n_out;
    const auto* xb = static_cast<const uint16_t*>(x.data);
    const auto* wb = static_cast<const uint16_t*>(weight.data);
    const int64_t n_chunks = (n_out + BF16_CHUNK_ROWS - 1) / BF16_CHUNK_ROWS;
    const int threads = int(std::max<int64_t>(1, std::min<int64_t>(omp_get_max_threads(), n_chunks)));
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (int64_t c = 0; c < n_chunks; ++c) {
        const int64_t n0 = c * BF16_CHUNK_ROWS, n1 = std::min(n_out, n0 + BF16_CHUNK_ROWS);
#if defined(__x86_64__)  // matmul_uses_bf16 is false elsewhere
        gemm_bf16(xb, x.stride[0], tokens, wb + n0 * weight.stride[0], weight.stride[0], n1 - n0, in, y + n0, n_out);
#endif
        epilogue(out, bias, y + n0, n_out, n0, n1, bias_f32 + n0, row + n0);
    }
}

void matmul_blas(const TensorView& out, const TensorView& x, const TensorView& weight, const TensorView* bias) {
    const int64_t tokens = x.dim(0), in = x.dim(1), n_out = weight.dim(0);
    if (in == 0) {  // an empty sum: sgemm may not touch C when k = 0
        Buffer zeros(sizeof(float) * size_t(tokens * n_out + 2 * n_out));
        std::memset(zeros.data(), 0, zeros.size());
        epilogue(out, bias, zeros.as<float>(), n_out, 0, n_out, zeros.as<float>() + tokens * n_out,
                 zeros.as<float>() + tokens * n_out + n_out);
        return;
    }
    const Blas& blas = cpu::blas();
    const GemvKernels& kernels = gemv_kernels();
    Buffer x_copy;
    int64_t ldx = 0;
    const float* xf = x_as_f32(x, x_copy, ldx);

    // fp32 weights go to sgemm as they are; others one tile of rows at a time.
    const bool convert = weight.dtype != DType::F32 || weight.stride[0] < in;
    // Output straight into out when it is fp32 (no bias) with a usable row stride; else via c.
    const bool direct = out.dtype == DType::F32 && !bias && out.stride[0] >= n_out;
    // Tiles of rows, at least one per thread; each thread converts its tile (in its own cache) and
    // runs a one-thread sgemm on it.
    const int max_threads = omp_get_max_threads();
    const int64_t per_thread = (n_out + max_threads - 1) / max_threads;
    const int64_t tile = std::min(per_thread, std::max(BLAS_MIN_TILE_ROWS, BLAS_TILE_FLOATS / (in + tokens)));
    const int64_t n_tiles = (n_out + tile - 1) / tile;
    const int threads = int(std::min<int64_t>(max_threads, n_tiles));
    const BlasThreads one_thread(blas, 1);

#pragma omp parallel num_threads(threads)
    {
        Buffer w_tile(convert ? sizeof(float) * size_t(tile * in) : 0);
        Buffer c_tile(direct ? 0 : sizeof(float) * size_t(tokens * tile + 2 * tile));
#pragma omp for schedule(dynamic, 1)
        for (int64_t i = 0; i < n_tiles; ++i) {
            const int64_t n0 = i * tile, nb = std::min(tile, n_out - n0);
            const float* wt = static_cast<const float*>(weight.at(n0));
            int64_t ldw = weight.stride[0];
            if (convert) {
                float* dst = w_tile.as<float>();
                for (int64_t r = 0; r < nb; ++r) kernels.to_f32[int(weight.dtype)](dst + r * in, weight.at(n0 + r), in);
                wt = dst;
                ldw = in;
            }
            float* c = direct ? static_cast<float*>(out.at(0, n0)) : c_tile.as<float>();
            const int64_t ldc = direct ? out.stride[0] : nb;
            blas.sgemm(true, int(tokens), int(nb), int(in), 1.0f, xf, int(ldx), wt, int(ldw), 0.0f, c, int(ldc));
            if (!direct) epilogue(out, bias, c, ldc, n0, n0 + nb, c + tokens * nb, c + tokens * nb + nb);
        }
    }
}

}  // namespace

bool matmul_uses_bf16(const TensorView& x, const TensorView& weight) {
    if (x.dtype != DType::BF16 || weight.dtype != DType::BF16) return false;
    if (const char* want = std::getenv("FLASHPORT_CPU_GEMM"); want && *want) {
        const std::string w = want;
        FP_CHECK(w == "bf16" || w == "fp32", "FLASHPORT_CPU_GEMM=", w, " is not a CPU GEMM (use bf16 or fp32)");
        if (w == "fp32") return false;
    }
#if defined(__x86_64__)
    static const bool cpu_has = has_gemm_bf16();
    return cpu_has && std::string(tile_kernels().isa) == "avx512";
#else
    return false;
#endif
}

std::string matmul_kernel_name(MatmulImpl impl, const TensorView& x, const TensorView& weight) {
    if (impl == MatmulImpl::BLAS) return matmul_uses_bf16(x, weight) ? "cpu.matmul.bf16.avx512bf16" : "cpu.matmul.blas";
    return std::string("cpu.matmul.gemv.") + gemv_kernels().isa;
}

void matmul(const TensorView& out, const TensorView& x, const TensorView& weight, const TensorView* bias,
            MatmulImpl impl) {
    if (x.dim(0) == 0 || weight.dim(0) == 0) return;
    if (impl == MatmulImpl::BLAS && x.dim(1) > 0 && matmul_uses_bf16(x, weight))
        matmul_bf16(out, x, weight, bias);
    else if (impl == MatmulImpl::BLAS)
        matmul_blas(out, x, weight, bias);
    else
        matmul_gemv(out, x, weight, bias);
}

}  // namespace flashport::cpu
