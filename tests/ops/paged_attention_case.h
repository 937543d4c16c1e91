// paged_attention's one case list: the grids its tests run (the CPU's in
// tests/ops/test_paged_attention_cpu.cpp, the GPU's split-KV decode in
// tests/gpu/test_paged_attention_gpu.cpp and paged prefill in test_varlen_gpu.cpp, all made by
// paged_grid) and the named problems: the CPU test runs the small ones, the GPU test all of them, and
// the bench (bench/ops.cpp, `--op paged_attention`) times them; bench/gpu/decode_peers.py takes its
// decode problems' shapes from the bench's --list.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "attention_check.h"
#include "paged_attention_harness.h"

namespace flashport::test {

// Lengths × heads × q_len: every combination, with dtype (bf16, f16), head dim (dims[(n / dim_step)
// % size]), block size (16, 32, 16, 48), LSE (off every 5th), K/V interleaving (every 7th), causal
// (off every `causal_period`th) and the split count (splits[n % size]) rotating over the case index
// n, so each value meets every length and ratio.
struct PagedGridAxes {
    std::vector<std::vector<int32_t>> lens;
    std::vector<std::pair<int64_t, int64_t>> heads;  // (n_heads, n_kv_heads)
    std::vector<int64_t> q_lens;
    std::vector<int64_t> dims;
    int dim_step = 1;
    int causal_period = 6;
    std::vector<int> splits{0};
    Device device = Device::cpu();
};

inline std::vector<PagedCase> paged_grid(const PagedGridAxes& a) {
    std::vector<PagedCase> cases;
    size_t n = 0;
    for (const auto& l : a.lens)
        for (auto [h, kvh] : a.heads)
            for (int64_t q : a.q_lens) {
                PagedCase c;
                c.device = a.device;
                c.seq_lens = l, c.n_heads = h, c.n_kv_heads = kvh, c.q_len = q;
                c.dtype = n % 2 ? DType::F16 : DType::BF16;
                c.head_dim = a.dims[(n / size_t(a.dim_step)) % a.dims.size()];
                c.block_size = n % 4 == 3 ? 48 : n % 4 == 1 ? 32 : 16;
                c.lse = n % 5 != 4;
                c.interleaved_kv = n % 7 == 3;
                c.causal = int(n % size_t(a.causal_period)) != a.causal_period - 1;
                c.num_splits = a.splits[n % a.splits.size()];
                ++n;
                cases.push_back(c);
            }
    return cases;
}

// A problem: `batch` sequences of seq_len cached tokens (block size 16, a shuffled table), q_len new
// query tokens each (1: decode), causal, no LSE, Qwen2.5-7B's heads by default.
struct PagedProblem {
    std::string name;
    int64_t batch, seq_len, q_len;
    bool on_cpu;
    int64_t n_heads = 28, n_kv_heads = 4, head_dim = 128;
};

inline std::vector<PagedProblem> paged_attention_problems() {
    return {
        {"cpu_b4_2k", 4, 2048, 1, true},       // decode
        {"cpu_b2_1k_q16", 2, 1024, 16, true},  // a short chunk against its history
        // Issue 3's decode targets (bench/gpu/decode_peers.py): one long sequence (split-KV), and a
        // big batch (bandwidth).
        {"b1_32k", 1, 32768, 1, false},
        {"b64_8k", 64, 8192, 1, false},
        {"b8_4k_q128", 8, 4096, 128, false},  // chunked prefill (the paged prefill kernel)
    };
}

inline PagedCase paged_problem_case(const PagedProblem& p, DType dtype, Device device) {
    PagedCase c;
    c.seq_lens.assign(size_t(p.batch), int32_t(p.seq_len));
    c.q_len = p.q_len, c.n_heads = p.n_heads, c.n_kv_heads = p.n_kv_heads, c.head_dim = p.head_dim;
    c.dtype = dtype, c.device = device, c.lse = false;
    c.reference_budget = REFERENCE_BUDGET;
    return c;
}

// fp16 and bf16 only (the paged cache's dtypes): none for fp32.
inline std::vector<AttentionBenchCase> paged_attention_bench_cases(DType dtype) {
    std::vector<AttentionBenchCase> cases;
    if (dtype == DType::F32) return cases;
    for (const PagedProblem& p : paged_attention_problems()) {
        AttentionBenchCase b = bench_case_of("paged_attention", p, dtype);
        // q and out, and each cached token's K and V read once (the block table is noise).
        add_sequences(b, p.batch, p.q_len, p.seq_len, p.n_heads, p.n_kv_heads, p.head_dim, true);
        b.params = "{\"batch\": " + std::to_string(p.batch) + ", \"seq_len\": " + std::to_string(p.seq_len) +
                   ", \"q_len\": " + std::to_string(p.q_len) + ", " +
                   heads_json(p.n_heads, p.n_kv_heads, p.head_dim, true) + ", \"block_size\": 16}";
        b.run = [p, dtype](Device device, const CallTimer& timer) -> CaseResult {
            return run_paged_case(paged_problem_case(p, dtype, device), run_seed(), timer);
        };
        cases.push_back(std::move(b));
    }
    return cases;
}

}  // namespace flashport::test
