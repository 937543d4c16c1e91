// The operator schemas of torch.ops.flashport. Each op family's file registers its kernels (CPU, CUDA in a GPU
// build, Meta, Autograd); python/flashport/__init__.py is the documented front door (layouts, windows, shapes).
//
// Every op returns (out, lse): out is the one allocation of the call, lse an fp32 tensor when return_lse and an
// empty one otherwise, so the schema stays one fixed shape for torch.compile. `scale=None` is 1/sqrt(head_dim).
// `impl` is "auto", "flash" or "naive" (flashport::AttentionImpl).
#include <torch/library.h>

#include "tensor_view.h"

namespace {

std::string build_info() {
    return flashport::concat("flashport ", flashport::torch_ext::gpu_build_name(), ", built against torch ",
                             TORCH_VERSION_MAJOR, ".", TORCH_VERSION_MINOR);
}

}  // namespace

TORCH_LIBRARY(flashport, m) {
    // q [batch, q_len, n_heads, head_dim], k/v [batch, kv_len, n_kv_heads, head_dim];
    // lse [batch, n_heads, q_len]. Causal is bottom-right aligned; window_left -1 is no window.
    m.def(
        "attention(Tensor q, Tensor k, Tensor v, bool causal=False, float? scale=None, int window_left=-1, "
        "bool return_lse=False, str impl=\"auto\") -> (Tensor, Tensor)");
    // q [total_q, n_heads, head_dim], k/v [total_k, n_kv_heads, head_dim], cu_seqlens int32 [batch + 1];
    // lse [n_heads, total_q]. max_seqlen_k (0: unknown) only sizes the GPU split-KV route's split count.
    m.def(
        "attention_varlen(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, "
        "int max_seqlen_q, int max_seqlen_k, bool causal=False, float? scale=None, int window_left=-1, "
        "bool return_lse=False, str impl=\"auto\") -> (Tensor, Tensor)");
    // q [batch, q_len, n_heads, head_dim], k/v_cache [num_blocks, block_size, n_kv_heads, head_dim],
    // block_table int32 [batch, max_blocks_per_seq], seq_lens int32 [batch]; lse [batch, n_heads, q_len].
    m.def(
        "paged_attention(Tensor q, Tensor k_cache, Tensor v_cache, Tensor block_table, Tensor seq_lens, "
        "bool causal=True, float? scale=None, bool return_lse=False, int num_splits=0, int max_seq_len=0) "
        "-> (Tensor, Tensor)");
    m.def("build_info() -> str", build_info);
}
