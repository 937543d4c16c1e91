// The paged KV cache: one pool of fixed-size blocks per layer, shared by every sequence.
//
// Layout (the one flashport/paged_attention.h reads, vLLM's):
//   k(layer), v(layer)  [num_blocks, block_size, n_kv_heads, head_dim], contiguous, in the model dtype
// A sequence owns a BlockList: the ids of its blocks in token order, so token t lives in block
// blocks[t / block_size] at row t % block_size. Freed blocks go on a free list and are handed out
// again (last freed first), so a long-running server does not fragment.
//
// Why the pool grows: sizing the pool for max_position_embeddings × batch up front would reserve
// gigabytes for a one-line prompt. The pool starts with what the first request needs and doubles
// (per layer: allocate, copy, free, so the transient is one layer's pool) up to `max_blocks`.
// Block ids stay valid across growth; views from k()/v() do not, so take them after reserve().
#pragma once

#include <cstdint>
#include <vector>

#include "flashport/dtype.h"
#include "flashport/memory.h"
#include "flashport/ops.h"
#include "flashport/tensor.h"

namespace flashport::engine {

struct KvCacheOptions {
    int64_t block_size = 16;  // tokens per block; a multiple of 16 (the paged attention kernels' rule)
    int64_t max_blocks = 0;   // the pool's limit; 0: unlimited (grows as sequences need)
    // Allocate the whole pool (max_blocks) at construction, so running out of memory is an error when
    // the cache is made, not in the middle of a request. Ignored when max_blocks is 0.
    bool preallocate = false;
    // With max_blocks 0: blocks allocated at construction, which the pool still grows past (a request
    // whose length is known, so that it does not grow inside its prefill).
    int64_t initial_blocks = 0;
};

// The cache blocks of one sequence. Owned by the caller (the engine's sequence); filled by
// KvCache::reserve, emptied by KvCache::release.
struct BlockList {
    std::vector<int32_t> blocks;
    int64_t length = 0;  // tokens written (positions [0, length) are valid)
};

// The bytes of a pool holding `tokens` tokens in whole blocks of `block_size`, all layers, K and V: what a
// KvCache with max_blocks = ceil(tokens / block_size) takes when full (an engine's --ctx). An overflow is
// an Error naming the token count.
int64_t kv_cache_bytes(int64_t n_layers, int64_t n_kv_heads, int64_t head_dim, DType dtype, int64_t tokens,
                       int64_t block_size = KvCacheOptions{}.block_size);

class KvCache {
public:
    KvCache(int64_t n_layers, int64_t n_kv_heads, int64_t head_dim, DType dtype, const KvCacheOptions& options = {},
            Device device = Device::cpu());

    // Makes room for `tokens` tokens in `seq` (allocating blocks, growing the pool if needed).
    // Throws an Error naming the limit when the pool is at max_blocks and no block is free.
    void reserve(BlockList& seq, int64_t tokens);
    // Keeps the first `tokens` tokens and frees the blocks past them (a chat turn that diverges).
    void truncate(BlockList& seq, int64_t tokens);
    // Returns every block of `seq` to the free list.
    void release(BlockList& seq) { truncate(seq, 0); }

    // The cache slots (block · block_size + offset) of positions [pos, pos + n) of `seq`, whose blocks
    // must already be reserved: the slot map paged_cache_write takes.
    std::vector<int32_t> slots(const BlockList& seq, int64_t pos, int64_t n) const;
    // Writes row t of k_rows / v_rows ([tokens, n_kv_heads, head_dim], the cache's dtype and device) to
    // slot slots[t] of layer `layer`: one paged_cache_write, a single kernel on a GPU.
    void write(int64_t layer, const IndexView& slots, const TensorView& k_rows, const TensorView& v_rows);
    // RoPE on q_rows ([tokens, n_heads, head_dim]) and k_rows in place, then write() of the rotated
    // k_rows and v_rows: one rope_qk_cache_write, the same bits as rope, rope and write, and a single
    // kernel on a GPU (enqueued on `stream`).
    void rope_write(int64_t layer, const IndexView& slots, const IndexView& positions, const RopeParams& rope,
                    const TensorView& q_rows, const TensorView& k_rows, const TensorView& v_rows,
                    void* stream = nullptr);

    TensorView k(int64_t layer) const;
    TensorView v(int64_t layer) const;

    int64_t block_size() const { return block_size_; }
    int64_t num_blocks() const { return num_blocks_; }
    int64_t free_blocks() const { return int64_t(free_.size()); }
    int64_t used_blocks() const { return num_blocks_ - free_blocks(); }
    size_t bytes() const;  // the pool, all layers, K and V
    size_t bytes_per_token() const;
    DType dtype() const { return dtype_; }
    // Tokens the pool may hold at most (max_blocks · block_size); 0 when unlimited.
    int64_t capacity_tokens() const { return max_blocks_ * block_size_; }

private:
    void grow(int64_t min_blocks);
    // Refuses, with the figures, `new_blocks` more blocks on every layer that the device cannot hold.
    void require_pool_memory(int64_t new_blocks) const;
    char* row(const Buffer& pool, int32_t block, int64_t in_block) const;

    int64_t n_layers_, n_kv_heads_, head_dim_;
    DType dtype_;
    Device device_;
    int64_t block_size_, max_blocks_;
    int64_t block_bytes_ = 0;  // one block of one layer's K (or V) pool
    int64_t num_blocks_ = 0;
    std::vector<Buffer> k_, v_;  // per layer
    std::vector<int32_t> free_;  // a stack: the most recently freed block is reused first
};

}  // namespace flashport::engine
