"""Refused requests are Python exceptions carrying flashport's C++ message, never a crash: ValueError for
bad arguments (the planners' checks, before anything is allocated), NotImplementedError for grad."""
import pytest

from torch_support import randn

import torch
import flashport
from flashport.flash_attn import flash_attn_func, flash_attn_varlen_func
from flashport.xformers import memory_efficient_attention


def qkv(h=4, hkv=4, dtype=torch.float32, d=32):
    return randn((1, 9, h, d), dtype, 1), randn((1, 12, hkv, d), dtype, 2), randn((1, 12, hkv, d), dtype, 3)


@pytest.mark.parametrize("call, exc, message", [
    # messages written by src/ops (the C++ planner), reaching Python unchanged
    (lambda: flashport.attention(qkv()[0], qkv()[1].half(), qkv()[2]), ValueError,
     "attention: q, k, v and out must share one dtype, got q fp32, k fp16, v fp32, out fp32"),
    (lambda: flashport.attention(*qkv(h=4, hkv=3)), ValueError,
     "attention: n_heads (4) must be a multiple of n_kv_heads (3) for GQA/MQA"),
    (lambda: flashport.attention(*qkv(d=320)), ValueError, "head_dim 320 is not supported on the CPU"),
    (lambda: flashport.attention(qkv()[0], qkv()[1].to("meta"), qkv()[2]), ValueError, "must be on one device"),
    (lambda: flashport.attention(qkv()[0].int(), qkv()[1], qkv()[2]), ValueError,
     "q must be float32, float16 or bfloat16"),
    (lambda: flashport.attention(qkv()[0], qkv()[1][:, :, :, :16], qkv()[2]), ValueError, "attention: k must be"),
    (lambda: flashport.attention(*qkv(), scale=0.0), ValueError, "scale must be finite and nonzero"),
    (lambda: flashport.attention(*qkv(), window=(4, 2)), ValueError, "right window must be -1"),
    (lambda: flashport.attention(*qkv(), layout="sbhd"), ValueError, "layout must be"),
    (lambda: flashport.attention(qkv()[0][0], qkv()[1][0], qkv()[2][0]), ValueError, "must be a 4-D tensor"),
    (lambda: torch.ops.flashport.attention(*qkv(), impl="fast"), ValueError, "unknown attention implementation"),
    # the wrappers' own refusals
    (lambda: memory_efficient_attention(*qkv(), p=0.1), ValueError, "dropout is not supported"),
    (lambda: memory_efficient_attention(*qkv(), attn_bias=torch.zeros(9, 12)), ValueError, "tensor biases"),
    (lambda: flash_attn_func(*qkv(), dropout_p=0.1), ValueError, "dropout is not supported"),
    (lambda: flash_attn_func(*qkv(), alibi_slopes=torch.ones(4)), ValueError, "alibi_slopes"),
    (lambda: flash_attn_func(*qkv(), window_size=(2, 3)), ValueError, "right window"),
])
def test_refusals_carry_the_message(call, exc, message):
    with pytest.raises(exc) as info:
        call()
    assert message in str(info.value)


def test_varlen_offsets_checked_on_cpu():
    q, k, v = (t[0] for t in qkv())
    bad = torch.tensor([0, 6, 3], dtype=torch.int32)  # decreasing
    good = torch.tensor([0, 6, 12], dtype=torch.int32)
    with pytest.raises(ValueError, match="attention_varlen"):
        flashport.attention_varlen(q, k, v, bad, good, 9, 12)
    with pytest.raises(ValueError, match="cu_seqlens_q must be int32"):
        flashport.attention_varlen(q, k, v, good.long(), good, 9, 12)
    with pytest.raises(ValueError, match="block_table is not supported"):
        flash_attn_varlen_func(q, k, v, good, good, 9, 12, block_table=good)


def test_paged_errors():
    cache = randn((4, 16, 2, 32), torch.float32, 4)
    q = randn((2, 1, 4, 32), torch.float32, 5)
    lens = torch.tensor([5, 20], dtype=torch.int32)
    with pytest.raises(ValueError, match="paged_attention"):  # block id 9 of 4 blocks, read on the CPU
        flashport.paged_attention(q, cache, cache, torch.tensor([[0, 1], [2, 9]], dtype=torch.int32), lens)
    with pytest.raises(ValueError, match="block_size"):
        odd = randn((4, 8, 2, 32), torch.float32, 6)
        flashport.paged_attention(q, odd, odd, torch.tensor([[0, 1], [2, 3]], dtype=torch.int32), lens)
    with pytest.raises(ValueError, match="block_table must be contiguous"):
        table = torch.tensor([[0, 2], [1, 3]], dtype=torch.int32).t()
        flashport.paged_attention(q, cache, cache, table, lens)


def test_requires_grad_is_refused_but_no_grad_runs():
    q, k, v = qkv()
    q.requires_grad_(True)
    with pytest.raises(NotImplementedError, match="flashport.attention: backward is not implemented"):
        flashport.attention(q, k, v)
    with pytest.raises(NotImplementedError, match="backward is not implemented"):
        flash_attn_func(q, k, v)
    with torch.no_grad():
        assert flashport.attention(q, k, v).shape == (1, 9, 4, 32)
    with torch.inference_mode():
        assert flashport.attention(q, k, v).shape == (1, 9, 4, 32)
    cu = torch.tensor([0, 9], dtype=torch.int32)
    with pytest.raises(NotImplementedError, match="attention_varlen: backward"):
        flashport.attention_varlen(q[0], k[0], v[0], cu, torch.tensor([0, 12], dtype=torch.int32), 9, 12)


def test_empty_and_keyless_inputs():
    q, k, v = qkv()
    out = flashport.attention(q[:, :0], k, v)
    assert out.shape == (1, 0, 4, 32)
    out, lse = flashport.attention(q, k[:, :0], v[:, :0], return_lse=True)
    assert torch.equal(out, torch.zeros_like(out)) and torch.isneginf(lse).all()
