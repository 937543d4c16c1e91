// Tile-shape sweep for the sm_90a wgmma flash kernel (attention_flash_wgmma.cuh): WgmmaConfig instances
// per head dim on the issue's prefill problems, one process (flash_tiles.cuh has the harness). Each head
// dim runs the library's instance (WgmmaHeadDims, dispatch_head_dim_up: 40, 80 and 160 natively), then,
// where that is not a multiple of 64, the padded one, then the candidates at the padded width.
//
// Built only with -DFLASHPORT_TUNING=ON, for sm_90a alone (scripts/gpu/h200.sh tune), so the instances
// below cost the product build nothing; it exits with a message on any GPU but compute capability 9.0.
#include <cstdio>

#include "backends/gpu/attention_flash_wgmma.cuh"
#include "backends/gpu/head_dim_switch.h"
#include "flash_tiles.cuh"

namespace wg = flashport::gpu::nvidia_only;
using namespace flash_tiles;

namespace {

template <DType DT, class Cfg>
void run_config(const Problem& p, Buffers& buf, const std::vector<float>& reference, const char* label, int iters,
                int reps) {
    run_candidate(
        p, buf, reference, label, Cfg::SMEM_BYTES, wg::flash_fwd_wgmma_kernel<DT, Cfg>,
        [&] { wg::launch_flash_fwd_wgmma<DT, Cfg>(buf.args, nullptr); }, iters, reps);
}

// A candidate, labelled with its WgmmaConfig parameters (the labels earlier result files carry).
template <DType DT, class Cfg>
void run_candidate_config(const Problem& p, Buffers& buf, const std::vector<float>& reference, int iters, int reps) {
    const auto tf = [](bool x) { return x ? "true" : "false"; };
    char label[160];
    std::snprintf(label, sizeof label, "NWG%d BC%d S%d SW128 %s B%d producer %s V-SW128 %s TMA %s", Cfg::NWG, Cfg::BC,
                  Cfg::STAGES, tf(Cfg::SW128), Cfg::MIN_BLOCKS, tf(Cfg::PRODUCER), tf(Cfg::VSW128), tf(Cfg::TMA));
    run_config<DT, Cfg>(p, buf, reference, label, iters, reps);
}

// Candidates: WgmmaConfig<D, NWG, BC, STAGES, SW128, MIN_BLOCKS, PRODUCER, VSW128, TMA>, at the default's
// tile (BC) and ring (STAGES) unless they vary them. What each tries (docs/perf.md, "The pipelined wgmma
// kernel" and after, has the reasoning):
// - a producer warpgroup with setmaxnreg (the consumers only compute, with 232 registers a thread);
// - V in the 128-byte swizzle (P V's B operand read as whole 128-byte lines), alone and with the producer;
// - the producer's copies as TMA boxes (one thread issues a tile's copies; the copy engine swizzles);
// - BC 64 at d64/d128: half the S registers (the d128 default spills 20 bytes), twice the barriers;
// - two buffers instead of three at d64/d128: less shared memory, a shallower ring;
// - one warpgroup: no turn-taking, half the Q in shared memory;
// - the plain core-matrix layout for Q and K (SW128 off), the swizzle's baseline;
// - MIN_BLOCKS 2 at d64: two blocks an SM, 128 registers a thread (spills expected; three warpgroups
//   break cp_async_rows' mapping);
// - three consumer warpgroups on the TMA producer at d64 (192 query rows a block, FlashAttention-3's
//   tile there): no turn-taking (ncu put the turns' named barriers first among d64's stalls), three
//   softmaxes to hide under the others' products; 128 registers a thread at compile time (512 threads).
template <DType DT, int HEAD_DIM>
struct Sweep {
    static void run(const Problem& p, int iters, int reps) {
        constexpr int NATIVE = flashport::gpu::WgmmaHeadDims::at_least(HEAD_DIM);
        constexpr int D = NATIVE <= 64 ? 64 : NATIVE <= 128 ? 128 : 256;  // the candidates' (padded) width
        using Default = wg::DefaultWgmmaConfig<D>;
        constexpr int BC = Default::BC, ST = Default::STAGES;
        Buffers buf(p);
        run_config<DT, wg::DefaultWgmmaConfig<NATIVE>>(p, buf, {}, "default", iters, reps);
        const std::vector<float> reference = buf.output(p.dtype);
        if constexpr (NATIVE != D) run_config<DT, Default>(p, buf, reference, "padded", iters, reps);
#define FP_TRY(...) run_candidate_config<DT, wg::WgmmaConfig<D, __VA_ARGS__>>(p, buf, reference, iters, reps)
        FP_TRY(2, BC, ST, true, 1, true, false, false);
        FP_TRY(2, BC, ST, true, 1, false, true, false);
        FP_TRY(2, BC, ST, true, 1, true, true, false);
        FP_TRY(2, BC, ST, true, 1, true, true, true);
        if constexpr (D <= 128) {
            FP_TRY(2, 64, 3, true, 1, false, false, false);
            FP_TRY(2, 128, 2, true, 1, false, false, false);
        }
        FP_TRY(1, BC, ST, true, 1, false, false, false);
        FP_TRY(2, BC, ST, false, 1, false, false, false);
        if constexpr (D == 64) FP_TRY(2, 128, 3, true, 2, false, false, false);
        if constexpr (D == 64) FP_TRY(3, BC, ST, true, 1, true, true, true);
#undef FP_TRY
    }
};

}  // namespace

int main(int argc, char** argv) {
    int dev = 0, major = 0, minor = 0;
    check(cudaGetDevice(&dev), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), "compute capability");
    check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev), "compute capability");
    if (major != 9 || minor != 0) {
        std::fprintf(stderr, "flash_tiles_wgmma: sm_90a machine code needs compute capability 9.0; this GPU is %d.%d\n",
                     major, minor);
        return 1;
    }
    const int iters = argc > 1 ? std::atoi(argv[1]) : 10, reps = argc > 2 ? std::atoi(argv[2]) : 7;
    sweep_all<Sweep>(iters, reps);
    return 0;
}
