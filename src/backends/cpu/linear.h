// linear's float64 reference (flashport/linear.h): the truth its CPU and GPU kernels, its tests
// (tests/ops/linear_case.h) and its bench check against. Plain loops, no rounding anywhere.
#pragma once

#include <vector>

#include "flashport/linear.h"
#include "flashport/tensor.h"

namespace flashport::cpu {

struct LinearReference {
    std::vector<double> out;    // [tokens, cols] row-major: the chain norm → product → add / SwiGLU in float64
    std::vector<double> bound;  // [tokens, cols]: first-order error of an evaluation that rounds where linear rounds
};

// x [tokens, in], weight [rows, in] and the optional tensors of p, on the host, any row strides;
// p.residual is read as it is now (call before an in-place run overwrites it). `u` is the unit
// roundoff of the evaluation being judged (2^-8 bf16, 2^-11 fp16, 2^-24 fp32), which scales `bound`:
//   h = round(gamma · round(x · inv))          |Δh_i| <= 2u |h_i|
//   y = round(Σ h_i w_i + b)                   |Δy| <= 2u Σ|h_i w_i| (norm only) + 1e-5 Σ|h_i w_i| + u |y|
//   residual: out = round(r + y)               |Δout| <= |Δy| + u |out|
//   swiglu: out = round(round(silu(g)) · v)    |Δout| <= 1.1 |Δg| |v| + |silu(g)| |Δv| + 2u |out|
// (1e-5: fp32 sums over up to ~20k terms; 1.1 > |silu'|).
LinearReference linear_reference(const TensorView& x, const TensorView& weight, const LinearParams& p, double u);

}  // namespace flashport::cpu
