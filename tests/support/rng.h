// The one random-number generator of the tests and benchmarks: splitmix64 (Steele, Lea and Flood's
// mixer), with uniform, normal and below on top. Our own rather than <random>'s distributions, whose
// algorithms are up to the standard library: a seed gives the same inputs on every machine and
// compiler, the GPU host included. Header-only and free of gtest, so bench drivers use it too.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

namespace flashport::test {

// One step of splitmix64: advances `state` and returns 64 well-mixed bits.
inline uint64_t splitmix64(uint64_t& state) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// FNV-1a of a string: how a case's name becomes part of its seed (seed.h).
inline uint64_t fnv1a(std::string_view s, uint64_t h = 0xcbf29ce484222325ull) {
    for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ull;
    return h;
}

class Rng {
public:
    explicit Rng(uint64_t seed) : state_(seed) {}
    uint64_t next() { return splitmix64(state_); }
    double uniform() { return (double(next() >> 11) + 0.5) * 0x1.0p-53; }  // in (0, 1), never 0 or 1
    double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
    // Box–Muller, one value per call (no cached spare: the sequence depends only on the call count).
    double normal() {
        const double r = std::sqrt(-2.0 * std::log(uniform())), t = 2.0 * M_PI * uniform();
        return r * std::cos(t);
    }
    int64_t below(int64_t n) { return int64_t(next() % uint64_t(n)); }  // in [0, n); n > 0

private:
    uint64_t state_;
};

}  // namespace flashport::test
