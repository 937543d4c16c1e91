// The prefill GEMM on bf16 operands with AVX512-BF16 (vdpbf16ps: 16 lanes, each adding two bf16
// products to an fp32 sum), for CPUs that have it (Zen 4, Cooper Lake, Sapphire Rapids and later).
// Products of two bf16 values are exact in fp32, so with bf16 activations (the engine's, for a bf16
// model) the result differs from the fp32 path only in the order of the fp32 sums. matmul uses it
// only then (bf16 x and weight); fp32 activations would have to be rounded to bf16 first, which moves
// each product by up to 2^-8 of itself (tests/ops/test_gemm_bf16.cpp checks the kernel both ways).
// The instruction treats bf16 subnormals as zero and flushes subnormal sums to zero.
#pragma once

#include <cstdint>

namespace flashport::cpu {

// True when this CPU and build can run gemm_bf16 (avx512f, avx512bw and avx512_bf16).
bool has_gemm_bf16();

// y[t·ldy + n] = Σ_i x[t·ldx + i] · w[n·ldw + i]  for t < tokens, n < rows, i < k; x and w are bf16
// bit patterns, any k, any alignment; y's entries past `rows` are never touched. Single-threaded: the
// caller splits rows between threads (64 at a time fills one panel). Each 64-row panel of w is packed
// 256 of k at a time ([k/2][64][2], 32 KB of stack) and multiplied by every token in 6-token register
// blocks, so the packing is paid once per call; each output is one fp32 lane summed in k order.
void gemm_bf16(const uint16_t* x, int64_t ldx, int64_t tokens, const uint16_t* w, int64_t ldw, int64_t rows, int64_t k,
               float* y, int64_t ldy);

}  // namespace flashport::cpu
