"""xFormers' memory_efficient_attention on flashport, so `from xformers.ops import ...` becomes
`from flashport.xformers import ...`.

Layout is xFormers' [B, M, H, K] (batch, query length, heads, head dim) for the query and [B, N, H, K]
for key and value, which is flashport's own order: no transpose. Also accepted: [B, M, K] (one head)
and [B, M, G, H, K] (G key/value groups of H query heads each: GQA when key/value are expanded over H,
i.e. stride 0 there, as xFormers asks).

Biases: None; LowerTriangularMask (causal, top-left aligned as in xFormers: query i sees keys
j <= i, translated for M != N by flashport.attention(causal="top_left")); and
LowerTriangularFromBottomRightMask (bottom-right, flashport's own rule). xFormers' classes of those
names are accepted too. Tensor biases, block-diagonal and other masks, dropout (p != 0) and a chosen
`op` raise ValueError.
"""
import torch

import flashport

__all__ = ["memory_efficient_attention", "LowerTriangularMask", "LowerTriangularFromBottomRightMask"]


class LowerTriangularMask:
    """Causal mask aligned top-left: query i sees keys j <= i (xFormers' LowerTriangularMask)."""


class LowerTriangularFromBottomRightMask:
    """Causal mask aligned bottom-right: query i sees keys j <= i + N - M (flashport's causal)."""


def _causal_mode(attn_bias):
    if attn_bias is None:
        return False
    if isinstance(attn_bias, torch.Tensor):
        raise ValueError("flashport.xformers: tensor biases are not supported (only None, LowerTriangularMask "
                         "and LowerTriangularFromBottomRightMask)")
    name = type(attn_bias).__name__
    if name == "LowerTriangularMask":
        return "top_left"
    if name == "LowerTriangularFromBottomRightMask":
        return "bottom_right"
    raise ValueError(f"flashport.xformers: attn_bias {name} is not supported (only None, LowerTriangularMask "
                     "and LowerTriangularFromBottomRightMask)")


def memory_efficient_attention(query, key, value, attn_bias=None, p=0.0, scale=None, *, op=None,
                               output_dtype=None):
    """xFormers' memory_efficient_attention: softmax(scale * query key^T + bias) value.

    query [B, M, H, K], key and value [B, N, H, K] (or [B, N, Hkv, K] with H a multiple of Hkv);
    also [B, M, K] and [B, M, G, H, K]. Returns [B, M, H, K] (the query's layout), query's dtype.
    scale None is 1 / sqrt(K). p (dropout) must be 0; op must be None; output_dtype None or query's dtype.
    """
    if p != 0.0:
        raise ValueError(f"flashport.xformers: dropout is not supported (p={p}); pass p=0.0")
    if op is not None:
        raise ValueError(f"flashport.xformers: op={op!r} is not supported; flashport picks its own kernel (op=None)")
    if output_dtype is not None and output_dtype != query.dtype:
        raise ValueError(f"flashport.xformers: output_dtype {output_dtype} differs from the query's {query.dtype}")
    causal = _causal_mode(attn_bias)
    if query.dim() == 3:  # [B, M, K]: one head
        out = flashport.attention(query.unsqueeze(2), key.unsqueeze(2), value.unsqueeze(2), causal=causal,
                                  scale=scale)
        return out.squeeze(2)
    if query.dim() == 5:  # [B, M, G, H, K]: query head g*H + h uses key/value group g
        b, m, g, h, d = query.shape
        key, value = (_groups(t, "key") for t in (key, value))
        out = flashport.attention(query.reshape(b, m, g * h, d), key, value, causal=causal, scale=scale)
        return out.view(b, m, g, h, d)
    if query.dim() != 4:
        raise ValueError(f"flashport.xformers: query must be [B, M, H, K], [B, M, K] or [B, M, G, H, K], got "
                         f"{tuple(query.shape)}")
    return flashport.attention(query, key, value, causal=causal, scale=scale)


def _groups(t, name):
    """[B, N, G, H, K] key/value -> [B, N, G, K] when expanded over H (GQA), else [B, N, G*H, K]."""
    if t.dim() != 5:
        raise ValueError(f"flashport.xformers: with a 5-D query, {name} must be [B, N, G, H, K], got {tuple(t.shape)}")
    if t.shape[3] == 1 or t.stride(3) == 0:
        return t[:, :, :, 0]
    return t.reshape(t.shape[0], t.shape[1], t.shape[2] * t.shape[3], t.shape[4])
