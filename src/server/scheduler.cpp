#include "server/scheduler.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <unordered_map>

#include "flashport/error.h"
#include "flashport/tokenizer.h"
#include "server/api_error.h"
#include "server/json_constraint.h"

namespace flashport::server {

// One admitted job: its engine sequence and the per-sequence generation state that generate.cpp
// keeps on its stack for a single sequence.
struct Scheduler::Running {
    Running(std::shared_ptr<Job> j, engine::SeqId s, int64_t blocks)
        : job(std::move(j)),
          seq(s),
          sampler(job->options.sampling),
          stopper(job->options.stop),
          context(job->prompt),
          reserved(blocks) {}
    std::shared_ptr<Job> job;
    engine::SeqId seq;
    engine::Sampler sampler;
    engine::Stopper stopper;
    std::optional<tokenizer::StreamDecoder> decoder;
    std::optional<tokenizer::StreamDecoder> prompt_decoder;  // an echoed prompt's text, token by token
    bool scoring_prompt = false;   // echo with logprobs: prompt rows still to come
    std::vector<int32_t> context;  // prompt + generated: the repetition penalty's "seen" set
    int64_t reserved;
    int64_t generated = 0;
    Clock::time_point last;
    bool done = false;

    // Greedy with nothing that needs the logits on the host (no repetition penalty, no logprobs):
    // its token can be the argmax taken where the model runs (Engine::step's GREEDY), as generate does.
    bool device_greedy() const {
        const engine::SamplingParams& s = job->options.sampling;
        return s.greedy() && s.repetition_penalty == 1.0f && job->top_logprobs < 0 && !job->adjusts_logits();
    }
    std::unordered_map<int32_t, int> generated_counts;  // presence / frequency penalties' counts
    std::vector<float> adjusted;                         // the logits with logit_bias and the penalties
    std::optional<JsonConstraint> json;                  // JSON mode's state
    // A copy of the logits with the job's adjustments, to sample from.
    std::span<float> adjusted_logits(std::span<const float> logits) {
        adjusted.assign(logits.begin(), logits.end());
        for (const auto& [id, bias] : job->logit_bias) adjusted[size_t(id)] += bias;
        for (const auto& [id, count] : generated_counts)
            adjusted[size_t(id)] -= job->presence_penalty + job->frequency_penalty * float(count);
        return adjusted;
    }
    // The next token on the host: sampled from the model's logits or the adjusted copy; in JSON mode,
    // among the tokens that continue the document (-1: none can).
    int32_t sample(std::span<const float> logits) {
        if (json) return json->choose(sampler, adjusted_logits(logits), context);
        return sampler.sample(job->adjusts_logits() ? adjusted_logits(logits) : logits, context);
    }
    // Sampled (or greedy with a penalty) with no logprobs, on a GPU engine: its settings were given to
    // Engine::set_sampling at admission and its tokens are drawn where the model runs (SAMPLED), as
    // generate does. In a LOGITS step (another sequence wants logprobs) it falls back to the host
    // sampler, so the seed gives the same tokens only while no such sequence shares its steps.
    bool device_sampled = false;
    bool on_device() const { return device_greedy() || device_sampled; }
};

Scheduler::Scheduler(const engine::Model& model, const tokenizer::Tokenizer* tokenizer,
                     const engine::EngineOptions& engine, const SchedulerOptions& options, Metrics& metrics)
    : engine_(model, engine),
      tokenizer_(tokenizer),
      options_(options),
      metrics_(metrics),
      block_size_(engine.block_size),
      pool_blocks_(engine_.cache().capacity_tokens() / engine.block_size) {
    publish_gauges(0);
    thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
    stop();
}

int64_t Scheduler::blocks_for(const Job& job) const {
    const int64_t tokens =
        std::min<int64_t>(int64_t(job.prompt.size()) + job.options.stop.max_new_tokens, engine_.context());
    return (tokens + block_size_ - 1) / block_size_;
}

void Scheduler::check(const Job& job) const {
    if (pool_blocks_ > 0 && blocks_for(job) > pool_blocks_)
        throw ApiError(400,
                       "the request needs up to " + std::to_string(blocks_for(job) * block_size_) +
                           " KV-cache tokens (prompt " + std::to_string(job.prompt.size()) + " + max_tokens " +
                           std::to_string(job.options.stop.max_new_tokens) + "), more than the whole pool holds (" +
                           std::to_string(pool_blocks_ * block_size_) + " tokens: --ctx / --kv-memory)",
                       "invalid_request_error", "max_tokens", "context_length_exceeded");
}

Scheduler::Submit Scheduler::submit(std::vector<std::shared_ptr<Job>> jobs) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stopping_) return Submit::STOPPING;
        // Jobs about to take a free slot are not waiting: they do not count against max_queue (so
        // --max-queue 0 still serves up to --parallel requests at once).
        const int64_t free_slots = std::max<int64_t>(0, options_.parallel - running_count_.load());
        if (int64_t(queue_.size() + jobs.size()) > options_.max_queue + free_slots) return Submit::QUEUE_FULL;
        for (std::shared_ptr<Job>& job : jobs) queue_.push_back(std::move(job));
        metrics_.queue_length = int64_t(queue_.size());
    }
    cv_.notify_one();
    return Submit::QUEUED;
}

void Scheduler::stop(double drain_s) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!stopping_) {
            stopping_ = true;
            drain_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                 std::chrono::duration<double>(std::max(0.0, drain_s)));
        }
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    outbox_.drain();  // every job's last event is in its channel when stop() returns
}

void Scheduler::publish_gauges(size_t running) {
    running_count_ = int64_t(running);
    metrics_.running = int64_t(running);
    const engine::KvCache& cache = engine_.cache();
    metrics_.kv_blocks_used = cache.used_blocks();
    // A pool that grows on demand has no fixed free count beyond its current free list.
    metrics_.kv_blocks_free = pool_blocks_ > 0 ? pool_blocks_ - cache.used_blocks() : cache.free_blocks();
}

void Scheduler::finish(Running& r, const std::string& reason, const std::string& error) {
    if (r.done) return;
    r.done = true;
    if (error.empty() && reason != "stop_string") {  // release what was held back for a stop string
        std::string tail = r.stopper.finish();
        if (r.decoder) tail += r.decoder->finish();
        if (!tail.empty()) emit(r.job, Event{false, tail, std::nullopt, "", "", 0, 0});
    }
    Event end;
    end.done = true;
    end.finish_reason = reason == "stop_string" ? "stop" : reason;
    end.error = error;
    end.prompt_tokens = int64_t(r.job->prompt.size());
    end.completion_tokens = r.generated;
    emit(r.job, std::move(end));
    if (engine_.contains(r.seq)) engine_.release(r.seq);
    reserved_blocks_ -= r.reserved;
}

namespace {

// log-softmax of the raw logits (OpenAI's logprobs are of the model's distribution, before
// sampling filters), the chosen token's value and the `top` best.
TokenLogprob logprobs_of(std::span<const float> logits, int32_t token, int top) {
    float max = -INFINITY;
    for (float v : logits) max = std::max(max, v);
    double sum = 0;
    for (float v : logits) sum += std::exp(double(v) - max);
    const float log_z = float(max + std::log(sum));
    TokenLogprob lp;
    lp.token = token;
    lp.logprob = logits[size_t(token)] - log_z;
    if (top > 0) {
        std::vector<int32_t> ids(logits.size());
        for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i);
        const size_t k = std::min(size_t(top), ids.size());
        std::partial_sort(ids.begin(), ids.begin() + long(k), ids.end(),
                          [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)]; });
        for (size_t i = 0; i < k; ++i) lp.top.emplace_back(ids[i], logits[size_t(ids[i])] - log_z);
    }
    return lp;
}

}  // namespace

// An echoed prompt's opening: its whole text (no logprobs asked), or its first token, which nothing
// predicts (a null logprob); score_prompt_rows brings the others as the prefill's rows come back.
void Scheduler::echo_prompt_start(Running& r) {
    const std::vector<int32_t>& prompt = r.job->prompt;
    const auto piece = [&](int32_t id) {
        return r.prompt_decoder && size_t(id) < tokenizer_->vocab_size() ? r.prompt_decoder->push(id) : std::string();
    };
    if (tokenizer_) r.prompt_decoder.emplace(*tokenizer_);
    if (!r.scoring_prompt) {
        std::string text;
        for (int32_t id : prompt) text += piece(id);
        if (r.prompt_decoder) text += r.prompt_decoder->finish();
        if (!text.empty()) emit(r.job, Event{false, text, std::nullopt, "", "", 0, 0});
        return;
    }
    TokenLogprob first;
    first.token = prompt[0];
    first.scored = false;
    emit(r.job, Event{false, piece(prompt[0]), first, "", "", 0, 0});
}

// Rows of an echoed prompt under logprobs: row i of the step predicts prompt token position + i + 1.
// The prompt's last row predicts the first generated token, which on_logits samples.
void Scheduler::score_prompt_rows(Running& r, const engine::SeqLogits& logits) {
    const std::vector<int32_t>& prompt = r.job->prompt;
    for (int64_t i = 0; i < logits.rows; ++i) {
        const int64_t target = logits.position + i + 1;
        if (target >= int64_t(prompt.size())) break;
        const int32_t id = prompt[size_t(target)];
        const bool known = r.prompt_decoder && size_t(id) < tokenizer_->vocab_size();
        emit(r.job, Event{false, known ? r.prompt_decoder->push(id) : std::string(),
                          logprobs_of(logits.row(i), id, r.job->top_logprobs), "", "", 0, 0});
    }
    if (logits.position + logits.rows < int64_t(prompt.size())) return;  // more of the prompt to come
    r.scoring_prompt = false;
    if (r.prompt_decoder) {
        const std::string tail = r.prompt_decoder->finish();
        if (!tail.empty()) emit(r.job, Event{false, tail, std::nullopt, "", "", 0, 0});
    }
}

void Scheduler::on_logits(Running& r, const engine::SeqLogits& logits, engine::StepOutput output) {
    if (r.scoring_prompt) {
        score_prompt_rows(r, logits);
        if (r.scoring_prompt) return;
        if (r.job->options.stop.max_new_tokens == 0) return finish(r, "length");  // scored, nothing to generate
    }
    const int32_t token = output != engine::StepOutput::LOGITS ? logits.token : r.sample(logits.last());
    if (token < 0) return finish(r, "stop", "JSON mode: no token of the vocabulary continues the reply as JSON");
    if (r.json) r.json->accept(token);
    if (r.job->presence_penalty != 0 || r.job->frequency_penalty != 0) ++r.generated_counts[token];
    const Clock::time_point now = Clock::now();
    Event e;
    if (r.job->top_logprobs >= 0) e.logprob = logprobs_of(logits.last(), token, r.job->top_logprobs);
    r.context.push_back(token);
    ++r.generated;
    ++metrics_.generated_tokens;
    if (r.generated == 1)
        metrics_.ttft.observe(std::chrono::duration<double>(now - r.job->arrived).count());
    else
        metrics_.inter_token.observe(std::chrono::duration<double>(now - r.last).count());
    r.last = now;
    // Ids past the tokenizer's vocabulary (a padded embedding table) decode to nothing.
    const bool known = r.decoder && size_t(token) < tokenizer_->vocab_size();
    const engine::Stopper::Step step = r.stopper.on_token(token, known ? r.decoder->push(token) : std::string());
    e.text = step.text;
    if (!e.text.empty() || e.logprob) emit(r.job, std::move(e));
    if (step.reason == engine::StopReason::STOP_STRING) return finish(r, "stop_string");
    if (step.reason == engine::StopReason::EOS || (r.json && r.json->complete())) return finish(r, "stop");
    if (step.reason == engine::StopReason::MAX_TOKENS || int64_t(r.context.size()) >= engine_.context())
        return finish(r, "length");
    engine_.append(r.seq, token);
}

void Scheduler::admit(std::vector<std::unique_ptr<Running>>& running) {
    std::lock_guard<std::mutex> lock(mutex_);
    while (!queue_.empty() && int64_t(running.size()) < options_.parallel) {
        std::shared_ptr<Job>& job = queue_.front();
        if (job->cancelled) {  // its client left while it waited
            queue_.pop_front();
            continue;
        }
        const int64_t blocks = blocks_for(*job);
        if (pool_blocks_ > 0 && reserved_blocks_ + blocks > pool_blocks_) break;  // first come, first served
        const bool score_prompt = job->echo && job->top_logprobs >= 0;
        if (job->echo && !score_prompt && job->options.stop.max_new_tokens == 0) {
            // The prompt repeated and nothing generated: no engine work at all.
            Running echo_only(job, -1, 0);
            echo_prompt_start(echo_only);
            Event end;
            end.done = true;
            end.finish_reason = "length";
            end.prompt_tokens = int64_t(job->prompt.size());
            emit(job, std::move(end));
            queue_.pop_front();
            continue;
        }
        engine::SeqId seq = -1;
        try {
            seq = engine_.add_sequence(job->prompt, /*all_logits=*/score_prompt);
        } catch (const std::exception& e) {  // the engine refused it: that job fails, the server goes on
            emit(job, Event{true, "", std::nullopt, "", std::string("engine error: ") + e.what()});
            queue_.pop_front();
            continue;
        }
        auto r = std::make_unique<Running>(job, seq, blocks);
        if (tokenizer_) r->decoder.emplace(*tokenizer_);
        if (job->json_object && tokenizer_) r->json.emplace(*tokenizer_);
        r->scoring_prompt = score_prompt;
        if (job->echo) echo_prompt_start(*r);
        if (!r->device_greedy() && job->top_logprobs < 0 && !job->adjusts_logits() &&
            !engine_.model().device().is_cpu()) {
            try {
                engine_.set_sampling(seq, job->options.sampling);
                r->device_sampled = true;
            } catch (const std::exception& e) {  // settings the request checks let through: that job fails
                engine_.release(seq);
                emit(job, Event{true, "", std::nullopt, "", std::string("engine error: ") + e.what()});
                queue_.pop_front();
                continue;
            }
        }
        reserved_blocks_ += blocks;
        metrics_.prompt_tokens += int64_t(job->prompt.size());
        running.push_back(std::move(r));
        queue_.pop_front();
    }
    metrics_.queue_length = int64_t(queue_.size());
}

void Scheduler::loop() {
    std::vector<std::unique_ptr<Running>> running;
    std::unordered_map<engine::SeqId, Running*> by_seq;
    for (;;) {
        outbox_.flush();  // the previous step's events (text, ends), before any wait
        bool stopping;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            // Idle: sleep until a job arrives. Busy: wake every 50 ms at most to notice cancellations
            // even while the engine has nothing pending (it always has while a job runs).
            if (running.empty()) cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
            stopping = stopping_;
            if (stopping) {
                for (auto& job : queue_) emit(job, Event{true, "", std::nullopt, "", "server shutting down"});
                queue_.clear();
                metrics_.queue_length = 0;
            }
        }
        const bool past_deadline = stopping && Clock::now() >= drain_deadline_;
        for (auto& r : running) {
            if (r->job->cancelled)
                finish(*r, "", "cancelled: the client disconnected");
            else if (past_deadline)
                finish(*r, "", "server shutting down");
        }
        std::erase_if(running, [](const auto& r) { return r->done; });
        if (stopping && running.empty()) break;
        if (!stopping) admit(running);
        by_seq.clear();
        for (auto& r : running) by_seq[r->seq] = r.get();
        publish_gauges(running.size());
        if (!engine_.has_pending()) continue;

        // When every running sequence's token is chosen where the model runs (device-greedy, or
        // sampled there on a GPU), the step brings back tokens instead of [rows, vocab] logits: no
        // logits copy to the host and no host pass over the vocabulary per sequence (64 x 152k floats
        // a step for a Qwen-sized batch), and decode steps replay from the engine's graphs. One
        // sequence that needs the logits (logprobs, or sampling on the CPU) makes the step LOGITS.
        const bool on_device =
            std::all_of(running.begin(), running.end(), [](const auto& r) { return r->on_device(); });
        const bool sampled =
            std::any_of(running.begin(), running.end(), [](const auto& r) { return r->device_sampled; });
        const engine::StepOutput output = !on_device ? engine::StepOutput::LOGITS
                                          : sampled  ? engine::StepOutput::SAMPLED
                                                     : engine::StepOutput::GREEDY;
        std::vector<engine::SeqLogits> results;
        try {
            results = engine_.step(output);
        } catch (const std::exception& e) {
            // The engine names the sequence, but one failed step leaves the others' state unknown:
            // end them all with the message rather than guess.
            for (auto& r : running) finish(*r, "", std::string("engine error: ") + e.what());
            continue;
        }
        for (const engine::SeqLogits& l : results) {
            auto it = by_seq.find(l.seq);
            if (it == by_seq.end() || it->second->done) continue;
            try {
                on_logits(*it->second, l, output);
            } catch (const std::exception& e) {
                finish(*it->second, "", std::string("engine error: ") + e.what());
            }
        }
        std::erase_if(running, [](const auto& r) { return r->done; });
        publish_gauges(running.size());
    }
    outbox_.flush();
    publish_gauges(0);
}

}  // namespace flashport::server
