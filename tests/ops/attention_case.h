// attention's one case list. Its test grids are op_grid.h's (full and pairwise over axes that each
// backend's test names: tests/ops/test_attention_cpu.cpp, tests/gpu/test_attention_gpu.cpp); its
// named problems are below: the CPU test runs the small ones, the GPU test all of them, and the bench
// (bench/ops.cpp, `--op attention`) times them all on the GPU, the small ones on the CPU, after one
// check against the float64 reference (sampled rows: op_harness.cpp's rows_to_check).
#pragma once

#include <string>
#include <vector>

#include "attention_check.h"
#include "op_harness.h"

namespace flashport::test {

// A problem's shape: q [batch, q_len, n_heads, head_dim], k and v [batch, kv_len, n_kv_heads,
// head_dim], BLHD, the library's default scale and kernel (auto), no LSE. The dtype is the bench's.
struct AttentionProblem {
    std::string name;
    int64_t batch, q_len, kv_len, n_heads, n_kv_heads, head_dim;
    bool causal;
    bool on_cpu;  // small enough for the CPU test and the CPU bench
};

inline std::vector<AttentionProblem> attention_problems() {
    return {
        // CPU-sized: a prefill, a causal GQA prefill (Qwen2.5-7B's 28/4 heads) and a decode step.
        {"cpu_d64_1k", 1, 1024, 1024, 8, 8, 64, false, true},
        {"cpu_d128_1k_causal_gqa", 1, 1024, 1024, 28, 4, 128, true, true},
        {"cpu_decode_d128_4k", 4, 1, 4096, 28, 4, 128, true, true},
        // Launch-bound: the call's host cost, not the kernel, sets its time (bench/gpu/torch_peers.py
        // times the PyTorch op on it against this C++ call: the op's per-call overhead).
        {"launch_d64_128_causal", 1, 128, 128, 8, 8, 64, true, true},
        // The H200 problems of bench/gpu/sdpa_peers.py:
        // the seeds' 8 x 16 heads x 4k at d64 (sdpa_peers's seeds_fp16_d64_4k at --dtype f16), 8k at
        // d128 with and without causal masking, Stable Diffusion 1.5's d40 self-attention at 16k.
        {"seeds_d64_4k", 8, 4096, 4096, 16, 16, 64, false, false},
        {"d128_8k", 2, 8192, 8192, 16, 16, 128, false, false},
        {"d128_8k_causal", 2, 8192, 8192, 16, 16, 128, true, false},
        {"sd15_d40_16k", 2, 16384, 16384, 8, 8, 40, false, false},
    };
}

inline AttentionCase attention_problem_case(const AttentionProblem& p, DType dtype, Device device) {
    AttentionCase c;
    c.batch = p.batch, c.q_len = p.q_len, c.kv_len = p.kv_len, c.n_heads = p.n_heads, c.n_kv_heads = p.n_kv_heads;
    c.head_dim = p.head_dim, c.causal = p.causal, c.dtype = dtype, c.device = device;
    c.impl = AttentionImpl::AUTO;
    return c;
}

inline std::vector<AttentionBenchCase> attention_bench_cases(DType dtype) {
    std::vector<AttentionBenchCase> cases;
    for (const AttentionProblem& p : attention_problems()) {
        AttentionBenchCase b = bench_case_of("attention", p, dtype);
        add_sequences(b, p.batch, p.q_len, p.kv_len, p.n_heads, p.n_kv_heads, p.head_dim, p.causal);
        b.params = "{\"batch\": " + std::to_string(p.batch) + ", \"q_len\": " + std::to_string(p.q_len) +
                   ", \"kv_len\": " + std::to_string(p.kv_len) + ", " +
                   heads_json(p.n_heads, p.n_kv_heads, p.head_dim, p.causal) + "}";
        b.run = [p, dtype](Device device, const CallTimer& timer) {
            return run_case(attention_problem_case(p, dtype, device), run_seed(), {}, timer);
        };
        cases.push_back(std::move(b));
    }
    return cases;
}

}  // namespace flashport::test
