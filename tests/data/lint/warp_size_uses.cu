// Fixture for tools/check_warp_size.py (tests/python/CMakeLists.txt: warp_size_lint_fixture). Lines
// marked BAD must be reported, and nothing else: 5 problems.
#include "backends/gpu/common.cuh"

namespace flashport::gpu {

constexpr int WARPS = 4;
constexpr int THREADS = WARPS * WARP_SIZE;  // BAD: the GEMV bug's shape, 128 on the host, 256 on gfx9
constexpr int FIXED_THREADS = 128;          // fine: WARP_SIZE in a comment does not count

template <int W>
struct Tile {
    static constexpr int LANES = W * WARP_SIZE;  // BAD: a host-visible member
    __device__ int lane() const { return int(threadIdx.x) % WARP_SIZE; }  // fine: a device body
};

__device__ __forceinline__ float reduce(float x) {
    const auto f = [&](int o) { return o < WARP_SIZE ? x : 0.0f; };  // fine: a lambda in device code
    return f(1);
}

template <int N>
__global__ void __launch_bounds__(N * WARP_SIZE) kernel(float* out) {  // BAD: launch bounds
    constexpr int NW = FIXED_THREADS / WARP_SIZE;                       // fine: derived in the body
    __shared__ float s[NW];
    s[threadIdx.x / WARP_SIZE] = 0.0f;
    out[0] = s[0] + float(warpSize);  // BAD: the run-time warpSize
}

void launch(float* out, cudaStream_t stream) {
    launch_kernel(kernel<4>, 1, 4 * WARP_SIZE, 0, stream, out);  // BAD: a launcher
    const char* text = "WARP_SIZE in a string does not count";
    (void)text;
}

}  // namespace flashport::gpu
