// Shared by the GPU tests: skip cleanly where no GPU is present (CI machines), so a GPU build's test
// suite passes everywhere and only a device run exercises the kernels.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "backends/gpu/attention_gpu.h"
#include "backends/gpu/blas.h"
#include "backends/gpu/paged_attention_decode.h"
#include "backends/gpu/sm90.h"
#include "flashport/device.h"

#define FP_SKIP_WITHOUT_GPU()                                                                           \
    do {                                                                                                \
        if (::flashport::gpu_device_count() == 0)                                                       \
            GTEST_SKIP() << "no GPU present: the " << ::flashport::gpu_backend_name()                   \
                         << " driver reports no device, so GPU kernels cannot run here";                \
    } while (0)

// The hip-cpu preset runs the portable kernels on ROCm's HIP CPU Runtime (wave64 on the CPU). It has no
// graphs, and its timings say nothing about a GPU.
#define FP_SKIP_ON_HIP_CPU(what)                                                                \
    do {                                                                                        \
        if (::flashport::test::on_hip_cpu()) GTEST_SKIP() << "the HIP CPU Runtime: " << (what); \
    } while (0)
#define FP_SKIP_WITHOUT_GRAPHS() FP_SKIP_ON_HIP_CPU("it has no graphs (stream capture), so nothing to replay")

// The mma variants (mma.sync) exist in CUDA builds only; a HIP build runs the portable kernel, which the
// Portable test of the same case checks.
#define FP_SKIP_MMA_OFF_NVIDIA(is_mma)                                                                 \
    do {                                                                                               \
        if ((is_mma) && std::string(::flashport::gpu_backend_name()) != "CUDA")                        \
            GTEST_SKIP() << "the mma variant is NVIDIA-only; this " << ::flashport::gpu_backend_name() \
                         << " build runs the portable kernel, checked by the Portable test";           \
    } while (0)

namespace flashport::test {

inline bool on_hip_cpu() {
    return std::string(gpu_backend_name()) == "HIP-CPU";
}

// Sets a process-wide setting for one scope and puts the previous value back after it.
template <class T, T (*GET)(), void (*SET)(T)>
class ScopedSetting {
  public:
    explicit ScopedSetting(T value) : saved_(GET()) { SET(value); }
    ~ScopedSetting() { SET(saved_); }
    ScopedSetting(const ScopedSetting&) = delete;
    ScopedSetting& operator=(const ScopedSetting&) = delete;

  private:
    T saved_;
};
// The flash kernel (FlashVariant); the paged decode kernel (mma, MFMA or portable); where the decode
// splits are merged (a separate kernel, or the split kernel's last block).
using ScopedFlashVariant = ScopedSetting<gpu::FlashVariant, gpu::flash_variant, gpu::set_flash_variant>;
using ScopedDecodeVariant = ScopedSetting<gpu::DecodeVariant, gpu::decode_variant, gpu::set_decode_variant>;
using ScopedDecodeCombine = ScopedSetting<gpu::DecodeCombine, gpu::decode_combine, gpu::set_decode_combine>;
// The wgmma kernel's TMA route for dense calls.
using ScopedWgmmaTma = ScopedSetting<bool, gpu::wgmma_tma_enabled, gpu::set_wgmma_tma>;

// Runs f(backend) once per GEMM backend of this build (the portable kernel; cuBLAS / hipBLAS where
// present, and the MFMA kernel where the build and device have it, unless FLASHPORT_GPU_BLAS is
// "portable"), then restores the process-wide choice. The
// sanitize stage sets FLASHPORT_GPU_BLAS=portable for initcheck, which does not see cuBLAS's writes.
template <typename F>
void for_each_gemm_backend(F&& f) {
    std::vector<gpu::blas::Backend> backends = {gpu::blas::Backend::PORTABLE};
    const char* only = std::getenv("FLASHPORT_GPU_BLAS");
    if (gpu::blas::vendor_available() && !(only && std::string(only) == "portable"))
        backends.push_back(gpu::blas::Backend::VENDOR);
    if (gpu::blas::mfma_available() && !(only && std::string(only) == "portable"))
        backends.push_back(gpu::blas::Backend::MFMA);
    struct Restore {
        gpu::blas::Backend saved;
        ~Restore() { gpu::blas::set_backend(saved); }
    } restore{gpu::blas::backend()};
    for (const gpu::blas::Backend backend : backends) {
        gpu::blas::set_backend(backend);
        f(backend);
    }
}

inline const char* flash_variant_label(gpu::FlashVariant v) {
    switch (v) {
        case gpu::FlashVariant::MMA:
            return "mma";
        case gpu::FlashVariant::MFMA:
            return "mfma";
        case gpu::FlashVariant::DOT2:
            return "dot2";
        case gpu::FlashVariant::WGMMA:
            return "wgmma";
        default:
            return "portable";
    }
}
// The wgmma flash kernel (sm_90a machine code) runs on compute capability 9.0 in CUDA builds only.
#define FP_SKIP_WITHOUT_WGMMA(is_wgmma) \
    if ((is_wgmma) && !gpu::sm90_available()) GTEST_SKIP() << "the wgmma kernel needs an sm_90 GPU (H100, H200)"
// The MFMA flash kernel is built by HIP builds and runs where the device has matrix cores: the HIP CPU
// Runtime (scripts/gpu/wave64.sh, under the instruction emulation; it reports gfx90a) or a CDNA chip;
// elsewhere its cases skip. (A gfx908 would run fp16 only; these cases ask for fp16's coverage.)
#define FP_SKIP_WITHOUT_MFMA_KERNELS(is_mfma) \
    if ((is_mfma) && !gpu::mfma_flash_available(DType::F16)) GTEST_SKIP() << "no MFMA kernels on this build or device"
// The dot2 flash kernel (fp16, v_dot2_f32_f16) likewise: HIP builds, on gfx906/CDNA/gfx1030 or the HIP CPU
// Runtime's emulation; skipped in CUDA builds. Its bf16 cases skip too: there is no bf16 dot2.
#define FP_SKIP_WITHOUT_DOT2_KERNEL(is_dot2, dtype)                                            \
    if ((is_dot2) && !gpu::dot2_flash_available())                                             \
        GTEST_SKIP() << "no dot2 flash kernel on this build or device (AMD-only: HIP builds)"; \
    if ((is_dot2) && (dtype) != DType::F16) GTEST_SKIP() << "the dot2 kernel is fp16 only (no bf16 dot2)"

}  // namespace flashport::test
