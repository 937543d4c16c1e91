// The hooks the tracked allocator calls for GPU memory. Exactly one implementation is linked:
// core/device_none.cpp in a CPU-only build, backends/gpu/runtime.cu in a CUDA or HIP build.
#pragma once

#include <cstddef>

namespace flashport::backend {

void* gpu_alloc(size_t bytes, int device_index);  // throws flashport::Error on failure
void gpu_free(void* ptr, int device_index);
size_t gpu_free_bytes(int device_index);  // the driver's free memory (cudaMemGetInfo / hipMemGetInfo)

}  // namespace flashport::backend
