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

// Whether the matrix cores multiply `dtype` inputs (the MFMA flash and GEMM kernels' condition; the
// kernels take 16-bit inputs only).
inline bool matrix_cores_cover(MatrixCores cores, DType dtype) {
    if (dtype == DType::F16) return cores != MatrixCores::NONE;
    return dtype == DType::BF16 && cores == MatrixCores::F16_BF16;  // never fp32 inputs
}

}  // namespace flashport::gpu
