// The buffers a forward pass keeps between calls, and its decode graphs (see the class comment).
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "flashport/device.h"
#include "flashport/memory.h"

namespace flashport::engine {

// What a recorded decode step's launches depend on besides the scratch buffers' addresses (which stay
// fixed until a slot grows, and that drops every graph): the step's one paged attention call and the
// cache pool it reads. A sequence's padded table widens every table_quantum_tokens (below), which
// makes a new key.
struct DecodeGraphKey {
    int64_t sequences = 0;           // one new token each
    int64_t max_blocks = 0;          // the block table's padded width, which also lays out the index array
    int64_t cache_blocks = 0;        // the pool's size (paged attention bounds block ids by it)
    uintptr_t cache_pool = 0;        // layer 0's K pool, which moves when the pool grows
    size_t attention_workspace = 0;  // the split-KV partials' bytes
    bool sampled = false;            // tokens drawn by the sample op (else the argmax)
    bool marks_seen = false;         // ... after marking the step's tokens in the seen sets
    uintptr_t seen_sets = 0;         // which move when the engine grows them

    auto operator<=>(const DecodeGraphKey&) const = default;
};

// The buffers a forward pass reuses from one call to the next: activations, the ops' workspaces and
// the device copy of its indices, one slot per role. A slot grows to the largest call seen and is
// kept, so a decode step allocates nothing (on a GPU, cudaMalloc / cudaFree cost tens of µs each and
// cudaFree waits for the device). Held memory is tracked like any Buffer; the Engine keeps one.
//
// It also holds the decode graphs (GPU): a greedy decode step (one new token per sequence) is recorded into a
// CUDA graph / hipGraph the second time its shape is seen (same padded table, same buffers) and
// replayed from then on, so the step's ~170 launches cost one. decode_graphs = false (or the
// environment's FLASHPORT_DECODE_GRAPH=0) keeps every step eager.
class ForwardScratch {
public:
    bool decode_graphs = true;
    // Paged attention's block tables are padded to a whole multiple of this many tokens (with -1
    // entries, never read), so that a decode step's shape, and the graph recorded for it, lasts while
    // a sequence grows by this much rather than one cache block.
    int64_t table_quantum_tokens = 1024;

    // At least `bytes` on `device` in `slot`: the same address as the last call unless it grew (which
    // drops the recorded graphs).
    void* get(size_t slot, size_t bytes, Device device);
    size_t bytes() const;  // held over all slots

    bool graphs_enabled() const;
    const GpuStream& stream(Device device);  // the stream decode graphs run on
    // Runs `enqueue` (device work on stream() only) for `key`: eagerly the first time, then recorded
    // once and replayed. A step that can't be recorded runs eagerly, with a note on stderr.
    void run_graph(const DecodeGraphKey& key, const GpuStream& stream, const std::function<void()>& enqueue);
    int64_t graph_replays() const { return replays_; }  // steps run from a recorded graph so far

private:
    struct Recorded {
        int64_t runs = 0;
        int64_t last_use = 0;  // uses_ when last run, for evicting the least recently used
        bool failed = false;
        std::unique_ptr<GpuGraph> graph;
    };
    std::vector<Buffer> slots_;
    std::unique_ptr<GpuStream> stream_;
    std::map<DecodeGraphKey, Recorded> graphs_;
    int64_t replays_ = 0;
    int64_t uses_ = 0;
};

}  // namespace flashport::engine
