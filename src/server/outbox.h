// The scheduler's events, delivered off its critical path. A decode step of 64 streams produces 64
// events; pushing each into its request's Channel wakes that request's HTTP thread (a futex call), and
// done on the scheduler thread those wake-ups sit between one engine step and the next (about 0.5 ms
// a step at 64 streams on the H200, 6 % of the step). The scheduler adds a step's events here and
// flushes once; one delivery thread pushes them into the channels while the next step runs. One
// thread, first in first out, so each request's events keep their order.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "server/channel.h"

namespace flashport::server {

class Outbox {
public:
    Outbox() : thread_([this] { deliver(); }) {}
    // Delivers everything flushed so far, then stops.
    ~Outbox() {
        flush();
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stopping_ = true;
        }
        cv_.notify_one();
        thread_.join();
    }
    Outbox(const Outbox&) = delete;
    Outbox& operator=(const Outbox&) = delete;

    // Producer side (one thread). `channel` keeps what owns it alive until delivery (an aliasing
    // shared_ptr into the request's job).
    void add(std::shared_ptr<Channel> channel, Event e) { pending_.emplace_back(std::move(channel), std::move(e)); }
    // Flushes, then waits until every event is in its channel (Scheduler::stop: nothing is left in
    // flight when the HTTP side is told the scheduler has ended).
    void drain() {
        flush();
        std::unique_lock<std::mutex> lock(mutex_);
        idle_.wait(lock, [&] { return queue_.empty() && !delivering_; });
    }
    void flush() {
        if (pending_.empty()) return;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            for (auto& p : pending_) queue_.push_back(std::move(p));
        }
        pending_.clear();
        cv_.notify_one();
    }

private:
    using Item = std::pair<std::shared_ptr<Channel>, Event>;

    void deliver() {
        std::vector<Item> batch;
        for (;;) {
            {
                std::unique_lock<std::mutex> lock(mutex_);
                delivering_ = false;
                if (queue_.empty()) idle_.notify_all();
                cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
                if (queue_.empty()) return;  // stopping, and all delivered
                batch.swap(queue_);
                delivering_ = true;
            }
            for (Item& item : batch) item.first->push(std::move(item.second));
            batch.clear();
        }
    }

    std::vector<Item> pending_;  // the producer's, unlocked
    std::mutex mutex_;
    std::condition_variable cv_, idle_;
    std::vector<Item> queue_;
    bool stopping_ = false, delivering_ = false;
    std::thread thread_;
};

}  // namespace flashport::server
