// The op tests' helpers, now one include of tests/support (the generator, the seed rule, host tensors
// with NaN-padded rows, and the tolerance rule). Kept so tests/ops and tests/gpu spell
// `#include "ops_test_util.h"` as before; the names below are the ones they use.
#pragma once

#include <cstring>
#include <limits>
#include <sstream>

#include "../support/host_tensor.h"
#include "../support/rng.h"
#include "../support/seed.h"
#include "../support/tolerance.h"

namespace flashport::test {

inline const char* short_name(DType d) { return d == DType::F32 ? "f32" : d == DType::F16 ? "f16" : "bf16"; }

// Rounds a double as the kernel's fp32 arithmetic would, then to dtype.
inline double round_as(DType dtype, double v) { return double(round_to(dtype, float(v))); }

}  // namespace flashport::test
