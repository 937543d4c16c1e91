#include "server/metrics.h"

#include <cstdio>

namespace flashport::server {
namespace {

std::string number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
}

void gauge(std::string& out, const char* name, const char* help, int64_t v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " gauge\n" + name + " " +
           std::to_string(v) + "\n";
}

void counter(std::string& out, const char* name, const char* help, int64_t v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n" + name + " " +
           std::to_string(v) + "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double seconds) {
    size_t i = 0;
    while (i < bounds_.size() && seconds > bounds_[i]) ++i;
    std::lock_guard<std::mutex> lock(mutex_);
    ++counts_[i];
    sum_ += seconds;
    ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
    std::lock_guard<std::mutex> lock(mutex_);
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
    uint64_t cumulative = 0;
    for (size_t i = 0; i < bounds_.size(); ++i) {
        cumulative += counts_[i];
        out += name + "_bucket{le=\"" + number(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
    }
    out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
    out += name + "_sum " + number(sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
}

// Buckets from 1 ms (a tiny model's step on a CPU) to 60 s (a long prompt queued behind others).
Metrics::Metrics()
    : ttft({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      inter_token({0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}) {}

void Metrics::count_request(int status) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++requests_[status];
}

std::string Metrics::render() const {
    std::string out;
    out +=
        "# HELP flashport_requests_total HTTP requests answered, by status\n"
        "# TYPE flashport_requests_total counter\n";
    {
        std::lock_guard<std::mutex> lock(mutex_);
        for (const auto& [status, n] : requests_)
            out += "flashport_requests_total{status=\"" + std::to_string(status) + "\"} " + std::to_string(n) + "\n";
    }
    counter(out, "flashport_prompt_tokens_total", "prompt tokens of admitted requests", prompt_tokens.load());
    counter(out, "flashport_generated_tokens_total", "tokens generated", generated_tokens.load());
    ttft.render(out, "flashport_time_to_first_token_seconds", "request arrival to its first token");
    inter_token.render(out, "flashport_inter_token_latency_seconds", "time between a stream's consecutive tokens");
    gauge(out, "flashport_queue_length", "requests waiting for a batch slot", queue_length.load());
    gauge(out, "flashport_running_sequences", "sequences in the running batch", running.load());
    gauge(out, "flashport_kv_blocks_used", "KV-cache blocks holding a sequence's tokens", kv_blocks_used.load());
    gauge(out, "flashport_kv_blocks_free", "KV-cache blocks free for new tokens", kv_blocks_free.load());
    return out;
}

}  // namespace flashport::server
