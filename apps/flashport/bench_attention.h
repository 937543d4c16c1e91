// `flashport bench attention`: naive against memory-efficient attention, one row per
// implementation (median ms, tokens/s, TFLOP/s, peak extra memory, error against float64), an
// optional sequence-length sweep with a plot, and JSON.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace flashport::app {

struct BenchAttentionOptions {
    std::string device = "auto";  // auto: the first GPU if there is one, else the CPU
    int64_t batch = 8, heads = 16, kv_heads = 0;  // kv_heads 0: same as heads
    int64_t q_len = 4096, kv_len = 4096, head_dim = 64;
    std::string dtype = "fp16";
    bool causal = false;
    std::vector<std::string> impls{"naive", "flash"};
    int iters = 5;
    std::vector<int64_t> sweep;
    std::string json_path, plot_path;
};

// Registers the subcommand and its options on `bench`; the callback runs the benchmark.
void add_bench_attention(CLI::App& bench);

// Runs with the given options, printing to stdout. Throws flashport::Error before any allocation
// when the request is invalid or cannot fit, and at the end when a requested implementation failed.
void run_bench_attention(BenchAttentionOptions opts, bool shape_given);

}  // namespace flashport::app
