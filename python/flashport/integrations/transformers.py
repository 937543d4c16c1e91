"""flashport as a Hugging Face transformers attention implementation.

    import flashport.integrations.transformers as fpt
    name = fpt.register()                            # once, before building the model
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation=name)

The name is "flashport" where transformers allows it. transformers 5 takes every name that contains
"flash" for a FlashAttention build or a hub kernel (utils.generic.is_flash_attention_requested) and
tries to import one at model construction, so there register() also registers the alias "fport" and
returns it. Use the name register() returns.

register() adds two entries under each name: the attention function (transformers' AttentionInterface)
and its mask function (transformers' AttentionMaskInterface). The mask entry matters: for a name it
does not know, transformers builds no mask at all, so padding (and, for the SDPA-style "no mask means
not causal" functions, causality) would be lost.

What the attention function does with transformers' call (module, query, key, value, attention_mask,
dropout, scaling, sliding_window, ...), query [batch, heads, q_len, head_dim] and key/value
[batch, kv_heads, kv_len, head_dim]:

- reads them in place (layout="bhsd", no copy) and serves GQA/MQA natively (no repeat_kv);
- causal (module.is_causal, or an is_causal kwarg) is bottom-right: the q_len queries are the last
  q_len positions of the keys, the rule of prefill and of decode with a KV cache;
- sliding_window W (transformers: key kv visible from query q when q - kv < W) is flashport's
  window=W - 1;
- padding: the mask function hands over a [batch, kv_len] key-validity mask (None when nothing is
  padded, so the common case needs no mask and no host synchronisation). Each row's real keys must be
  one contiguous span: left padding (batched generate), right padding (without a cache), or the
  unwritten tail of a static cache. Rows with padding run one call each on their span (one host
  synchronisation per forward to read the spans, cached on the mask tensor for the other layers);
  padded query rows come out as zeros. 4-D masks (bool, True = attend, or additive float with 0 and
  large negatives), as older transformers or users pass them, are accepted when they are exactly
  causal (and window) plus such padding: they are checked on the host, and anything else (a bias, a
  packed-sequence or bidirectional-image block mask) raises ValueError.
- returns (attn_output [batch, q_len, heads, head_dim], None).

Not supported (ValueError): dropout > 0, softcap, attention sinks (s_aux), packed sequences via
cu_seq_lens_* kwargs, output_attentions weights (None is returned, as SDPA does). Mask functions with
extra overlays (or_mask_function / and_mask_function, e.g. bidirectional image tokens) are not seen
by this mask function; models that use them need "sdpa".
"""
import torch

import flashport
from ._padding import spans_from_valid

NAME = "flashport"
ALIAS = "fport"  # for transformers that reserve names containing "flash" (see the module docstring)


def name_is_taken_for_flash_attention(name):
    """Whether this transformers reads `name` as a FlashAttention request (and would try to import one)."""
    try:
        from transformers.utils.generic import is_flash_attention_requested
    except ImportError:  # older transformers: only "flash_attention_*" names are FlashAttention
        return name.startswith("flash_")
    return bool(is_flash_attention_requested(requested_attention_implementation=name))


def register(name=None):
    """Register flashport's attention and mask functions with transformers; returns the name to pass as
    attn_implementation: `name` if given (refused when transformers would read it as FlashAttention),
    else "flashport", or "fport" where transformers reserves names containing "flash"."""
    from transformers import AttentionInterface
    if name is not None and name_is_taken_for_flash_attention(name):
        raise ValueError(f"flashport: transformers reads attn_implementation={name!r} as a FlashAttention "
                         f"request; pick a name without 'flash' (register() alone picks {ALIAS!r})")
    names = [name] if name is not None else [NAME, ALIAS]
    try:
        from transformers.masking_utils import AttentionMaskInterface
    except ImportError:  # transformers before the mask interface: it passes 4-D masks, handled here
        AttentionMaskInterface = None
    for n in names:
        AttentionInterface.register(n, attention_forward)
        if AttentionMaskInterface is not None:
            AttentionMaskInterface.register(n, mask_function)
    if name is not None:
        return name
    return ALIAS if name_is_taken_for_flash_attention(NAME) else NAME


def mask_function(batch_size=None, cache_position=None, kv_length=None, kv_offset=0, mask_function=None,
                  attention_mask=None, **kwargs):
    """transformers' mask interface: the [batch, kv_length] key-validity mask of the keys this layer
    attends over (bool, True = real key), or None when every key is real. attention_mask is the 2-D
    padding mask over positions 0..; the layer's keys are positions kv_offset .. kv_offset + kv_length
    - 1. Positions past the last query (a static cache's unwritten slots) are not valid."""
    kv_offset = int(kv_offset or 0)
    q_end = _query_end(cache_position, kwargs)
    valid = None
    if attention_mask is not None:
        if attention_mask.dim() != 2:
            return attention_mask  # already 4-D: attention_forward checks it
        valid = attention_mask[:, kv_offset:kv_offset + kv_length].to(torch.bool)
        if valid.shape[1] < kv_length:
            pad = valid.new_zeros(valid.shape[0], kv_length - valid.shape[1])
            valid = torch.cat([valid, pad], 1)
    if q_end is not None and q_end - kv_offset < kv_length:
        seen = torch.arange(kv_length, device=valid.device if valid is not None else None) < q_end - kv_offset
        valid = seen.expand(batch_size, -1) if valid is None else valid & seen
    if valid is None or bool(valid.all()):
        return None
    return valid


def _query_end(cache_position, kwargs):
    """One past the last query's position when it may fall short of the keys (static caches), else None."""
    if kwargs.get("q_length") is not None and kwargs.get("q_offset") is not None:
        return int(kwargs["q_offset"]) + int(kwargs["q_length"])
    if cache_position is not None and cache_position.numel():
        return int(cache_position[-1]) + 1
    return None


def attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None, sliding_window=None,
                      is_causal=None, softcap=None, **kwargs):
    """transformers' attention function contract (see the module docstring); returns (out [b, s, h, d], None)."""
    if dropout:
        raise ValueError(f"flashport: attention dropout is not supported (got {dropout}); use model.eval() or "
                         "attention_dropout=0")
    if softcap:
        raise ValueError("flashport: logit softcapping is not supported")
    if kwargs.get("s_aux") is not None:
        raise ValueError("flashport: attention sinks (s_aux) are not supported")
    if kwargs.get("cu_seq_lens_q") is not None or kwargs.get("cu_seq_lens_k") is not None:
        raise ValueError("flashport: packed sequences (cu_seq_lens_*) are not supported by this plug-in; "
                         "call flashport.attention_varlen directly")
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    causal = bool(causal)
    window = None if sliding_window is None else int(sliding_window) - 1
    q_len, kv_len = query.shape[2], key.shape[2]
    spans = _spans(attention_mask, query.shape[0], q_len, kv_len, causal, window)
    if spans is None:
        out = flashport.attention(query, key, value, causal=causal, scale=scaling, window=window, layout="bhsd")
        return out.transpose(1, 2), None
    return run_spans(query, key, value, spans, causal, scaling, window), None


def run_spans(query, key, value, spans, causal, scale, window, pad_queries=True):
    """Attention for bhsd tensors whose row r keeps keys spans[r] = (start, end). The queries are the last
    q_len positions before `end`, except without a cache (q_len == kv_len) where query i is position i
    and queries at or past `end` are padding (pad_queries=False: every query is real, for cross- and
    non-causal attention). Padding rows are zeros. Returns out [b, q_len, h, d]."""
    b, h, q_len, d = query.shape
    kv_len = key.shape[2]
    out = query.new_zeros(b, q_len, h, d)
    same = all(sp == spans[0] for sp in spans)
    groups = [(slice(0, b), spans[0])] if same else [(slice(r, r + 1), sp) for r, sp in enumerate(spans)]
    for rows, (s, e) in groups:
        nq = min(e, q_len) if q_len == kv_len and pad_queries else q_len
        if e <= s or nq == 0:
            continue
        o = flashport.attention(query[rows, :, :nq], key[rows, :, s:e], value[rows, :, s:e], causal=causal,
                                scale=scale, window=window, layout="bhsd")
        out[rows, :nq] = o.transpose(1, 2)
    return out


def _spans(mask, batch, q_len, kv_len, causal, window):
    """None when nothing is masked beyond causal/window; else the per-row key spans (cached on the mask)."""
    if mask is None:
        return None
    if not isinstance(mask, torch.Tensor):
        raise ValueError(f"flashport: unsupported attention mask type {type(mask).__name__} (a BlockMask is flex "
                         "attention's)")
    key = (mask._version, q_len, kv_len, causal, window)
    cached = getattr(mask, "_flashport_spans", None)
    if cached is not None and cached[0] == key:
        return cached[1]
    if mask.dim() == 2:
        if mask.shape != (batch, kv_len):
            raise ValueError(f"flashport: a 2-D padding mask must be [batch, kv_len] = [{batch}, {kv_len}], got "
                             f"{tuple(mask.shape)}")
        spans = spans_from_valid(mask.bool() if mask.dtype != torch.bool else mask)
    elif mask.dim() == 4:
        spans = _spans_from_4d(mask, batch, q_len, kv_len, causal, window)
    else:
        raise ValueError(f"flashport: the attention mask must be 2-D [batch, kv_len] or 4-D [batch, 1|heads, q_len, "
                         f"kv_len], got {tuple(mask.shape)}")
    if all(s == 0 and e == kv_len for s, e in spans):
        spans = None
    try:
        mask._flashport_spans = (key, spans)
    except (AttributeError, RuntimeError):
        pass
    return spans


def _allowed(mask):
    """4-D mask -> bool allowed (True = attend), on the CPU."""
    m = mask.detach().cpu()
    if m.dtype == torch.bool:
        return m
    if not m.is_floating_point():
        return m != 0
    big = (m <= -1e4) | torch.isneginf(m)
    if not ((m == 0) | big).all():
        raise ValueError("flashport: a float attention mask with values other than 0 and large negatives is an "
                         "attention bias, which flashport does not take")
    return m == 0


def _spans_from_4d(mask, batch, q_len, kv_len, causal, window):
    if mask.shape[0] not in (1, batch) or mask.shape[2] != q_len or mask.shape[3] != kv_len:
        raise ValueError(f"flashport: 4-D mask shape {tuple(mask.shape)} does not match batch {batch}, q_len {q_len}, "
                         f"kv_len {kv_len}")
    allowed = _allowed(mask)
    if allowed.shape[1] > 1 and not (allowed == allowed[:, :1]).all():
        raise ValueError("flashport: a per-head attention mask is not supported")
    allowed = allowed[:, 0].expand(batch, q_len, kv_len)
    expected_any = torch.zeros(batch, q_len, kv_len, dtype=torch.bool)
    # Keys some query sees give each row's span; then the whole mask must be exactly what the span,
    # causal and window produce (rows that see nothing there are padding queries: not compared). SDPA's
    # mask opens rows that would see nothing (all True): under causal masking a query before the last
    # key cannot see every key, so such rows are left out of the span.
    seen = allowed
    if causal:
        opened = allowed.all(2) & (torch.arange(q_len) + (kv_len - q_len) < kv_len - 1)[None, :]
        seen = allowed & ~opened[:, :, None]
    spans = spans_from_valid(seen.any(1))
    for r, (s, e) in enumerate(spans):
        expected_any[r] = _visible(q_len, kv_len, s, e, causal, window)
    real = expected_any.any(2, keepdim=True)
    if not torch.equal(allowed & real, expected_any):
        raise ValueError("flashport: the 4-D attention mask is not causal/window masking plus per-row padding (a "
                         "custom or block mask); flashport cannot express it: use attn_implementation=\"sdpa\"")
    return spans


def _visible(q_len, kv_len, s, e, causal, window):
    """bool [q_len, kv_len]: what run_spans computes for one row with span (s, e)."""
    if e <= s:
        return torch.zeros(q_len, kv_len, dtype=torch.bool)
    pos = torch.arange(q_len) if q_len == kv_len else torch.arange(q_len) + (e - q_len)
    j = torch.arange(kv_len)[None, :]
    vis = (j >= s) & (j < e) & (pos[:, None] < e)
    if causal:
        vis &= j <= pos[:, None]
    if window is not None:
        vis &= j >= pos[:, None] - window
    return vis
