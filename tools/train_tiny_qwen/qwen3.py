"""Qwen3 in plain PyTorch, written to compute exactly what transformers' Qwen3ForCausalLM (and so
flashport's src/engine/model_forward.cpp) computes, with the same tensor names, so that the
state_dict can be saved as a Hugging Face folder and loaded by either.

Why not transformers itself: this machine has Debian's PyTorch but no transformers, and the model
is small enough that the recipe fits on one screen. It runs on torch 1.13 (Debian bookworm), which
has no scaled_dot_product_attention, so attention is written out.

Per layer (pre-norm residual):
    h = x + o_proj(attn(rope(q_norm(q_proj(rms(x)))), rope(k_norm(k_proj(rms(x)))), v_proj(rms(x))))
    y = h + down_proj(silu(gate_proj(rms(h))) * up_proj(rms(h)))
then the final norm and lm_head (tied to embed_tokens here, so no lm_head.weight is stored).
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Qwen3Shape:
    vocab_size: int
    hidden_size: int = 256
    intermediate_size: int = 768
    num_hidden_layers: int = 4
    num_attention_heads: int = 8
    num_key_value_heads: int = 2
    head_dim: int = 32
    max_position_embeddings: int = 256
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    tie_word_embeddings: bool = True


class RMSNorm(nn.Module):
    """transformers' Qwen3RMSNorm: normalise in float32, cast back, then scale by the weight."""

    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(dtype)


def rope_cos_sin(positions, head_dim, theta, dtype):
    """Half-split ("rotate_half") RoPE tables as transformers' default rotary embedding builds them:
    inv_freq in float32, freqs = pos * inv_freq, duplicated to head_dim."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    freqs = positions.float()[:, None] * inv_freq[None, :]
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


class Attention(nn.Module):
    def __init__(self, s: Qwen3Shape):
        super().__init__()
        self.s = s
        qd, kvd = s.num_attention_heads * s.head_dim, s.num_key_value_heads * s.head_dim
        self.q_proj = nn.Linear(s.hidden_size, qd, bias=False)
        self.k_proj = nn.Linear(s.hidden_size, kvd, bias=False)
        self.v_proj = nn.Linear(s.hidden_size, kvd, bias=False)
        self.o_proj = nn.Linear(qd, s.hidden_size, bias=False)
        # Qwen3's per-head norms over head_dim, applied before RoPE.
        self.q_norm = RMSNorm(s.head_dim, s.rms_norm_eps)
        self.k_norm = RMSNorm(s.head_dim, s.rms_norm_eps)

    def forward(self, x, cos, sin, mask):
        b, t, _ = x.shape
        s = self.s
        q = self.q_norm(self.q_proj(x).view(b, t, s.num_attention_heads, s.head_dim)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(b, t, s.num_key_value_heads, s.head_dim)).transpose(1, 2)
        v = self.v_proj(x).view(b, t, s.num_key_value_heads, s.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        # GQA: each kv head serves num_attention_heads / num_key_value_heads query heads.
        rep = s.num_attention_heads // s.num_key_value_heads
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(s.head_dim))
        scores = scores.masked_fill(mask, float("-inf"))
        p = torch.softmax(scores.float(), dim=-1).to(q.dtype)
        out = (p @ v).transpose(1, 2).reshape(b, t, -1)
        return self.o_proj(out)


class MLP(nn.Module):
    def __init__(self, s: Qwen3Shape):
        super().__init__()
        self.gate_proj = nn.Linear(s.hidden_size, s.intermediate_size, bias=False)
        self.up_proj = nn.Linear(s.hidden_size, s.intermediate_size, bias=False)
        self.down_proj = nn.Linear(s.intermediate_size, s.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, s: Qwen3Shape):
        super().__init__()
        self.input_layernorm = RMSNorm(s.hidden_size, s.rms_norm_eps)
        self.self_attn = Attention(s)
        self.post_attention_layernorm = RMSNorm(s.hidden_size, s.rms_norm_eps)
        self.mlp = MLP(s)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Body(nn.Module):
    """The `model.` prefix of the checkpoint names."""

    def __init__(self, s: Qwen3Shape):
        super().__init__()
        self.embed_tokens = nn.Embedding(s.vocab_size, s.hidden_size)
        self.layers = nn.ModuleList(Layer(s) for _ in range(s.num_hidden_layers))
        self.norm = RMSNorm(s.hidden_size, s.rms_norm_eps)


class Qwen3ForCausalLM(nn.Module):
    def __init__(self, s: Qwen3Shape):
        super().__init__()
        self.s = s
        self.model = Body(s)
        if not s.tie_word_embeddings:
            self.lm_head = nn.Linear(s.hidden_size, s.vocab_size, bias=False)

    def init_weights(self, generator):
        """GPT-2 style: N(0, 0.02) everywhere, with the two projections that write into the residual
        stream (o_proj, down_proj) scaled by 1/sqrt(2 * layers) so the stream's variance does not
        grow with depth. Norm weights start at 1 (nn.Module default)."""
        std = 0.02
        for name, p in self.named_parameters():
            if name.endswith("norm.weight") or "layernorm" in name:
                continue
            residual_out = name.endswith(("o_proj.weight", "down_proj.weight"))
            scale = 1 / math.sqrt(2 * self.s.num_hidden_layers) if residual_out else 1.0
            with torch.no_grad():
                p.normal_(0.0, std * scale, generator=generator)

    def forward(self, ids):
        """ids [batch, T] (positions 0..T-1) -> logits [batch, T, vocab]."""
        b, t = ids.shape
        x = self.model.embed_tokens(ids)
        cos, sin = rope_cos_sin(torch.arange(t), self.s.head_dim, self.s.rope_theta, x.dtype)
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)  # True above the diagonal: future keys
        for layer in self.model.layers:
            x = layer(x, cos, sin, mask)
        x = self.model.norm(x)
        w = self.model.embed_tokens.weight if self.s.tie_word_embeddings else self.lm_head.weight
        return x @ w.t()

    def param_count(self):
        return sum(p.numel() for p in self.parameters())
