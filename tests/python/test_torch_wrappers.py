"""The compatibility wrappers: flashport.xformers.memory_efficient_attention and
flashport.flash_attn.flash_attn_func / flash_attn_varlen_func keep their libraries' argument names and
meaning (causal alignment included), checked against the float64 reference."""
import inspect

import pytest

from torch_support import assert_close_to, assert_lse_close, randn, reference

import torch
from flashport import xformers as fx
from flashport.flash_attn import flash_attn_func, flash_attn_varlen_func


def test_signatures():
    names = lambda f: list(inspect.signature(f).parameters)
    assert names(flash_attn_func)[:10] == ["q", "k", "v", "dropout_p", "softmax_scale", "causal", "window_size",
                                           "softcap", "alibi_slopes", "deterministic"]
    assert "return_attn_probs" in names(flash_attn_func)
    assert names(flash_attn_varlen_func)[:11] == ["q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q",
                                                  "max_seqlen_k", "dropout_p", "softmax_scale", "causal",
                                                  "window_size"]
    assert names(fx.memory_efficient_attention)[:6] == ["query", "key", "value", "attn_bias", "p", "scale"]
    sig = inspect.signature(flash_attn_func)
    assert sig.parameters["window_size"].default == (-1, -1) and sig.parameters["dropout_p"].default == 0.0


@pytest.mark.parametrize("sq, skv", [(7, 19), (19, 7), (12, 12)])
@pytest.mark.parametrize("window_size", [(-1, -1), (4, 0), (4, -1)])
def test_flash_attn_func_bottom_right(sq, skv, window_size):
    dt = torch.float16
    q, k, v = randn((2, sq, 6, 64), dt, 1), randn((2, skv, 3, 64), dt, 2), randn((2, skv, 3, 64), dt, 3)
    for causal in (False, True):
        out, lse, probs = flash_attn_func(q, k, v, softmax_scale=0.2, causal=causal, window_size=window_size,
                                          return_attn_probs=True)
        ref, ref_lse = reference(q, k, v, causal or window_size[1] == 0, 0.2, window_size[0])
        assert probs is None
        assert_close_to(out, ref, dt)
        assert_lse_close(lse, ref_lse)


def test_flash_attn_varlen_func():
    cu_q, cu_k = torch.tensor([0, 3, 10], dtype=torch.int32), torch.tensor([0, 8, 12], dtype=torch.int32)
    q, k, v = randn((10, 4, 32), torch.float32, 4), randn((12, 2, 32), torch.float32, 5), randn((12, 2, 32),
                                                                                                torch.float32, 6)
    out = flash_attn_varlen_func(q, k, v, cu_q, cu_k, 7, 8, causal=True)
    for b in range(2):
        qs, ks = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        assert_close_to(out[None, qs], reference(q[None, qs], k[None, ks], v[None, ks], True)[0], torch.float32)


class LowerTriangularMask:  # a stand-in for xformers.ops.LowerTriangularMask: accepted by class name
    pass


@pytest.mark.parametrize("m, n", [(5, 17), (17, 5), (9, 9)])
@pytest.mark.parametrize("bias", [fx.LowerTriangularMask(), LowerTriangularMask()], ids=["ours", "by_name"])
def test_xformers_lower_triangular_is_top_left(m, n, bias):
    dt = torch.bfloat16
    q, k, v = randn((2, m, 4, 40), dt, 7), randn((2, n, 4, 40), dt, 8), randn((2, n, 4, 40), dt, 9)
    out = fx.memory_efficient_attention(q, k, v, attn_bias=bias)
    assert_close_to(out, reference(q, k, v, True, top_left=True)[0], dt)
    out = fx.memory_efficient_attention(q, k, v, attn_bias=fx.LowerTriangularFromBottomRightMask(), scale=0.5)
    assert_close_to(out, reference(q, k, v, True, 0.5)[0], dt)


def test_xformers_other_layouts():
    q, k = randn((2, 11, 32), torch.float32, 10), randn((2, 13, 32), torch.float32, 11)
    out = fx.memory_efficient_attention(q, k, k)
    assert out.shape == (2, 11, 32)
    assert_close_to(out, reference(q[:, :, None], k[:, :, None], k[:, :, None])[0][:, :, 0], torch.float32)
    # [B, M, G, H, K]: 2 groups of 3 query heads, key/value expanded over H (GQA)
    q5 = randn((1, 6, 2, 3, 16), torch.float32, 12)
    kv = randn((1, 8, 2, 1, 16), torch.float32, 13).expand(1, 8, 2, 3, 16)
    out = fx.memory_efficient_attention(q5, kv, kv)
    ref = reference(q5.reshape(1, 6, 6, 16), kv[:, :, :, 0], kv[:, :, :, 0])[0]
    assert_close_to(out.reshape(1, 6, 6, 16), ref, torch.float32)
