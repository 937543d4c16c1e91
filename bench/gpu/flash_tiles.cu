// Tile-shape and schedule sweep for the mma flash kernel (attention_flash_mma.cuh): several MmaConfig
// instances per head dim on the issue's prefill problems, one process (flash_tiles.cuh has the harness).
//
// Built only with -DFLASHPORT_TUNING=ON (scripts/gpu/h200.sh tune), so the instances below cost the
// product build nothing.
#include "backends/gpu/attention_flash_mma.cuh"
#include "flash_tiles.cuh"

namespace mma = flashport::gpu::nvidia_only;
using namespace flash_tiles;

namespace {

template <DType DT, class Cfg>
void run_config(const Problem& p, Buffers& buf, const std::vector<float>& reference, const char* label, int iters,
                int reps) {
    run_candidate(p, buf, reference, label, Cfg::SMEM_BYTES, mma::flash_fwd_mma_kernel<DT, Cfg>,
                  [&] { mma::launch_flash_fwd_mma<DT, Cfg>(buf.args, nullptr); }, iters, reps);
}

// Candidates per head dim: MmaConfig<D, M, BC, STAGES, Q_IN_REGS, MIN_BLOCKS>. The first is the default.
template <DType DT, int D>
struct Sweep {
    static void run(const Problem& p, int iters, int reps) {
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
};

}  // namespace

int main(int argc, char** argv) {
    const int iters = argc > 1 ? std::atoi(argv[1]) : 10, reps = argc > 2 ? std::atoi(argv[2]) : 7;
    sweep_all<Sweep>(iters, reps);
    return 0;
}
