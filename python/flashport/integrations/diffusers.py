"""flashport as a diffusers attention processor.

    from flashport.integrations.diffusers import FlashportAttnProcessor
    pipe.unet.set_attn_processor(FlashportAttnProcessor())      # or any model with set_attn_processor

FlashportAttnProcessor follows diffusers' AttnProcessor2_0 call contract,
__call__(attn, hidden_states, encoder_hidden_states=None, attention_mask=None, temb=None, ...), and
the same sequence around the attention: spatial_norm(hidden_states, temb), 4-D [b, c, h, w] inputs
flattened to tokens, group_norm, to_q/to_k/to_v, norm_cross on the encoder states, optional norm_q /
norm_k, then to_out[0] (linear) and to_out[1] (dropout), the residual connection and
rescale_output_factor. The attention itself is flashport.attention on [b, heads, tokens, head_dim]
views of the projections (layout="bhsd": no transposed copies), non-causal, with attn.scale.

Masks: diffusers' attention_mask (after attn.prepare_attention_mask) is a key-padding mask, bool
(True = keep) or additive float (0 keep, -10000 or -inf drop); it must be the same for every head and
every query, and each row's kept keys one contiguous span (e.g. right-padded text tokens): those rows
run on their span. Anything else (a per-query mask, a real bias) raises ValueError.
"""
import torch

import flashport
from ._padding import spans_from_valid
from .transformers import run_spans


class FlashportAttnProcessor:
    """diffusers attention processor running flashport.attention (see the module docstring)."""

    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None, temb=None, *args,
                 **kwargs):
        residual = hidden_states
        if getattr(attn, "spatial_norm", None) is not None:
            hidden_states = attn.spatial_norm(hidden_states, temb)
        input_ndim = hidden_states.ndim
        if input_ndim == 4:
            batch, channel, height, width = hidden_states.shape
            hidden_states = hidden_states.view(batch, channel, height * width).transpose(1, 2)
        context = hidden_states if encoder_hidden_states is None else encoder_hidden_states
        batch, kv_len = context.shape[0], context.shape[1]
        spans = None
        if attention_mask is not None:
            attention_mask = attn.prepare_attention_mask(attention_mask, kv_len, batch)
            spans = _key_spans(attention_mask.view(batch, attn.heads, -1, attention_mask.shape[-1]), kv_len)
        if getattr(attn, "group_norm", None) is not None:
            hidden_states = attn.group_norm(hidden_states.transpose(1, 2)).transpose(1, 2)
        query = attn.to_q(hidden_states)
        if encoder_hidden_states is None:
            encoder_hidden_states = hidden_states
        elif getattr(attn, "norm_cross", None):
            encoder_hidden_states = attn.norm_encoder_hidden_states(encoder_hidden_states)
        key = attn.to_k(encoder_hidden_states)
        value = attn.to_v(encoder_hidden_states)
        head_dim = key.shape[-1] // attn.heads
        # [b, s, heads * d] -> [b, heads, s, d] views (no copies); flashport reads them through strides.
        query = query.view(batch, -1, attn.heads, head_dim).transpose(1, 2)
        key = key.view(batch, -1, attn.heads, head_dim).transpose(1, 2)
        value = value.view(batch, -1, attn.heads, head_dim).transpose(1, 2)
        if getattr(attn, "norm_q", None) is not None:
            query = attn.norm_q(query)
        if getattr(attn, "norm_k", None) is not None:
            key = attn.norm_k(key)
        scale = getattr(attn, "scale", None)
        if spans is None:
            out = flashport.attention(query, key, value, scale=scale, layout="bhsd").transpose(1, 2)
        else:
            out = run_spans(query, key, value, spans, False, scale, None, pad_queries=False)
        # out is a contiguous [b, s, heads, d]: the reshape is free.
        hidden_states = out.reshape(batch, -1, attn.heads * head_dim).to(query.dtype)
        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)
        if input_ndim == 4:
            hidden_states = hidden_states.transpose(-1, -2).reshape(batch, channel, height, width)
        if getattr(attn, "residual_connection", False):
            hidden_states = hidden_states + residual
        return hidden_states / getattr(attn, "rescale_output_factor", 1.0)


def _key_spans(mask, kv_len):
    """[b, heads, 1|q, kv] mask -> per-row key spans, or None when nothing is masked."""
    m = mask.detach()
    if m.dtype == torch.bool:
        keep = m
    else:
        drop = (m <= -1e4) | torch.isneginf(m)
        if not ((m == 0) | drop).all():
            raise ValueError("flashport: an attention mask with values other than 0 and large negatives is an "
                             "attention bias, which flashport does not take")
        keep = ~drop
    if not (keep == keep[:, :1, :1]).all():
        raise ValueError("flashport: the attention mask differs between heads or queries; flashport takes only "
                         "key-padding masks")
    spans = spans_from_valid(keep[:, 0, 0, :kv_len])
    return None if all(s == 0 and e == kv_len for s, e in spans) else spans
