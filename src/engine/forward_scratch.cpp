// ForwardScratch (forward_scratch.h): slots that grow and keep their addresses, and the decode graphs
// recorded over them.
#include "engine/forward_scratch.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "flashport/error.h"

namespace flashport::engine {

void* ForwardScratch::get(size_t slot, size_t bytes, Device device) {
    if (slots_.size() <= slot) slots_.resize(slot + 1);
    Buffer& b = slots_[slot];
    if (b.size() < bytes || b.device() != device || !b.data()) {
        b = Buffer(std::max<size_t>(bytes, 1), device);
        graphs_.clear();  // they recorded the old addresses
    }
    return b.data();
}

bool ForwardScratch::graphs_enabled() const {
    static const bool env_off = [] {
        const char* env = std::getenv("FLASHPORT_DECODE_GRAPH");
        return env && std::strcmp(env, "0") == 0;
    }();
    return decode_graphs && !env_off;
}

const GpuStream& ForwardScratch::stream(Device device) {
    if (!stream_ || stream_->device() != device) {
        graphs_.clear();
        stream_ = std::make_unique<GpuStream>(device);
    }
    return *stream_;
}

void ForwardScratch::run_graph(const DecodeGraphKey& key, const GpuStream& stream,
                               const std::function<void()>& enqueue) {
    // Keys change as sequences grow past a table quantum and as batches change size (DecodeGraphKey):
    // keep the most recently used few.
    constexpr size_t MAX_GRAPHS = 16;
    if (!graphs_.count(key) && graphs_.size() >= MAX_GRAPHS) {
        auto oldest = std::min_element(graphs_.begin(), graphs_.end(), [](const auto& a, const auto& b) {
            return a.second.last_use < b.second.last_use;
        });
        graphs_.erase(oldest);
    }
    Recorded& r = graphs_[key];
    r.last_use = ++uses_;
    // The first run of a key is eager: it sizes every buffer, so the capture allocates nothing.
    if (r.runs++ == 0 || r.failed) {
        enqueue();
        return;
    }
    if (!r.graph) {
        try {
            r.graph = std::make_unique<GpuGraph>(GpuGraph::capture(stream, enqueue));
        } catch (const Error& e) {
            // Something in the step could not be recorded (e.g. a vendor BLAS call): run it eagerly.
            std::fprintf(stderr, "flashport: decode graph not recorded, running eagerly: %s\n", e.what());
            r.failed = true;
            enqueue();
            return;
        }
    }
    r.graph->replay(stream);
    ++replays_;
}

size_t ForwardScratch::bytes() const {
    size_t n = 0;
    for (const Buffer& b : slots_) n += b.size();
    return n;
}

}  // namespace flashport::engine
