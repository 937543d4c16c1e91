// sample_uniform's generator (flashport/sample.h), in one text for the host and the GPU kernels, so
// a (seed, counter) pair draws the same number everywhere.
#pragma once

#include <cstdint>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define FP_HOST_DEVICE __host__ __device__
#else
#define FP_HOST_DEVICE
#endif

namespace flashport::detail {

// splitmix64's output function (Steele, Lea & Flood 2014), a bijection of 64-bit words.
FP_HOST_DEVICE inline uint64_t splitmix64_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Output `counter` of splitmix64 started at state splitmix64_mix(seed): a seed's draws are one
// splitmix64 stream, and different seeds start at unrelated points of it. 53 bits in [0, 1).
FP_HOST_DEVICE inline double counter_uniform(uint64_t seed, int64_t counter) {
    constexpr uint64_t GAMMA = 0x9e3779b97f4a7c15ull;
    const uint64_t state = splitmix64_mix(seed + GAMMA) + (uint64_t(counter) + 1) * GAMMA;
    return double(splitmix64_mix(state) >> 11) * 0x1.0p-53;
}

}  // namespace flashport::detail
