// The tile sweeps' shared harness (bench/gpu/flash_tiles.cu: the mma kernel; flash_tiles_wgmma.cu: the
// sm_90a wgmma kernel): the issue's prefill problems, their device buffers as a dense AttentionArgs, and
// one candidate's check and timing. Each sweep times several instances of one kernel on the same
// problem in one process, so that choosing a default per head dim rests on a same-run comparison. Each
// candidate's output is compared with the default's (both fp32-accumulated; they differ only in
// summation order); the float64 reference checks whatever becomes the default, through the GPU tests.
//
// Timing: cudaEvents around `iters` back-to-back launches, median of `reps` such runs, per call. Prints
// one JSON object per (problem, config) line.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <cuda_fp16.h>

#include "backends/gpu/attention_common.cuh"
#include "backends/gpu/runtime.h"

namespace fg = flashport::gpu;
using flashport::DType;

namespace flash_tiles {

struct Problem {
    const char* name;
    DType dtype;
    int batch, heads, len, head_dim;
    bool causal;
};

// The issue's prefill problems (docs/perf.md, GPU, "The floors").
inline const Problem PROBLEMS[] = {
    {"seeds fp16 d64 4k", DType::F16, 8, 16, 4096, 64, false},
    {"bf16 d128 8k", DType::BF16, 2, 16, 8192, 128, false},
    {"bf16 d128 8k causal", DType::BF16, 2, 16, 8192, 128, true},
    {"SD1.5 fp16 d40 16k", DType::F16, 2, 8, 16384, 40, false},
    // The other head dims, with the bf16 d128 problem's shape (no issue target).
    {"fp16 d80 8k", DType::F16, 2, 16, 8192, 80, false},
    {"fp16 d96 8k", DType::F16, 2, 16, 8192, 96, false},
    {"bf16 d160 8k", DType::BF16, 2, 16, 8192, 160, false},
    {"bf16 d256 8k", DType::BF16, 2, 16, 8192, 256, false},
};

inline void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) {
        std::fprintf(stderr, "flash_tiles: %s: %s\n", what, cudaGetErrorString(e));
        std::exit(1);
    }
}

inline uint16_t to_16(float x, DType dt) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    if (dt == DType::BF16) return uint16_t((u + 0x7fff + ((u >> 16) & 1)) >> 16);
    const __half_raw h = __float2half_rn(x);
    return h.x;
}

inline float from_16(uint16_t v, DType dt) {
    if (dt == DType::BF16) {
        const uint32_t u = uint32_t(v) << 16;
        float f;
        std::memcpy(&f, &u, 4);
        return f;
    }
    __half_raw h;
    h.x = v;
    return __half2float(__half(h));
}

// Device buffers and dense [batch, len, heads, head_dim] arguments for one problem.
struct Buffers {
    size_t elems = 0;
    uint16_t *q = nullptr, *k = nullptr, *v = nullptr, *out = nullptr;
    fg::AttentionArgs args{};

    explicit Buffers(const Problem& p) {
        elems = size_t(p.batch) * p.len * p.heads * p.head_dim;
        std::vector<uint16_t> host(elems);
        std::mt19937 rng(7);
        std::normal_distribution<float> n(0.0f, 1.0f);
        for (uint16_t** buf : {&q, &k, &v}) {
            for (auto& x : host) x = to_16(n(rng), p.dtype);
            check(cudaMalloc(buf, elems * 2), "cudaMalloc");
            check(cudaMemcpy(*buf, host.data(), elems * 2, cudaMemcpyHostToDevice), "upload");
        }
        check(cudaMalloc(&out, elems * 2), "cudaMalloc");
        const int64_t row = int64_t(p.heads) * p.head_dim, seq = row * p.len;
        args.q = q, args.k = k, args.v = v, args.out = out, args.lse = nullptr;
        for (int64_t* s : {args.q_stride, args.k_stride, args.v_stride, args.o_stride}) s[0] = seq, s[1] = row, s[2] = p.head_dim;
        args.batch = p.batch, args.q_len = args.kv_len = p.len, args.n_heads = args.n_kv_heads = p.heads;
        args.head_dim = p.head_dim;  // without it, every load is zero-filled and no column is stored
        args.scale = 1.0f / std::sqrt(float(p.head_dim));
        args.scale_log2 = args.scale * fg::LOG2E;
        args.causal = p.causal;
        args.window_left = -1;
        args.total_q = args.total_k = int64_t(p.batch) * p.len;
    }
    ~Buffers() {
        for (uint16_t* b : {q, k, v, out}) cudaFree(b);
    }
    std::vector<float> output(DType dt) const {
        std::vector<uint16_t> host(elems);
        check(cudaMemcpy(host.data(), out, elems * 2, cudaMemcpyDeviceToHost), "download");
        std::vector<float> f(elems);
        for (size_t i = 0; i < elems; ++i) f[i] = from_16(host[i], dt);
        return f;
    }
};

// Runs one candidate: `launch()` launches it once on the problem's buffers. Checks its output against
// `reference` (the default's; empty for the default itself), then times `iters` back-to-back launches,
// median of `reps`, and prints one JSON line. `kernel` is the candidate's __global__ function, for its
// registers and spills.
template <class Launch, class Kernel>
void run_candidate(const Problem& p, Buffers& buf, const std::vector<float>& reference, const char* label,
                   int smem_bytes, Kernel kernel, Launch launch, int iters, int reps) {
    check(cudaMemset(buf.out, 0xff, buf.elems * 2), "poison");  // NaN in both 16-bit types
    launch();
    check(cudaDeviceSynchronize(), label);
    const std::vector<float> got = buf.output(p.dtype);
    double max_diff = 0, max_ref = 0;
    size_t nans = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        if (std::isnan(got[i])) ++nans;
        else max_diff = std::max(max_diff, double(std::fabs(got[i] - (reference.empty() ? got[i] : reference[i]))));
        max_ref = std::max(max_ref, double(std::fabs(got[i])));
    }
    if (reference.empty() && nans > 0) {  // the default is tested correct: the harness is broken, not it
        std::fprintf(stderr, "flash_tiles: %s: the default's output has %zu NaN of %zu\n", p.name, nans, got.size());
        std::exit(1);
    }
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    std::vector<float> ms;
    for (int r = 0; r < reps; ++r) {
        cudaEventRecord(e0);
        for (int i = 0; i < iters; ++i) launch();
        cudaEventRecord(e1);
        check(cudaEventSynchronize(e1), label);
        float t = 0;
        cudaEventElapsedTime(&t, e0, e1);
        ms.push_back(t / float(iters));
    }
    std::sort(ms.begin(), ms.end());
    const double median = ms[ms.size() / 2];
    const double flops = 4.0 * p.batch * p.heads * double(p.len) * p.len * p.head_dim * (p.causal ? 0.5 : 1.0);
    cudaFuncAttributes attr{};
    cudaFuncGetAttributes(&attr, kernel);
    std::printf(
        "{\"problem\": \"%s\", \"config\": \"%s\", \"ms\": %.4f, \"tflops\": %.1f, \"max_abs_diff_vs_default\": %.3g, "
        "\"max_abs_out\": %.3g, \"nans\": %zu, \"registers\": %d, \"spill_bytes\": %zu, \"smem\": %d}\n",
        p.name, label, median, flops / median * 1e-9, max_diff, max_ref, nans, attr.numRegs,
        size_t(attr.localSizeBytes), smem_bytes);
    std::fflush(stdout);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
}

// Sweep<DT, D>::run, unless the build asked for head dims up to FLASH_TILES_MAX_HEAD_DIM only (cmake
// -DFLASHPORT_TUNING_MAX_HEAD_DIM=64: a focused sweep compiles a few instances, not every head dim's).
template <template <DType, int> class Sweep, DType DT, int D>
void run_sweep(const Problem& p, int iters, int reps) {
#if defined(FLASH_TILES_MAX_HEAD_DIM)
    if constexpr (D > FLASH_TILES_MAX_HEAD_DIM) {
        std::printf("{\"problem\": \"%s\", \"skipped\": \"head dim above FLASH_TILES_MAX_HEAD_DIM\"}\n", p.name);
        return;
    } else
#endif
        Sweep<DT, D>::run(p, iters, reps);
}

// Runs Sweep<DT, D>::run on every problem: D its head dim, DT its dtype (fp16 below 128, bf16 from 128).
template <template <DType, int> class Sweep>
void sweep_all(int iters, int reps) {
    for (const Problem& p : PROBLEMS) {
        switch (p.head_dim) {
            case 40: run_sweep<Sweep, DType::F16, 40>(p, iters, reps); break;
            case 64: run_sweep<Sweep, DType::F16, 64>(p, iters, reps); break;
            case 80: run_sweep<Sweep, DType::F16, 80>(p, iters, reps); break;
            case 96: run_sweep<Sweep, DType::F16, 96>(p, iters, reps); break;
            case 128: run_sweep<Sweep, DType::BF16, 128>(p, iters, reps); break;
            case 160: run_sweep<Sweep, DType::BF16, 160>(p, iters, reps); break;
            case 256: run_sweep<Sweep, DType::BF16, 256>(p, iters, reps); break;
        }
    }
}

}  // namespace flash_tiles
