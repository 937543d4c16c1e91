// The server's figures in Prometheus text format (GET /metrics): requests by status, prompt and
// generated tokens, TTFT and inter-token latency histograms, and gauges the scheduler keeps current
// (queue length, running sequences, KV blocks used and free). Counters are atomics; histograms
// take a mutex, held for a few additions per token.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace flashport::server {

class Histogram {
public:
    explicit Histogram(std::vector<double> bounds);  // upper bounds in seconds, ascending
    void observe(double seconds);
    void render(std::string& out, const std::string& name, const std::string& help) const;

private:
    mutable std::mutex mutex_;
    std::vector<double> bounds_;
    std::vector<uint64_t> counts_;  // per bucket, not cumulative; the last is +Inf
    double sum_ = 0;
    uint64_t count_ = 0;
};

class Metrics {
public:
    Metrics();
    void count_request(int status);
    std::string render() const;

    std::atomic<int64_t> prompt_tokens{0}, generated_tokens{0};
    std::atomic<int64_t> queue_length{0}, running{0}, kv_blocks_used{0}, kv_blocks_free{0};
    Histogram ttft, inter_token;

private:
    mutable std::mutex mutex_;
    std::map<int, uint64_t> requests_;  // by HTTP status
};

}  // namespace flashport::server
