"""flashport.integrations.diffusers.FlashportAttnProcessor in a transformer block written for the test
with diffusers' call sequence (self-attention over the latent tokens, then cross-attention to 77 text
tokens, then the feed-forward), against the same block in float64 with a plain-softmax reference
processor; the 4-D (group norm, residual, rescale) path of the VAE's attention; key-padding masks; and,
where `import diffusers` works, the real diffusers Attention with this processor against AttnProcessor2_0."""
import copy
import math

import pytest

from torch_support import DEVICES, randn

import torch
from flashport.integrations.diffusers import FlashportAttnProcessor


class Attention(torch.nn.Module):
    """The attributes and methods of diffusers' Attention that a processor uses."""
    def __init__(self, query_dim, heads, dim_head, cross_dim=None, group_norm=False, residual=False, rescale=1.0):
        super().__init__()
        inner = heads * dim_head
        self.heads, self.scale = heads, dim_head**-0.5
        self.to_q = torch.nn.Linear(query_dim, inner, bias=False)
        self.to_k = torch.nn.Linear(cross_dim or query_dim, inner, bias=False)
        self.to_v = torch.nn.Linear(cross_dim or query_dim, inner, bias=False)
        self.to_out = torch.nn.ModuleList([torch.nn.Linear(inner, query_dim), torch.nn.Dropout(0.0)])
        self.spatial_norm, self.norm_q, self.norm_k = None, None, None
        self.group_norm = torch.nn.GroupNorm(4, query_dim) if group_norm else None
        self.norm_cross, self.residual_connection, self.rescale_output_factor = False, residual, rescale
        self.processor = None

    def prepare_attention_mask(self, mask, target_length, batch_size, out_dim=3):
        if mask.shape[-1] < target_length:
            mask = torch.nn.functional.pad(mask, (0, target_length - mask.shape[-1]), value=0.0)
        return mask.repeat_interleave(self.heads, dim=0)  # [batch * heads, 1, kv]

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, **kwargs):
        return self.processor(self, hidden_states, encoder_hidden_states, attention_mask, **kwargs)


class ReferenceProcessor:
    """AttnProcessor2_0's sequence with plain softmax attention (what the block computes in float64)."""
    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None, temb=None):
        residual = hidden_states
        ndim = hidden_states.ndim
        if ndim == 4:
            b, c, h, w = hidden_states.shape
            hidden_states = hidden_states.view(b, c, h * w).transpose(1, 2)
        ctx = hidden_states if encoder_hidden_states is None else encoder_hidden_states
        b, kv = ctx.shape[:2]
        if attention_mask is not None:
            attention_mask = attn.prepare_attention_mask(attention_mask, kv, b).view(b, attn.heads, -1, kv)
        if attn.group_norm is not None:
            hidden_states = attn.group_norm(hidden_states.transpose(1, 2)).transpose(1, 2)
        q = attn.to_q(hidden_states)
        ctx = hidden_states if encoder_hidden_states is None else encoder_hidden_states
        k, v = attn.to_k(ctx), attn.to_v(ctx)
        d = k.shape[-1] // attn.heads
        q, k, v = (t.view(b, -1, attn.heads, d).transpose(1, 2) for t in (q, k, v))
        s = q @ k.transpose(-1, -2) * attn.scale
        if attention_mask is not None:
            s = s + attention_mask
        o = torch.softmax(s, -1) @ v
        o = attn.to_out[0](o.transpose(1, 2).reshape(b, -1, attn.heads * d))
        if ndim == 4:
            o = o.transpose(-1, -2).reshape(b, c, h, w)
        if attn.residual_connection:
            o = o + residual
        return o / attn.rescale_output_factor


class Block(torch.nn.Module):
    """A Stable Diffusion transformer block: self-attention, cross-attention (77 text tokens), feed-forward."""
    def __init__(self, dim=64, heads=4, text_dim=48):
        super().__init__()
        self.norm1, self.norm2, self.norm3 = (torch.nn.LayerNorm(dim) for _ in range(3))
        self.attn1 = Attention(dim, heads, dim // heads)
        self.attn2 = Attention(dim, heads, dim // heads, cross_dim=text_dim)
        self.ff = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim))

    def set_processor(self, p):
        self.attn1.processor = self.attn2.processor = p

    def forward(self, x, text, text_mask=None):
        x = self.attn1(self.norm1(x)) + x
        x = self.attn2(self.norm2(x), encoder_hidden_states=text, attention_mask=text_mask) + x
        return self.ff(self.norm3(x)) + x


TOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 4e-2}


def compare(out, ref, dtype):
    assert out.dtype == dtype and not torch.isnan(out).any()
    err = (out.double().cpu() - ref).abs().max().item()
    assert err <= TOL[dtype] * max(1.0, ref.abs().max().item()), f"max error {err:.3g} ({dtype})"


def run_pair(module, args, dtype, device):
    ref_mod = copy.deepcopy(module).double()
    ref_mod.set_processor(ReferenceProcessor()) if hasattr(ref_mod, "set_processor") else setattr(
        ref_mod, "processor", ReferenceProcessor())
    mod = copy.deepcopy(module).to(device=device, dtype=dtype)
    mod.set_processor(FlashportAttnProcessor()) if hasattr(mod, "set_processor") else setattr(
        mod, "processor", FlashportAttnProcessor())
    with torch.no_grad():
        # The reference sees the same rounded inputs.
        args = [a.to(dtype) if a is not None and a.is_floating_point() else a for a in args]
        ref = ref_mod(*[a.double() if a is not None and a.is_floating_point() else a for a in args])
        out = mod(*[a.to(device) if a is not None else a for a in args])
    return out, ref


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["fp32", "fp16", "bf16"])
def test_transformer_block_self_and_cross(device, dtype):
    if device == "cpu" and dtype == torch.float16 and torch.__version__ < "2":
        pytest.skip("torch 1.x has no fp16 LayerNorm on the CPU (the block's, not flashport's)")
    torch.manual_seed(0)
    block = Block()
    x, text = randn((2, 16 * 16, 64), torch.float32, 1), randn((2, 77, 48), torch.float32, 2)
    out, ref = run_pair(block, [x, text], dtype, device)
    compare(out, ref, dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_text_padding_mask(device):
    torch.manual_seed(1)
    block = Block()
    x, text = randn((2, 64, 64), torch.float32, 3), randn((2, 77, 48), torch.float32, 4)
    keep = torch.ones(2, 77, dtype=torch.bool)
    keep[1, 20:] = False  # right-padded prompt
    bias = torch.zeros(2, 1, 77).masked_fill(~keep[:, None], -10000.0)  # diffusers' additive form
    out, ref = run_pair(block, [x, text, bias], torch.float32, device)
    compare(out, ref, torch.float32)
    # Without the mask the padded row changes: the mask did something.
    out_nomask, _ = run_pair(block, [x, text, None], torch.float32, device)
    assert (out_nomask[1].cpu() - out[1].cpu()).abs().max() > 1e-3


@pytest.mark.parametrize("device", DEVICES)
def test_spatial_attention_4d_group_norm_residual(device):
    torch.manual_seed(2)
    attn = Attention(32, 1, 32, group_norm=True, residual=True, rescale=2.0)  # the VAE mid-block's shape
    x = randn((2, 32, 8, 8), torch.float32, 5)
    out, ref = run_pair(attn, [x], torch.float32, device)
    assert out.shape == x.shape
    compare(out, ref, torch.float32)


def test_refuses_per_query_masks():
    attn = Attention(16, 2, 8)
    attn.processor = FlashportAttnProcessor()
    x = randn((1, 5, 16), torch.float32, 6)
    mask = torch.zeros(1, 5, 5)
    mask[0, 0, 1] = -10000.0
    with pytest.raises(ValueError, match="key-padding"):
        attn(x, attention_mask=mask)


@pytest.mark.parametrize("device", DEVICES)
def test_real_diffusers_attention(device):
    try:
        from diffusers.models.attention_processor import Attention as DAttention, AttnProcessor2_0
    except ImportError as e:
        pytest.skip(f"diffusers is not importable here ({e}): only the stand-in block ran")
    torch.manual_seed(3)
    attn = DAttention(query_dim=64, cross_attention_dim=48, heads=4, dim_head=16).to(device).eval()
    x, text = randn((2, 256, 64), torch.float32, 7).to(device), randn((2, 77, 48), torch.float32, 8).to(device)
    with torch.no_grad():
        attn.set_processor(AttnProcessor2_0())
        ref = attn(x, encoder_hidden_states=text)
        attn.set_processor(FlashportAttnProcessor())
        out = attn(x, encoder_hidden_states=text)
    assert (out - ref).abs().max().item() < 1e-4
