// The sm_90a flash kernel's instances and dispatch (issue 17, item 1): attention_flash_wgmma.cuh holds
// the kernel; this file is compiled for sm_90a only (the flashport_sm90a objects) and runs on compute
// capability 9.0 when the plan asks for it (FlashVariant::WGMMA). Its siblings, the mma.sync kernel
// (sm_80+) and the portable one, serve every other GPU and HIP.
#include "backends/gpu/attention_flash_wgmma.cuh"
#include "backends/gpu/attention_gpu.h"
#include "backends/gpu/sm90.h"

namespace flashport::gpu {

namespace {

template <class Cfg>
void launch(const AttentionArgs& args, DType dtype, void* stream,
            const nvidia_only::WgmmaTmaParam<Cfg>* maps = nullptr) {
    dtype == DType::F16 ? nvidia_only::launch_flash_fwd_wgmma<DType::F16, Cfg>(args, as_stream(stream), maps)
                        : nvidia_only::launch_flash_fwd_wgmma<DType::BF16, Cfg>(args, as_stream(stream), maps);
}

}  // namespace

// With the TMA route on, a call with a positive scale whose tensors TMA can describe (dense, varlen, or a
// paged cache whose block size divides or is a multiple of the tile's keys) runs the TMA producer (at head
// dims up to 128, and 256; d160 is faster natively); everything else the all-thread cp.async instance.
void flash_fwd_wgmma(const AttentionArgs& args, DType dtype, int head_dim, void* stream) {
    FP_CHECK(sm90_available(), "attention: the wgmma flash kernel needs an NVIDIA GPU of compute capability 9.0");
    dispatch_head_dim_up<WgmmaHeadDims>(head_dim, "flash attention (wgmma)", [&](auto d) {
        constexpr int D = decltype(d)::value;
        if constexpr (D != 160) {
            using Tma = nvidia_only::TmaWgmmaConfig<(D + 63) / 64 * 64>;
            if (wgmma_tma_enabled() && args.scale_log2 >= 0.0f) {
                const nvidia_only::WgmmaTmaMaps maps = nvidia_only::wgmma_tma_maps<Tma>(args);
                if (maps.valid) return launch<Tma>(args, dtype, stream, &maps);
            }
        }
        launch<nvidia_only::DefaultWgmmaConfig<D>>(args, dtype, stream);
    });
}

}  // namespace flashport::gpu
