// The GPU attention kernels' launchers as the dispatcher (attention_gpu.cu) sees them. Each takes the
// argument block filled from tensor views, and the stream last; none allocates or synchronises.
#pragma once

#include <cstddef>

#include "backends/gpu/attention_common.cuh"
#include "backends/gpu/head_dim_switch.h"
#include "flashport/attention.h"

namespace flashport::gpu {

// Naive: BLAS -> masked softmax -> BLAS through a [batch, n_heads, q_len, kv_len] score workspace.
size_t naive_workspace_bytes(const AttentionPlan& plan, DType dtype);
void attention_naive(const TensorView& out, const AttentionArgs& args, int64_t head_dim, void* workspace,
                     void* stream);

// Flash forward, portable (any target). DT is F16 or BF16; head_dim one of FlashHeadDims (head_dim_switch.h).
template <DType DT>
void flash_fwd_portable(const AttentionArgs& args, int head_dim, void* stream);

// Flash forward on NVIDIA tensor cores (mma.sync, sm_80+). Present only in CUDA builds.
template <DType DT>
void flash_fwd_mma(const AttentionArgs& args, int head_dim, void* stream);

// Flash forward on Hopper's warpgroup MMA (wgmma, sm_90a machine code: attention_flash_wgmma.cu in the
// flashport_sm90a objects). CUDA builds only; throws off compute capability 9.0. Head dims round up to
// WgmmaHeadDims.
void flash_fwd_wgmma(const AttentionArgs& args, DType dtype, int head_dim, void* stream);

// Flash forward on AMD matrix cores (MFMA, gfx908/90a/940). Present where the build defines
// FLASHPORT_GPU_MFMA_KERNELS: the hip preset (every target; a trap body on chips without MFMA, which
// the dispatcher never picks) and the HIP CPU Runtime build, which executes it under the emulator.
template <DType DT>
void flash_fwd_mfma_cdna(const AttentionArgs& args, int head_dim, void* stream);

// Flash forward for fp16 on v_dot2_f32_f16 (gfx906, the MI50; also on CDNA). Built with the MFMA kernels
// (FLASHPORT_GPU_MFMA_KERNELS: the AMD-only sources), a trap body where the target lacks the
// instruction (FP_HAS_DOT2_F16 0), which the dispatcher never picks. DT is F16 only.
template <DType DT>
void flash_fwd_dot2(const AttentionArgs& args, int head_dim, void* stream);

}  // namespace flashport::gpu
