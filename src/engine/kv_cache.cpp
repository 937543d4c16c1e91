// The paged KV cache's bookkeeping (block lists, free list, growth) and its row copies.
#include "engine/kv_cache.h"

#include <algorithm>

#include "flashport/checked.h"
#include "flashport/device.h"
#include "flashport/error.h"
#include "flashport/paged_cache.h"

namespace flashport::engine {

KvCache::KvCache(int64_t n_layers, int64_t n_kv_heads, int64_t head_dim, DType dtype, const KvCacheOptions& options,
                 Device device)
    : n_layers_(n_layers),
      n_kv_heads_(n_kv_heads),
      head_dim_(head_dim),
      dtype_(dtype),
      device_(device),
      block_size_(options.block_size),
      max_blocks_(options.max_blocks) {
    FP_CHECK(n_layers > 0 && n_kv_heads > 0 && head_dim > 0, "KvCache: layers, kv heads and head_dim must be > 0");
    FP_CHECK(block_size_ > 0 && block_size_ % 16 == 0, "KvCache: block_size must be a positive multiple of 16, got ",
             block_size_);
    FP_CHECK(max_blocks_ >= 0, "KvCache: max_blocks must be >= 0, got ", max_blocks_);
    // Checked once here; every later byte count is a multiple of this times a block count < 2^31.
    block_bytes_ = checked_product({block_size_, n_kv_heads_, head_dim_, int64_t(dtype_size(dtype_))},
                                   "KvCache: the bytes of one block");
    (void)checked_product({2, n_layers_, block_bytes_}, "KvCache: the bytes of one block on every layer");
    k_.resize(size_t(n_layers));
    v_.resize(size_t(n_layers));
    FP_CHECK(options.initial_blocks >= 0, "KvCache: initial_blocks must be >= 0, got ", options.initial_blocks);
    if (options.preallocate && max_blocks_ > 0)
        grow(max_blocks_);
    else if (max_blocks_ == 0 && options.initial_blocks > 0)
        grow(options.initial_blocks);
}

size_t KvCache::bytes_per_token() const {
    return size_t(2 * n_layers_) * size_t(block_bytes_ / block_size_);
}

int64_t kv_cache_bytes(int64_t n_layers, int64_t n_kv_heads, int64_t head_dim, DType dtype, int64_t tokens,
                       int64_t block_size) {
    FP_CHECK(tokens >= 0, "a KV cache of ", tokens, " tokens: the count must be >= 0");
    // The shape's checks and per-token bytes are the cache's own; nothing is allocated.
    KvCacheOptions options;
    options.block_size = block_size;
    const KvCache shape(n_layers, n_kv_heads, head_dim, dtype, options);
    const char* what = "the KV cache's bytes";
    const int64_t blocks = checked_add(tokens, block_size - 1, "a KV cache of ", tokens, " tokens") / block_size;
    return checked_mul(checked_mul(blocks, block_size, what), int64_t(shape.bytes_per_token()), "a KV cache of ",
                       tokens, " tokens (", shape.bytes_per_token(), " bytes per token)");
}

size_t KvCache::bytes() const {
    return size_t(2 * n_layers_) * size_t(block_bytes_) * size_t(num_blocks_);
}

void KvCache::require_pool_memory(int64_t new_blocks) const {
    const char* what = "KvCache: the bytes of the pool";
    const int64_t bytes = checked_mul(checked_mul(new_blocks, block_bytes_, what), 2 * n_layers_, what);
    require_memory(device_, bytes,
                   std::string(num_blocks_ ? "growing the KV cache by " : "a KV cache of ") +
                       std::to_string(checked_mul(new_blocks, block_size_, what)) + " tokens (" +
                       std::to_string(new_blocks) + " blocks of " + std::to_string(block_size_) + ", " +
                       std::to_string(2 * n_layers_ * (block_bytes_ / block_size_)) + " bytes per token)");
}

char* KvCache::row(const Buffer& pool, int32_t block, int64_t in_block) const {
    const size_t token_bytes = size_t(n_kv_heads_ * head_dim_) * dtype_size(dtype_);
    return static_cast<char*>(pool.data()) + (size_t(block) * size_t(block_size_) + size_t(in_block)) * token_bytes;
}

void KvCache::grow(int64_t min_blocks) {
    int64_t target = std::max<int64_t>(min_blocks, num_blocks_ * 2);
    if (max_blocks_ > 0) target = std::min(target, max_blocks_);
    if (target <= num_blocks_) return;
    // Memory first: a pool no machine could hold is best explained by its size, not by the block limit.
    require_pool_memory(target - num_blocks_);
    FP_CHECK(target < (int64_t(1) << 31), "KvCache: at most 2^31 - 1 blocks (int32 block ids), asked for ", target);
    const size_t block_bytes = size_t(block_bytes_);
    for (int64_t l = 0; l < n_layers_; ++l) {
        for (Buffer* pool : {&k_[size_t(l)], &v_[size_t(l)]}) {
            Buffer bigger(block_bytes * size_t(target), device_);
            if (num_blocks_ > 0) copy_bytes(bigger.data(), device_, pool->data(), device_, block_bytes * size_t(num_blocks_));
            *pool = std::move(bigger);
        }
    }
    // New blocks go under the existing free ones, lowest id on top, so allocation order is predictable.
    std::vector<int32_t> fresh;
    for (int64_t b = target - 1; b >= num_blocks_; --b) fresh.push_back(int32_t(b));
    free_.insert(free_.begin(), fresh.begin(), fresh.end());
    num_blocks_ = target;
}

void KvCache::reserve(BlockList& seq, int64_t tokens) {
    const int64_t need = (tokens + block_size_ - 1) / block_size_ - int64_t(seq.blocks.size());
    if (need <= 0) return;
    if (need > free_blocks()) {
        grow(used_blocks() + need);
        FP_CHECK(need <= free_blocks(), "KV cache full: a sequence needs ", need, " more blocks of ", block_size_,
                 " tokens, ", free_blocks(), " are free and the pool is at its limit of ", max_blocks_, " blocks (",
                 max_blocks_ * block_size_, " tokens); release sequences or raise the limit");
    }
    for (int64_t i = 0; i < need; ++i) {
        seq.blocks.push_back(free_.back());
        free_.pop_back();
    }
}

void KvCache::truncate(BlockList& seq, int64_t tokens) {
    FP_CHECK(tokens >= 0, "KvCache::truncate: negative length ", tokens);
    const size_t keep = size_t((tokens + block_size_ - 1) / block_size_);
    while (seq.blocks.size() > keep) {
        free_.push_back(seq.blocks.back());
        seq.blocks.pop_back();
    }
    seq.length = std::min(seq.length, tokens);
}

std::vector<int32_t> KvCache::slots(const BlockList& seq, int64_t pos, int64_t n) const {
    FP_CHECK(pos >= 0 && n >= 0 && pos + n <= int64_t(seq.blocks.size()) * block_size_, "KvCache: positions [", pos,
             ", ", pos + n, ") are not reserved (", seq.blocks.size(), " blocks)");
    std::vector<int32_t> out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        const int64_t p = pos + i;
        out[size_t(i)] = int32_t(int64_t(seq.blocks[size_t(p / block_size_)]) * block_size_ + p % block_size_);
    }
    return out;
}

void KvCache::write(int64_t layer, const IndexView& slot_map, const TensorView& k_rows, const TensorView& v_rows) {
    FP_CHECK(layer >= 0 && layer < n_layers_, "KvCache::write: layer ", layer, " of ", n_layers_);
    paged_cache_write(k(layer), v(layer), k_rows, v_rows, slot_map);
}

void KvCache::rope_write(int64_t layer, const IndexView& slot_map, const IndexView& positions, const RopeParams& rope,
                         const TensorView& q_rows, const TensorView& k_rows, const TensorView& v_rows,
                         void* stream) {
    FP_CHECK(layer >= 0 && layer < n_layers_, "KvCache::rope_write: layer ", layer, " of ", n_layers_);
    rope_qk_cache_write(q_rows, k_rows, v_rows, positions, rope, k(layer), v(layer), slot_map, stream);
}

TensorView KvCache::k(int64_t layer) const {
    return TensorView(k_[size_t(layer)].data(), dtype_, {num_blocks_, block_size_, n_kv_heads_, head_dim_}, device_);
}

TensorView KvCache::v(int64_t layer) const {
    return TensorView(v_[size_t(layer)].data(), dtype_, {num_blocks_, block_size_, n_kv_heads_, head_dim_}, device_);
}

}  // namespace flashport::engine
