// Programmatic dependent launch (NVIDIA sm_90+), on or off: host-only, so tests and tools that only
// flip the switch need no CUDA headers. What it does and the contract its kernels keep: common.cuh
// ("Dependent launches") and runtime.h's launch_dependent.
#pragma once

namespace flashport::gpu {

// Whether launch_dependent overlaps kernels on the current device: NVIDIA sm_90+, unless
// FLASHPORT_GPU_PDL=0 or set_dependent_launches(false) turned it off. Always false on HIP.
bool dependent_launches();
void set_dependent_launches(bool on);

}  // namespace flashport::gpu
