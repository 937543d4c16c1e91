// The CPU matmul against its two floors, for docs/perf.md ("## CPU ops"):
// - GEMV (decode): a bf16 weight streamed once per call. Floor: weight bytes / memory bandwidth,
//   with the bandwidth measured here as a large memcpy (bytes read + written, as the decode
//   limit counts it). "cold" cycles through enough copies of the weight (> 512 MB) that each call
//   reads DRAM; "hot" repeats one weight (8.7 MB for the MLP shapes), which may sit in L3. The
//   tied lm_head (151936×896, 272 MB) is always cold.
// - BLAS (prefill): 512 tokens through the tiled bf16→fp32 conversion and sgemm. Floor: FLOPs /
//   the sgemm rate measured on fp32 inputs of the same shape (no conversion).
// - Prefill of 128 tokens on Qwen2.5-0.5B's [gate; up] and down_proj, both routes of the BLAS path
//   (the AVX512-BF16 GEMM and FLASHPORT_CPU_GEMM=fp32's OpenBLAS tiles), in wall time and in process
//   CPU time: run with OMP_NUM_THREADS=1 on a busy machine for a per-core rate that other processes'
//   load barely moves (docs/perf.md "CPU engine against llama.cpp").
// Medians of several runs after a warm-up. Usage: flashport_cpu_matmul [reps]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <tuple>
#include <vector>

#include "backends/cpu/blas.h"
#include "bench_util.h"
#include "flashport/memory.h"
#include "flashport/ops.h"

namespace {

using namespace flashport;
using bench::median_seconds;

// Median process CPU time (all threads) of `reps` calls of f, after one warm-up call.
template <typename F>
double median_cpu_seconds(int reps, F&& f) {
    std::vector<double> t;
    f();
    for (int i = 0; i < reps; ++i) {
        const std::clock_t c0 = std::clock();
        f();
        t.push_back(double(std::clock() - c0) / CLOCKS_PER_SEC);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

void fill(const TensorView& t, uint32_t seed) {
    for (int64_t i = 0; i < t.numel(); ++i) {
        seed = seed * 1664525u + 1013904223u;
        store_from_float(static_cast<char*>(t.data) + i * int64_t(dtype_size(t.dtype)), t.dtype,
                         float(int(seed >> 20) - 2048) / 4096.0f);
    }
}

}  // namespace

int main(int argc, char** argv) {
    const int reps = argc > 1 ? std::max(3, std::atoi(argv[1])) : 9;
    std::printf("blas: %s\n", cpu::blas().description.c_str());

    // Memory bandwidth: 1 GiB memcpy, bytes read + written.
    const double copy_gbs = bench::memcpy_gbps(size_t(1) << 30, reps);
    std::printf("memcpy 1 GiB: %.1f GB/s (read + write)\n", copy_gbs);

    // GEMV: Qwen2.5-0.5B's MLP shapes, bf16 weights, fp32 activations in, bf16 out.
    struct Shape { int64_t out, in; const char* name; };
    for (const Shape& s : {Shape{4864, 896, "gate/up 4864x896"}, Shape{896, 4864, "down 896x4864"},
                           Shape{151936, 896, "lm_head 151936x896"}}) {
        const size_t wbytes = size_t(s.out * s.in) * 2;
        const int copies = int(std::max<size_t>(1, (size_t(512) << 20) / wbytes + 1));
        std::vector<Tensor> weights;
        for (int c = 0; c < copies; ++c) {
            weights.emplace_back(DType::BF16, std::initializer_list<int64_t>{s.out, s.in});
            fill(weights.back().view, uint32_t(c + 1));
        }
        for (int64_t tokens : {1, 4, 8}) {
            Tensor x(DType::BF16, {tokens, s.in}), y(DType::BF16, {tokens, s.out});
            fill(x.view, 7);
            std::string kernel;
            const double hot = median_seconds(reps * 20, [&] { kernel = matmul(y.view, x.view, weights[0].view); });
            int next = 0;
            const double cold = median_seconds(reps * 20, [&] {
                matmul(y.view, x.view, weights[size_t(next)].view);
                next = (next + 1) % copies;
            });
            const double floor_s = double(wbytes) / (copy_gbs * 1e9);
            std::printf("gemv %-18s bf16 tokens %ld (%s): cold %.3f ms = %.1f GB/s (%.0f%% of memcpy floor %.3f ms), "
                        "hot %.3f ms = %.1f GB/s\n",
                        s.name, long(tokens), kernel.c_str(), cold * 1e3, double(wbytes) / cold / 1e9,
                        100.0 * floor_s / cold, floor_s * 1e3, hot * 1e3, double(wbytes) / hot / 1e9);
        }
    }

    // BLAS: prefill of 512 tokens on the 4864x896 weight in bf16 (tiles converted to fp32), against
    // sgemm on fp32 copies of the same operands.
    {
        const int64_t tokens = 512, out = 4864, in = 896;
        Tensor x(DType::BF16, {tokens, in}), w(DType::BF16, {out, in}), y(DType::BF16, {tokens, out});
        Tensor xf(DType::F32, {tokens, in}), wf(DType::F32, {out, in}), yf(DType::F32, {tokens, out});
        fill(x.view, 3);
        fill(w.view, 5);
        fill(xf.view, 3);
        fill(wf.view, 5);
        const double flops = 2.0 * double(tokens * out * in);
        std::string kernel;
        const double ours = median_seconds(reps, [&] { kernel = matmul(y.view, x.view, w.view, nullptr, MatmulImpl::BLAS); });
        const double raw = median_seconds(reps, [&] {
            cpu::blas().sgemm(true, int(tokens), int(out), int(in), 1.0f, static_cast<float*>(xf.view.data), int(in),
                              static_cast<float*>(wf.view.data), int(in), 0.0f, static_cast<float*>(yf.view.data),
                              int(out));
        });
        const double gemv = median_seconds(reps, [&] { matmul(y.view, x.view, w.view, nullptr, MatmulImpl::GEMV); });
        std::printf("matmul %ldx%ldx%ld bf16 (%s): %.2f ms = %.1f GFLOP/s; sgemm fp32 floor %.2f ms = %.1f GFLOP/s "
                    "(%.0f%%); gemv path for comparison %.2f ms = %.1f GFLOP/s\n",
                    long(tokens), long(out), long(in), kernel.c_str(), ours * 1e3, flops / ours / 1e9, raw * 1e3,
                    flops / raw / 1e9, 100.0 * raw / ours, gemv * 1e3, flops / gemv / 1e9);
    }
    // Prefill, 128 tokens, both routes of the BLAS path, wall and CPU time.
    for (const auto& [out, in, name] :
         {std::tuple<int64_t, int64_t, const char*>{9728, 896, "gate+up 9728x896"}, {896, 4864, "down 896x4864"}}) {
        const int64_t tokens = 128;
        Tensor x(DType::BF16, {tokens, in}), w(DType::BF16, {out, in}), y(DType::BF16, {tokens, out});
        fill(x.view, 3);
        fill(w.view, 5);
        const double flops = 2.0 * double(tokens * out * in);
        for (const char* gemm : {"bf16", "fp32"}) {
            setenv("FLASHPORT_CPU_GEMM", gemm, 1);
            std::string kernel;
            const auto run = [&] { kernel = matmul(y.view, x.view, w.view, nullptr, MatmulImpl::BLAS); };
            const double wall = median_seconds(reps, run), cpu = median_cpu_seconds(reps, run);
            std::printf(
                "prefill %ld tokens %-16s (%s): wall %.2f ms = %.1f GFLOP/s; CPU time %.2f ms = %.1f GFLOP/s "
                "per busy thread\n",
                long(tokens), name, kernel.c_str(), wall * 1e3, flops / wall / 1e9, cpu * 1e3, flops / cpu / 1e9);
        }
        unsetenv("FLASHPORT_CPU_GEMM");
    }
    return 0;
}
