"""flashport for PyTorch: memory-efficient (flash) attention as torch.ops.flashport.*.

    import flashport
    out = flashport.attention(q, k, v, causal=True)                  # q [batch, seq, heads, dim]
    out = flashport.attention(q, k, v, layout="bhsd")                # q [batch, heads, seq, dim], no copy

The ops run on the tensors' device and its current stream, allocate only their outputs (and a
workspace from torch's caching allocator for paged decode on a GPU), read strided inputs in place,
and take fp32, fp16 and bf16 (fp32 accumulation), GQA/MQA (n_heads a multiple of n_kv_heads) and
q_len != kv_len. Unsupported requests raise ValueError with flashport's message; inputs that
require grad (with grad mode on) raise NotImplementedError: there is no backward pass yet.

Causal alignment. flashport's causal mask is bottom-right aligned: query i sees key j when
j <= i + (kv_len - q_len), the rule of a KV cache and of FlashAttention >= 2.1. PyTorch's
scaled_dot_product_attention(is_causal=True) and xFormers' LowerTriangularMask are top-left aligned
(j <= i). The two agree when q_len == kv_len. causal="top_left" gives the top-left rule here (see
attention()); flashport.xformers uses it for LowerTriangularMask.

Compatibility wrappers: flashport.xformers.memory_efficient_attention and
flashport.flash_attn.flash_attn_func / flash_attn_varlen_func. Framework plug-ins belong in
flashport.integrations; benchmarks in flashport.bench.
"""
import torch

from . import _library

__version__ = "0.1.0"
__all__ = ["attention", "attention_varlen", "paged_attention", "build_info", "library_path"]

library_path = _library.load()
_ops = torch.ops.flashport
# The overloads themselves: a call through them skips the packet's overload resolution, about a
# microsecond of Python on every call (bench/gpu/torch_peers.py times both on a launch-bound case).
_attention = _ops.attention.default
_attention_varlen = _ops.attention_varlen.default
_paged_attention = _ops.paged_attention.default


def build_info():
    """What the loaded extension serves and the torch it was built against, e.g.
    "flashport CPU and CUDA, built against torch 2.11"."""
    return _ops.build_info()


def _window_left(window, causal):
    """(window, causal) -> (window_left, causal) as the C++ API takes them. window is None, an int
    left window, or FlashAttention's (left, right) tuple with right -1 (keys to the right allowed)
    or 0 (none: the same as causal)."""
    if window is None:
        return -1, causal
    if isinstance(window, int) and not isinstance(window, bool):
        left, right = window, -1
    elif isinstance(window, (tuple, list)) and len(window) == 2 and all(isinstance(w, int) for w in window):
        left, right = window
    else:
        raise ValueError(f"flashport: window must be None, an int or a (left, right) tuple, got {window!r}")
    if left < -1:
        raise ValueError(f"flashport: the left window must be -1 (none) or >= 0, got {left}")
    if right not in (-1, 0):
        raise ValueError(f"flashport: the right window must be -1 (unlimited) or 0 (causal), got {right}: "
                         "flashport has no window to the right of the diagonal")
    if right == 0 and causal is False:
        causal = True
    return left, causal


def _check_layout(layout):
    if layout not in ("bshd", "bhsd"):
        raise ValueError(f'flashport: layout must be "bshd" or "bhsd", got {layout!r}')


def attention(q, k, v, *, causal=False, scale=None, window=None, layout="bshd", return_lse=False,
              impl="auto"):
    """Attention: softmax(scale * q k^T + mask) v per batch and head.

    Shapes (layout="bshd", FlashAttention's order):
        q [batch, q_len, n_heads, head_dim];  k, v [batch, kv_len, n_kv_heads, head_dim]
        returns out [batch, q_len, n_heads, head_dim] (q's dtype)
    layout="bhsd" takes and returns PyTorch's [batch, heads, seq, dim]: the inputs are read through
    their strides (a transposed view, no copy) and out is a [batch, heads, seq, dim] view of a
    contiguous [batch, seq, heads, dim] tensor, so out.transpose(1, 2).reshape(b, s, h * d) is free.
    Any strides work as long as head_dim is the unit-stride dimension.

    causal: False; True or "bottom_right" (query i sees keys j <= i + kv_len - q_len: the KV-cache and
        FlashAttention >= 2.1 rule; a row that sees no key gives zeros and an LSE of -inf); or
        "top_left" (j <= i: SDPA's is_causal and xFormers' LowerTriangularMask). For top_left with
        q_len <= kv_len the keys past q_len are never seen and k, v are narrowed (a view); with
        q_len > kv_len the rows past kv_len see every key and run as a second, non-causal call.
    scale: None for 1 / sqrt(head_dim); otherwise a finite nonzero float.
    window: None (no window); an int W >= 0: keys more than W positions left of the query's diagonal
        (bottom-right) are hidden, as FlashAttention's window_size=(W, -1), or (W, 0) with causal;
        or FlashAttention's (left, right) tuple, right -1 or 0 (0 means causal).
    return_lse: also return lse, fp32 [batch, n_heads, q_len], the natural-log log-sum-exp of each
        row's scaled scores (FlashAttention's softmax_lse), in both layouts.
    impl: "auto" (flash where it serves), "flash" or "naive" (materialises the scores: for comparisons).
    """
    _check_layout(layout)
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            raise ValueError(f"flashport.attention: {name} must be a 4-D tensor ({layout}), got "
                             f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}")
    if layout == "bhsd":
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    window_left, causal = _window_left(window, causal)
    if causal == "top_left":
        out, lse = _top_left(q, k, v, scale, window_left, return_lse, impl)
    else:
        if causal not in (False, True, "bottom_right"):
            raise ValueError(f'flashport: causal must be False, True, "bottom_right" or "top_left", got {causal!r}')
        out, lse = _attention(q, k, v, bool(causal), scale, window_left, return_lse, impl)
    if layout == "bhsd":
        out = out.transpose(1, 2)
    return (out, lse) if return_lse else out


def _top_left(q, k, v, scale, window_left, return_lse, impl):
    """Top-left causal attention in bshd through the bottom-right op (see attention()); returns (out, lse)."""
    q_len, kv_len = q.shape[1], k.shape[1]
    if q_len <= kv_len:
        return _attention(q, k[:, :q_len], v[:, :q_len], True, scale, window_left, return_lse, impl)
    if window_left >= 0:
        raise ValueError(f"flashport: a window with top-left causal masking needs q_len <= kv_len, got q_len "
                         f"{q_len} > kv_len {kv_len}")
    head, head_lse = _attention(q[:, :kv_len], k, v, True, scale, -1, return_lse, impl)
    tail, tail_lse = _attention(q[:, kv_len:], k, v, False, scale, -1, return_lse, impl)
    return torch.cat([head, tail], 1), (torch.cat([head_lse, tail_lse], 2) if return_lse else head_lse)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *, causal=False,
                     scale=None, window=None, return_lse=False, impl="auto"):
    """Attention over sequences of different lengths packed without padding (FlashAttention's varlen).

    Shapes:
        q [total_q, n_heads, head_dim];  k, v [total_k, n_kv_heads, head_dim]
        cu_seqlens_q, cu_seqlens_k  int32 [batch + 1] on q's device: sequence b owns rows
            cu_seqlens_q[b]:cu_seqlens_q[b + 1] of q and cu_seqlens_k[b]:cu_seqlens_k[b + 1] of k, v
        max_seqlen_q >= every query length (sizes the GPU grid); max_seqlen_k, the longest key
            count (0: unknown), only sizes the GPU split-KV route's split count (a wrong value costs
            speed, never correctness)
        returns out [total_q, n_heads, head_dim] (rows no sequence claims are zeros)
    Each sequence is an independent attention() with its own q_len and kv_len: causal is bottom-right
    within the sequence; scale and window as in attention(). return_lse adds lse fp32
    [n_heads, total_q] (-inf in unclaimed rows). On a GPU, offsets are checked in the kernel (a
    broken sequence's rows become NaN) instead of on the host, which would synchronise.
    """
    window_left, causal = _window_left(window, causal)
    if causal not in (False, True, "bottom_right"):
        raise ValueError(f"flashport.attention_varlen: causal must be False or True (bottom-right), got {causal!r}")
    out, lse = _attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, int(max_seqlen_q), int(max_seqlen_k),
                                     bool(causal), scale, window_left, return_lse, impl)
    return (out, lse) if return_lse else out


def paged_attention(q, k_cache, v_cache, block_table, seq_lens, *, causal=True, scale=None, return_lse=False,
                    num_splits=0, max_seq_len=0):
    """New query tokens against a paged KV cache in vLLM's block-table layout (decode, chunked prefill).

    Shapes:
        q            [batch, q_len, n_heads, head_dim]: the newest q_len tokens of each sequence, whose
                     K and V are already in the cache
        k_cache, v_cache  [num_blocks, block_size, n_kv_heads, head_dim], block_size a multiple of 16
        block_table  int32 [batch, max_blocks_per_seq], contiguous: entry (b, i) is the block holding
                     tokens i*block_size .. (i+1)*block_size - 1 of sequence b
        seq_lens     int32 [batch]: the tokens of sequence b in the cache, the new ones included
        returns out [batch, q_len, n_heads, head_dim]; with return_lse also lse fp32 [batch, n_heads, q_len]
    Query i of sequence b stands at position seq_lens[b] - q_len + i; causal (the default) lets it
    see keys at positions <= its own. On a GPU, the split-KV decode kernel (q_len <= 8, head_dim
    64/128/256) needs a workspace: it is allocated from torch's caching allocator on the current
    stream for the call (graph-capturable). num_splits (0: automatic) and max_seq_len (0: the block
    table's capacity) fix the GPU's split count, e.g. to capture one graph for many steps. Block ids
    and lengths are checked on the CPU (errors) and in the GPU kernel (NaN rows), never on the host
    for GPU tensors.
    """
    out, lse = _paged_attention(q, k_cache, v_cache, block_table, seq_lens, bool(causal), scale, return_lse,
                                    int(num_splits), int(max_seq_len))
    return (out, lse) if return_lse else out
