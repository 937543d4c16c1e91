"""FlashAttention's functional API on flashport, so `from flash_attn import flash_attn_func` becomes
`from flashport.flash_attn import flash_attn_func`.

Same argument names and meaning as flash_attn 2.x: layout [batch, seqlen, nheads, headdim], GQA/MQA,
causal aligned bottom-right (FlashAttention >= 2.1 and flashport share that rule), window_size
(left, right) with right -1 or 0, softmax_lse [batch, nheads, seqlen_q] ([nheads, total_q] for
varlen). Not supported, and refused with ValueError: dropout_p != 0, softcap != 0, alibi_slopes, a
window extending right of the diagonal (right > 0), block_table. deterministic is accepted (the
forward pass is deterministic). return_attn_probs=True returns (out, softmax_lse, None): the
probabilities are not materialised (FlashAttention documents them as a testing aid), the LSE is exact.
"""
import flashport

__all__ = ["flash_attn_func", "flash_attn_varlen_func"]


def _check_unsupported(dropout_p, softcap, alibi_slopes, window_size):
    if dropout_p != 0.0:
        raise ValueError(f"flashport.flash_attn: dropout is not supported (dropout_p={dropout_p}); pass 0.0")
    if softcap != 0.0:
        raise ValueError(f"flashport.flash_attn: softcap is not supported (softcap={softcap})")
    if alibi_slopes is not None:
        raise ValueError("flashport.flash_attn: alibi_slopes are not supported")
    if len(window_size) != 2:
        raise ValueError(f"flashport.flash_attn: window_size must be (left, right), got {window_size!r}")
    return (int(window_size[0]), int(window_size[1]))


def _window(window_size, causal):
    left, right = window_size
    if causal:
        right = 0  # FlashAttention: causal means no key right of the diagonal, whatever right says
    if left == -1 and right == -1:
        return None
    if left < 0:
        left = -1
    return (left, right)


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                    alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """q [batch, seqlen_q, nheads, headdim]; k, v [batch, seqlen_k, nheads_k, headdim].
    Returns out [batch, seqlen_q, nheads, headdim], or (out, softmax_lse [batch, nheads, seqlen_q], None)
    with return_attn_probs."""
    window = _window(_check_unsupported(dropout_p, softcap, alibi_slopes, window_size), causal)
    result = flashport.attention(q, k, v, causal=bool(causal), scale=softmax_scale, window=window,
                                 return_lse=bool(return_attn_probs))
    return (*result, None) if return_attn_probs else result


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                           softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, block_table=None):
    """q [total_q, nheads, headdim]; k, v [total_k, nheads_k, headdim]; cu_seqlens_q/k int32 [batch + 1].
    Returns out [total_q, nheads, headdim], or (out, softmax_lse [nheads, total_q], None) with
    return_attn_probs. A paged cache (block_table) goes through flashport.paged_attention instead."""
    if block_table is not None:
        raise ValueError("flashport.flash_attn: block_table is not supported here; use flashport.paged_attention "
                         "(vLLM's block-table layout)")
    window = _window(_check_unsupported(dropout_p, softcap, alibi_slopes, window_size), causal)
    result = flashport.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                        causal=bool(causal), scale=softmax_scale, window=window,
                                        return_lse=bool(return_attn_probs))
    return (*result, None) if return_attn_probs else result
