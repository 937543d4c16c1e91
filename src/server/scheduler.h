// Continuous batching: one thread owns the Engine (which is not thread-safe) and runs step() in a
// loop; HTTP threads submit Jobs and read their tokens from each Job's Channel.
//
// At each step boundary the scheduler
//   - drops cancelled jobs (a client that disconnected), releasing their KV blocks;
//   - admits queued jobs while fewer than `parallel` run and the KV pool can hold each admitted
//     job's worst case (prompt + max_tokens), so a running sequence never finds the pool full;
//   - runs one engine step: decode rows for running streams plus at most max_step_tokens of prompt
//     (a long prompt is prefilled in chunks over several steps), so a stream's inter-token latency
//     is bounded by one step of max_step_tokens tokens, however long the other prompts are.
// A job that could never fit (prompt + max_tokens over the context or the whole pool) is refused by
// check() before it is queued; a full queue refuses with QUEUE_FULL (a 503 with Retry-After).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "engine/engine.h"
#include "engine/generate.h"
#include "server/channel.h"
#include "server/metrics.h"
#include "server/outbox.h"

namespace flashport::server {

using Clock = std::chrono::steady_clock;

struct Job {
    std::vector<int32_t> prompt;
    engine::GenerateOptions options;  // max_new_tokens 0 only with echo
    int top_logprobs = -1;            // -1: none
    // The prompt's text leads the reply; with logprobs each prompt token comes with its logprob (the
    // first with none), from the engine's logits of every prompt position (Engine's all_logits).
    bool echo = false;
    // OpenAI's logit adjustments (openai_request.h): the job samples on the host, from its logits with
    // these applied (logprobs stay the model's own).
    std::vector<std::pair<int32_t, float>> logit_bias;
    float presence_penalty = 0, frequency_penalty = 0;
    // JSON mode: each token is chosen among those that continue one JSON object, and the reply ends when
    // the object closes (json_constraint.h); sampled on the host, from the adjusted logits.
    bool json_object = false;
    bool adjusts_logits() const {
        return !logit_bias.empty() || presence_penalty != 0 || frequency_penalty != 0 || json_object;
    }
    Channel channel;
    std::atomic<bool> cancelled{false};  // set by the HTTP thread when its client is gone
    Clock::time_point arrived = Clock::now();
};

struct SchedulerOptions {
    int64_t parallel = 4;    // sequences decoded together at most
    int64_t max_queue = 64;  // jobs waiting for a slot at most
};

class Scheduler {
public:
    Scheduler(const engine::Model& model, const tokenizer::Tokenizer* tokenizer, const engine::EngineOptions& engine,
              const SchedulerOptions& options, Metrics& metrics);
    ~Scheduler();  // stop()s
    Scheduler(const Scheduler&) = delete;
    Scheduler& operator=(const Scheduler&) = delete;

    // Throws ApiError 400 when the job could never run (its worst case exceeds the KV pool).
    void check(const Job& job) const;
    enum class Submit { QUEUED, QUEUE_FULL, STOPPING };
    Submit submit(std::shared_ptr<Job> job) { return submit(std::vector<std::shared_ptr<Job>>{std::move(job)}); }
    // Several jobs (one request's prompts) queue together or not at all.
    Submit submit(std::vector<std::shared_ptr<Job>> jobs);
    // Jobs that can be running or waiting at once: a request with more prompts could never queue.
    int64_t capacity() const { return options_.parallel + options_.max_queue; }
    // Graceful shutdown: refuses new jobs, ends queued ones with an error, lets running ones finish
    // for up to `drain_s` seconds, ends the rest with an error, and joins the thread.
    void stop(double drain_s = 0);

    int64_t pool_blocks() const { return pool_blocks_; }

private:
    struct Running;
    void loop();
    void admit(std::vector<std::unique_ptr<Running>>& running);
    void finish(Running& r, const std::string& reason, const std::string& error = "");
    void on_logits(Running& r, const engine::SeqLogits& logits, engine::StepOutput output);
    void echo_prompt_start(Running& r);
    void score_prompt_rows(Running& r, const engine::SeqLogits& logits);
    int64_t blocks_for(const Job& job) const;
    void publish_gauges(size_t running);
    // Queues an event for the job's HTTP thread; delivered after the step's flush (outbox.h).
    void emit(const std::shared_ptr<Job>& job, Event e) {
        outbox_.add(std::shared_ptr<Channel>(job, &job->channel), std::move(e));
    }

    engine::Engine engine_;
    const tokenizer::Tokenizer* tokenizer_;
    SchedulerOptions options_;
    Metrics& metrics_;
    int64_t block_size_, pool_blocks_;       // pool_blocks_ 0: the pool grows as needed
    int64_t reserved_blocks_ = 0;            // the worst cases of the running jobs (scheduler thread only)
    std::atomic<int64_t> running_count_{0};  // for submit(): slots free now

    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<std::shared_ptr<Job>> queue_;
    bool stopping_ = false;
    Clock::time_point drain_deadline_;
    Outbox outbox_;  // written by the scheduler thread only; delivers on its own thread
    std::thread thread_;
};

}  // namespace flashport::server
