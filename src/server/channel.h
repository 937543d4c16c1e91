// What the scheduler thread sends to the HTTP thread serving one request: text as it becomes final,
// then one end event. A mutex and a condition variable: one producer, one consumer, a few hundred
// events per request at most, so nothing cleverer is needed.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace flashport::server {

struct TokenLogprob {
    int32_t token = -1;
    float logprob = 0;
    std::vector<std::pair<int32_t, float>> top;  // the most likely tokens at this position, best first
    bool scored = true;  // false for an echoed prompt's first token, which nothing predicts (null logprobs)
};

struct Event {
    bool done = false;
    std::string text;                     // text that became final (may be empty)
    std::optional<TokenLogprob> logprob;  // when the request asked for logprobs
    // With done:
    std::string finish_reason;  // "stop" or "length"; empty with an error
    std::string error;          // the engine failed this request (a 500)
    int64_t prompt_tokens = 0, completion_tokens = 0;
};

class Channel {
public:
    void push(Event e) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            events_.push_back(std::move(e));
        }
        cv_.notify_one();
    }
    // The next event, or nothing after `timeout` (the caller checks its client in between).
    std::optional<Event> pop(std::chrono::milliseconds timeout) {
        std::unique_lock<std::mutex> lock(mutex_);
        if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return std::nullopt;
        Event e = std::move(events_.front());
        events_.pop_front();
        return e;
    }

private:
    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<Event> events_;
};

}  // namespace flashport::server
