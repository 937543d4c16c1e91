// Times the GPU matmul (flashport/ops.h, x · Wᵀ: the engine's projections) on prefill-sized products
// and prints one JSON object per shape: the kernel that ran, ms per call, TFLOP/s and the share of the
// chip's FP32 FMA rate. It is how the GEMM that serves where no vendor BLAS exists (the portable
// kernel; MFMA on CDNA) is measured against its floor: run it with FLASHPORT_GPU_BLAS=portable beside
// the default (cuBLAS / hipBLAS) in the same run (bench/gpu/portable_table.py).
//
// Shapes (tokens x in -> out) are Qwen2.5-7B's at a 512-token prefill unless --shapes says otherwise:
// q/o 3584 -> 3584, k/v 3584 -> 512, gate/up 3584 -> 18944, down 18944 -> 3584. Each result is checked
// on 256 sampled entries against a float64 dot product of the same bf16/fp16 inputs (relative error
// over the row's magnitude), so a fast wrong kernel does not pass as a figure.
//
// Timing: `iters` calls back to back, one synchronise, host clock around the lot; the median of `reps`
// such runs, per call (the method of the other GPU bench drivers).
//
// Usage: flashport_bench_matmul [--tokens 512] [--shapes 3584x3584,3584x18944,...] [--dtype bf16]
//        [--iters 20] [--reps 5] [--fp32-peak-tflops 66.9]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "flashport/device.h"
#include "flashport/error.h"
#include "flashport/memory.h"
#include "flashport/ops.h"
#include "support/rng.h"  // tests/support: the one generator of the tests and benchmarks

using namespace flashport;

namespace {

struct Options {
    int64_t tokens = 512;
    std::vector<std::pair<int64_t, int64_t>> shapes = {{3584, 3584}, {3584, 512}, {3584, 18944}, {18944, 3584}};
    DType dtype = DType::BF16;
    int iters = 20, reps = 5;
    // The H200's FP32 (non-tensor) FMA rate: 132 SMs x 128 lanes x 2 FLOPs x 1.98 GHz.
    double fp32_peak_tflops = 66.9;
};

std::vector<std::pair<int64_t, int64_t>> parse_shapes(const std::string& s) {
    std::vector<std::pair<int64_t, int64_t>> v;
    size_t at = 0;
    while (at < s.size()) {
        const size_t comma = std::min(s.find(',', at), s.size());
        const std::string one = s.substr(at, comma - at);
        const size_t x = one.find('x');
        FP_CHECK(x != std::string::npos, "--shapes: expected IN x OUT pairs like 3584x18944, got '", one, "'");
        const int64_t in = std::atoll(one.substr(0, x).c_str()), out = std::atoll(one.substr(x + 1).c_str());
        FP_CHECK(in > 0 && out > 0 && in <= (1 << 20) && out <= (1 << 20), "--shapes: sizes must be in 1..2^20, got '",
                 one, "'");
        v.emplace_back(in, out);
        at = comma + 1;
    }
    FP_CHECK(!v.empty(), "--shapes: no shape given");
    return v;
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        FP_CHECK(i + 1 < argc, "missing value after ", a);
        const char* v = argv[++i];
        if (a == "--tokens")
            o.tokens = std::atoll(v);
        else if (a == "--shapes")
            o.shapes = parse_shapes(v);
        else if (a == "--dtype")
            o.dtype = parse_dtype(v);
        else if (a == "--iters")
            o.iters = std::atoi(v);
        else if (a == "--reps")
            o.reps = std::atoi(v);
        else if (a == "--fp32-peak-tflops")
            o.fp32_peak_tflops = std::atof(v);
        else
            fail("unknown option ", a);
    }
    FP_CHECK(o.tokens > 0 && o.tokens <= (1 << 20), "--tokens must be in 1..2^20");
    FP_CHECK(o.iters > 0 && o.reps > 0, "--iters and --reps must be positive");
    FP_CHECK(o.dtype == DType::BF16 || o.dtype == DType::F16, "--dtype: bf16 or f16");
    return o;
}

// Host values of a random 16-bit tensor (uniform in [-1, 1), rounded to the dtype) and its device copy.
std::vector<uint16_t> random_on_gpu(Tensor& t, test::Rng& rng) {
    std::vector<uint16_t> host(size_t(t.view.numel()));
    for (uint16_t& x : host) store_from_float(&x, t.view.dtype, float(rng.uniform(-1.0, 1.0)));
    copy_bytes(t.view.data, t.view.device, host.data(), Device::cpu(), host.size() * 2);
    return host;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        const Options o = parse(argc, argv);
        FP_CHECK(gpu_device_count() > 0, "no GPU present (backend ", gpu_backend_name(), ")");
        const Device gpu = Device::gpu(0);
        const GpuStream stream(gpu);
        test::Rng rng(42);
        bool all_ok = true;
        for (const auto& [in, out_features] : o.shapes) {
            Tensor x(o.dtype, {o.tokens, in}, gpu), w(o.dtype, {out_features, in}, gpu),
                y(o.dtype, {o.tokens, out_features}, gpu);
            const std::vector<uint16_t> xh = random_on_gpu(x, rng), wh = random_on_gpu(w, rng);
            auto call = [&] { return matmul(y.view, x.view, w.view, nullptr, MatmulImpl::BLAS, stream.get()); };
            const std::string kernel = call();
            stream.synchronize();

            // 256 sampled entries against float64 (sum of |products| bounds the rounding of fp32 sums).
            std::vector<uint16_t> yh(size_t(y.view.numel()));
            copy_bytes(yh.data(), Device::cpu(), y.view.data, gpu, yh.size() * 2);
            double worst = 0.0;
            for (int s = 0; s < 256; ++s) {
                const int64_t i = rng.below(o.tokens), j = rng.below(out_features);
                double ref = 0.0, mag = 0.0;
                for (int64_t p = 0; p < in; ++p) {
                    const double prod = double(load_as_float(&xh[size_t(i * in + p)], o.dtype)) *
                                        double(load_as_float(&wh[size_t(j * in + p)], o.dtype));
                    ref += prod;
                    mag += std::fabs(prod);
                }
                const double got = load_as_float(&yh[size_t(i * out_features + j)], o.dtype);
                const double err = std::isfinite(got) ? std::fabs(got - ref) / std::max(mag, 1e-30) : INFINITY;
                worst = std::max(worst, err);
            }
            // The output is rounded once to the 16-bit dtype: half an ulp of |ref| <= mag, plus fp32 sums.
            const double tolerance = o.dtype == DType::BF16 ? 1.0 / 256 : 1.0 / 2048;
            const bool ok = worst <= tolerance;
            all_ok &= ok;

            for (int i = 0; i < 3; ++i) call();
            stream.synchronize();
            std::vector<double> ms;
            for (int r = 0; r < o.reps; ++r) {
                const auto t0 = std::chrono::steady_clock::now();
                for (int i = 0; i < o.iters; ++i) call();
                stream.synchronize();
                ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
                             o.iters);
            }
            std::sort(ms.begin(), ms.end());
            const double med = ms[ms.size() / 2];
            const double flops = 2.0 * double(o.tokens) * double(in) * double(out_features);
            const double tflops = flops / (med * 1e-3) / 1e12;
            std::printf(
                "{\"op\": \"matmul\", \"kernel\": \"%s\", \"dtype\": \"%s\", \"tokens\": %lld, \"in\": %lld, "
                "\"out\": %lld, \"median_ms\": %.4f, \"tflops\": %.2f, \"fp32_fma_share\": %.3f, "
                "\"fp32_floor_ms\": %.4f, \"max_rel_err\": %.2e, \"ok\": %s, \"device\": \"%s\"}\n",
                kernel.c_str(), dtype_name(o.dtype), (long long)o.tokens, (long long)in, (long long)out_features, med,
                tflops, tflops / o.fp32_peak_tflops, flops / (o.fp32_peak_tflops * 1e12) * 1e3, worst,
                ok ? "true" : "false", gpu_device_description(0).c_str());
            std::fflush(stdout);
        }
        return all_ok ? 0 : 1;
    } catch (const Error& e) {
        std::fprintf(stderr, "flashport_bench_matmul: %s\n", e.what());
        return 1;
    }
}
