// The sm_90a flash kernel's instances and dispatch (issue 17, item 1): attention_flash_wgmma.cuh holds
// the kernel; this file is compiled for sm_90a only (the flashport_sm90a objects) and runs on compute
// capability 9.0 when the plan asks for it (FlashVariant::WGMMA). Its siblings, the mma.sync kernel
// (sm_80+) and the portable one, serve every other GPU and HIP.
#include "backends/gpu/attention_flash_wgmma.cuh"
#include "backends/gpu/sm90.h"

namespace flashport::gpu {

void flash_fwd_wgmma(const AttentionArgs& args, DType dtype, int head_dim, void* stream) {
    FP_CHECK(sm90_available(), "attention: the wgmma flash kernel needs an NVIDIA GPU of compute capability 9.0");
    dispatch_head_dim_up<WgmmaHeadDims>(head_dim, "flash attention (wgmma)", [&](auto d) {
        using Cfg = nvidia_only::DefaultWgmmaConfig<decltype(d)::value>;
        dtype == DType::F16 ? nvidia_only::launch_flash_fwd_wgmma<DType::F16, Cfg>(args, as_stream(stream))
                            : nvidia_only::launch_flash_fwd_wgmma<DType::BF16, Cfg>(args, as_stream(stream));
    });
}

}  // namespace flashport::gpu
