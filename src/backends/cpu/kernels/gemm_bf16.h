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
// bit patterns, any k (the tail of 32 is masked), any alignment. Single-threaded: the caller splits
// rows between threads. Blocks of 4 tokens × 4 rows keep 16 fp32 accumulators in registers; the w
// rows (rows·k·2 bytes, sized by the caller to stay in L2) are re-read from cache for every 4 tokens.
void gemm_bf16(const uint16_t* x, int64_t ldx, int64_t tokens, const uint16_t* w, int64_t ldw, int64_t rows, int64_t k,
               float* y, int64_t ldy);

}  // namespace flashport::cpu
