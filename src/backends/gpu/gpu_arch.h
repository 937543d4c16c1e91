// What a device's architecture offers the kernel choice, as plain C++ (the dispatchers and the tests
// read it without GPU headers). Filled per device by runtime.cu (DeviceInfo).
#pragma once

#include <string_view>

#include "flashport/dtype.h"

namespace flashport::gpu {

// AMD matrix cores (MFMA) as the kernels use them, from the arch name HIP reports (gcnArchName, e.g.
// "gfx90a:sramecc+:xnack-"): gfx908 has the f16 MFMA but not the bf16 `_1k` forms mfma.cuh uses, so
// F16 only; gfx90a and gfx940/941/942 have both; NVIDIA, gfx906 and RDNA have none. The HIP CPU
// Runtime reports "gfx90a" (vendor/hip_cpu.h): it emulates both (vendor/hip_cpu_mfma.h), so the
// emulator selects kernels as a gfx90a would.
enum class MatrixCores : unsigned char { NONE, F16, F16_BF16 };

inline MatrixCores matrix_cores_of_arch(std::string_view gcn_arch) {
    const std::string_view name = gcn_arch.substr(0, gcn_arch.find(':'));  // drop the feature flags
    if (name == "gfx908") return MatrixCores::F16;
    if (name == "gfx90a" || name == "gfx940" || name == "gfx941" || name == "gfx942") return MatrixCores::F16_BF16;
    return MatrixCores::NONE;
}

// v_dot2_f32_f16 (two fp16 products summed into fp32 per lane), which the dot2 flash kernel is built on:
// gfx906 (the MI50: its fast fp16 path, having no matrix cores), the CDNA chips (which keep the dot2
// instructions; MFMA serves them first) and gfx1030 (RDNA2; HIP 5.2 emits v_dot2c_f32_f16 there). Other
// RDNA chips are not compiled by this build and get none. The HIP CPU Runtime ("gfx90a") emulates it.
inline bool dot2_f16_of_arch(std::string_view gcn_arch) {
    const std::string_view name = gcn_arch.substr(0, gcn_arch.find(':'));
    return name == "gfx906" || name == "gfx1030" || matrix_cores_of_arch(name) != MatrixCores::NONE;
}

// Whether the matrix cores multiply `dtype` inputs (the MFMA flash and GEMM kernels' condition; the
// kernels take 16-bit inputs only).
inline bool matrix_cores_cover(MatrixCores cores, DType dtype) {
    if (dtype == DType::F16) return cores != MatrixCores::NONE;
    return dtype == DType::BF16 && cores == MatrixCores::F16_BF16;  // never fp32 inputs
}

}  // namespace flashport::gpu
