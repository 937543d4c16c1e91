# Paged-KV attention (flashport/paged_attention.h): the op, which validates and dispatches, and its CPU
# paths (decode reading the pages in place; longer queries: gather through the block table + the dense
# kernels); the cache writes (flashport/paged_cache.h:
# paged_cache_write, and rope_qk_cache_write, which fuses RoPE into it). The GPU decode kernels are listed in
# backends/gpu/CMakeLists.txt. Included from src/CMakeLists.txt, so paths are relative to src/.
target_sources(flashport PRIVATE
  ops/paged_attention.cpp
  ops/paged_cache.cpp
  ops/rope_cache.cpp
  backends/cpu/paged_attention.cpp
  backends/cpu/paged_attention_decode.cpp
)
