// Tile-shape and schedule sweep for the mma flash kernel (attention_flash_mma.cuh): several MmaConfig
// instances of one head dim, timed on the same problem in one process, so that choosing the default
// per head dim (DefaultMmaConfig) rests on a same-run comparison. Each candidate's output is compared
// with the current default's (both are fp32-accumulated; they differ only in summation order), and
// the float64 reference checks whatever becomes the default through the GPU test grid.
//
// Built only with -DFLASHPORT_TUNING=ON (scripts/gpu/h200.sh tune), so the instances below cost the
// product build nothing. Prints one JSON object per (problem, config) line.
//
// Timing: cudaEvents around `iters` back-to-back launches, median of `reps` such runs, per call.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backends/gpu/attention_flash_mma.cuh"

namespace fg = flashport::gpu;
namespace mma = flashport::gpu::nvidia_only;
using flashport::DType;

namespace {

struct Problem {
    const char* name;
    DType dtype;
    int batch, heads, len, head_dim;
    bool causal;
};

// The issue's prefill problems (docs/perf.md, GPU, "The floors").
const Problem PROBLEMS[] = {
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

void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) {
        std::fprintf(stderr, "flash_tiles: %s: %s\n", what, cudaGetErrorString(e));
        std::exit(1);
    }
}

uint16_t to_16(float x, DType dt) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    if (dt == DType::BF16) return uint16_t((u + 0x7fff + ((u >> 16) & 1)) >> 16);
    const __half h = __float2half_rn(x);
    uint16_t r;
    std::memcpy(&r, &h, 2);
    return r;
}

float from_16(uint16_t v, DType dt) {
    if (dt == DType::BF16) {
        const uint32_t u = uint32_t(v) << 16;
        float f;
        std::memcpy(&f, &u, 4);
        return f;
    }
    __half h;
    std::memcpy(&h, &v, 2);
    return __half2float(h);
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

template <DType DT, class Cfg>
void run_config(const Problem& p, Buffers& buf, const std::vector<float>& reference, const char* label,
                int iters, int reps) {
    check(cudaMemset(buf.out, 0xff, buf.elems * 2), "poison");  // NaN in both 16-bit types
    mma::launch_flash_fwd_mma<DT, Cfg>(buf.args, nullptr);
    check(cudaDeviceSynchronize(), label);
    const std::vector<float> got = buf.output(p.dtype);
    double max_diff = 0, max_ref = 0;
    size_t nans = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        if (std::isnan(got[i])) ++nans;
        else max_diff = std::max(max_diff, double(std::fabs(got[i] - (reference.empty() ? got[i] : reference[i]))));
        max_ref = std::max(max_ref, double(std::fabs(got[i])));
    }
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    std::vector<float> ms;
    for (int r = 0; r < reps; ++r) {
        cudaEventRecord(e0);
        for (int i = 0; i < iters; ++i) mma::launch_flash_fwd_mma<DT, Cfg>(buf.args, nullptr);
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
    cudaFuncGetAttributes(&attr, mma::flash_fwd_mma_kernel<DT, Cfg>);
    std::printf(
        "{\"problem\": \"%s\", \"config\": \"%s\", \"ms\": %.4f, \"tflops\": %.1f, \"max_abs_diff_vs_default\": %.3g, "
        "\"max_abs_out\": %.3g, \"nans\": %zu, \"registers\": %d, \"spill_bytes\": %zu, \"smem\": %d}\n",
        p.name, label, median, flops / median * 1e-9, max_diff, max_ref, nans, attr.numRegs,
        size_t(attr.localSizeBytes), Cfg::SMEM_BYTES);
    std::fflush(stdout);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
}

// Candidates per head dim: MmaConfig<D, M, BC, STAGES, Q_IN_REGS, MIN_BLOCKS>. The first is the default.
template <DType DT, int D>
void sweep(const Problem& p, int iters, int reps) {
    Buffers buf(p);
    using Default = mma::DefaultMmaConfig<D>;
    run_config<DT, Default>(p, buf, {}, "default", iters, reps);
    const std::vector<float> reference = buf.output(p.dtype);
#define FP_TRY(M, BC, ST, QR, MB) \
    run_config<DT, mma::MmaConfig<D, M, BC, ST, QR, MB>>(p, buf, reference, "M" #M " BC" #BC " S" #ST " Qregs " #QR " B" #MB, iters, reps)
    // The v4 kernel's shape (one row tile per warp, one stage), the baseline the v5 defaults replaced.
    using V4 = mma::MmaConfig<D, 1, (D <= 128 ? 64 : 32), 1, (mma::padded16(D) <= 160), (D <= 64 ? 4 : D <= 96 ? 3 : 1)>;
    run_config<DT, V4>(p, buf, reference, "v4 (M1, one stage)", iters, reps);
    // Rounds 1 and 2 (2026-11-30, docs/perf.md "v5") chose the defaults from these; more candidates
    // around them go here.
    FP_TRY(2, 64, 1, false, (D <= 64 ? 2 : 1));
    FP_TRY(2, 64, 2, false, (D <= 64 ? 2 : 1));
    FP_TRY(2, 32, 1, false, 1);
    FP_TRY(1, 64, 1, false, 1);
    if constexpr (D <= 64) FP_TRY(2, 64, 2, true, 2);
#undef FP_TRY
}

}  // namespace

int main(int argc, char** argv) {
    const int iters = argc > 1 ? std::atoi(argv[1]) : 10, reps = argc > 2 ? std::atoi(argv[2]) : 7;
    for (const Problem& p : PROBLEMS) {
        switch (p.head_dim) {
            case 40: sweep<DType::F16, 40>(p, iters, reps); break;
            case 64: sweep<DType::F16, 64>(p, iters, reps); break;
            case 80: sweep<DType::F16, 80>(p, iters, reps); break;
            case 96: sweep<DType::F16, 96>(p, iters, reps); break;
            case 128: sweep<DType::BF16, 128>(p, iters, reps); break;
            case 160: sweep<DType::BF16, 160>(p, iters, reps); break;
            case 256: sweep<DType::BF16, 256>(p, iters, reps); break;
        }
    }
    return 0;
}
