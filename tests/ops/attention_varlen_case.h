// attention_varlen's one case list: the grid its CPU and GPU tests run (varlen_grid:
// tests/ops/test_varlen_cpu.cpp, tests/gpu/test_varlen_gpu.cpp) and the named packed-batch problems:
// the CPU test runs the small ones, the GPU test all of them, and the bench (bench/ops.cpp,
// `--op attention_varlen`) times them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "attention_check.h"
#include "varlen_harness.h"

namespace flashport::test {

using VarlenBatch = std::vector<std::pair<int32_t, int32_t>>;  // (q_len, kv_len) per sequence

// Every batch with every (n_heads, n_kv_heads), the other settings cycling over the cases: head dims in
// turn, fp16/bf16, causal (2 in 3), a left window of 50 (1 in 5), LSE (3 in 4), spare rows before and
// after, max_seqlen_q 17 above the longest (1 in 4).
inline std::vector<VarlenCase> varlen_cases(const std::vector<VarlenBatch>& batches,
                                            const std::vector<std::pair<int64_t, int64_t>>& heads,
                                            const std::vector<int64_t>& dims, Device device) {
    std::vector<VarlenCase> cases;
    size_t n = 0;
    for (const auto& seqs : batches)
        for (auto [h, kvh] : heads) {
            VarlenCase c;
            c.seqs = seqs, c.n_heads = h, c.n_kv_heads = kvh;
            c.head_dim = dims[n % dims.size()];
            c.dtype = n % 2 ? DType::F16 : DType::BF16;
            c.causal = n % 3 != 2;
            c.window_left = n % 5 == 4 ? 50 : -1;
            c.lse = n % 4 != 3;
            c.lead = n % 3 == 1 ? 3 : 0;
            c.tail = n % 2 ? 2 : 0;
            c.extra_max_q = n % 4 == 1 ? 17 : 0;
            c.device = device;
            ++n;
            cases.push_back(c);
        }
    return cases;
}

// The grid both backends run: odd lengths (1, 7, 97, 1023, 1025), empty sequences, q < kv (chunked
// prefill), q > kv, GQA 1/2/7, the flash head dims, causal, window and full, fp16 and bf16.
inline std::vector<VarlenCase> varlen_grid(Device device) {
    const std::vector<VarlenBatch> batches = {
        {{1, 1}},
        {{7, 7}, {97, 97}, {1, 1}},
        {{97, 1025}, {0, 5}, {1023, 1023}},
        {{1025, 1025}, {7, 300}},
        {{5, 0}, {64, 64}, {33, 129}},
        {{300, 40}, {128, 128}},
    };
    return varlen_cases(batches, {{2, 2}, {4, 2}, {7, 1}}, {40, 64, 80, 96, 128, 160, 256}, device);
}

// A problem: packed sequences of (q_len, kv_len), causal, no LSE, no spare rows.
struct VarlenProblem {
    std::string name;
    std::vector<std::pair<int32_t, int32_t>> seqs;
    int64_t n_heads, n_kv_heads, head_dim;
    bool on_cpu;
};

inline std::vector<VarlenProblem> attention_varlen_problems() {
    const std::vector<std::pair<int32_t, int32_t>> eight_1k(8, {1024, 1024}), four_chunks(4, {512, 8192});
    const std::vector<std::pair<int32_t, int32_t>> decode_mixed = {{1, 300},  {1, 512},  {1, 1024},  {1, 2048},
                                                                   {1, 4096}, {1, 8192}, {1, 16384}, {1, 32768}};
    const std::vector<std::pair<int32_t, int32_t>> verify(4, {4, 8192}), decode_256(32, {1, 256});
    return {
        {"cpu_mixed", {{256, 256}, {97, 97}, {33, 33}, {512, 512}}, 8, 2, 64, true},
        {"cpu_chunks", {{64, 1024}, {128, 512}}, 8, 2, 128, true},
        // A server's prefill batches at Qwen2.5-7B's heads: equal prompts, mixed prompts (one long one
        // dominating), and chunked prefill (512 new tokens against 8k of history each).
        {"prefill_8x1k", eight_1k, 28, 4, 128, false},
        {"mixed_4k", {{4096, 4096}, {2048, 2048}, {1024, 1024}, {512, 512}, {300, 300}, {77, 77}}, 28, 4, 128, false},
        {"chunks_q512_kv8k", four_chunks, 28, 4, 128, false},
        // A server's decode steps (split-KV's varlen route): one token per sequence against mixed
        // histories; 4 draft tokens verified per sequence; and split-KV's least mean length (256).
        {"decode_b8_mixed", decode_mixed, 28, 4, 128, false},
        {"verify_q4_b4_8k", verify, 28, 4, 128, false},
        {"decode_b32_256", decode_256, 28, 4, 128, false},
    };
}

inline VarlenCase varlen_problem_case(const VarlenProblem& p, DType dtype, Device device) {
    VarlenCase c;
    c.seqs = p.seqs, c.n_heads = p.n_heads, c.n_kv_heads = p.n_kv_heads, c.head_dim = p.head_dim;
    c.dtype = dtype, c.device = device, c.causal = true, c.lse = false;
    c.reference_budget = REFERENCE_BUDGET;
    return c;
}

// fp16 and bf16 only (the harness stores 16-bit values; the GPU kernels take nothing else).
inline std::vector<AttentionBenchCase> attention_varlen_bench_cases(DType dtype) {
    std::vector<AttentionBenchCase> cases;
    if (dtype == DType::F32) return cases;
    for (const VarlenProblem& p : attention_varlen_problems()) {
        AttentionBenchCase b = bench_case_of("attention_varlen", p, dtype);
        std::string lens;
        for (auto [lq, lk] : p.seqs) {
            add_sequences(b, 1, lq, lk, p.n_heads, p.n_kv_heads, p.head_dim, true);
            lens += (lens.empty() ? "[" : ", [") + std::to_string(lq) + ", " + std::to_string(lk) + "]";
        }
        b.params = "{\"seqs\": [" + lens + "], " + heads_json(p.n_heads, p.n_kv_heads, p.head_dim, true) + "}";
        b.run = [p, dtype](Device device, const CallTimer& timer) {
            return run_varlen_case(varlen_problem_case(p, dtype, device), run_seed(), timer);
        };
        cases.push_back(std::move(b));
    }
    return cases;
}

}  // namespace flashport::test
