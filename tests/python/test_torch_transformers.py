"""flashport.integrations.transformers: the attention function called the way transformers calls it
(module, query/key/value [b, h, s, d], a 2-D padding mask from the registered mask function or a 4-D
bool/float mask, scaling, sliding_window), with left padding, decode and chunked prefill against a KV
cache, GQA and windows, against a float64 reference; then, where `import transformers` works, a tiny
random Qwen2 with attn_implementation="flashport" against "sdpa"."""
import math

import pytest

from torch_support import DEVICES, randn

import torch
import flashport.integrations.transformers as fpt


class StandIn(torch.nn.Module):
    """What the attention function reads from transformers' attention module."""
    def __init__(self, groups, causal=True):
        super().__init__()
        self.num_key_value_groups, self.is_causal = groups, causal
        self.eval()


def padding_2d(pads, total):
    """transformers' [batch, total] attention_mask (1 real, 0 pad) with left padding."""
    m = torch.ones(len(pads), total, dtype=torch.long)
    for r, p in enumerate(pads):
        m[r, :p] = 0
    return m


def reference(q, k, v, valid, scale, causal=True, window=None):
    """float64 bhsd attention; queries are the last q_len positions of kv_len. Returns (out [b, s, h, d],
    real [b, s]: rows that see a key)."""
    q, k, v = q.double().cpu(), k.double().cpu(), v.double().cpu()
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    q_len, kv_len = q.shape[2], k.shape[2]
    pos = torch.arange(q_len)[:, None] + (kv_len - q_len)
    j = torch.arange(kv_len)[None, :]
    vis = torch.ones(q_len, kv_len, dtype=torch.bool)
    if causal:
        vis &= j <= pos
    if window is not None:
        vis &= j > pos - window
    vis = vis[None] & valid.bool().cpu()[:, None, :] & valid.bool().cpu()[:, -q_len:, None]
    s = torch.einsum("bhqd,bhkd->bhqk", q, k) * scale
    s = s.masked_fill(~vis[:, None], float("-inf"))
    p = torch.softmax(s, -1).nan_to_num(0.0)
    return torch.einsum("bhqk,bhkd->bqhd", p, v), vis.any(2)


def sdpa_style_4d(valid, q_len, causal=True, window=None, as_float=None):
    """The 4-D mask transformers' sdpa_mask (bool, fully masked rows opened) or eager_mask (float) builds."""
    kv_len = valid.shape[1]
    pos = torch.arange(q_len)[:, None] + (kv_len - q_len)
    j = torch.arange(kv_len)[None, :]
    vis = (j <= pos) if causal else torch.ones(q_len, kv_len, dtype=torch.bool)
    if window is not None:
        vis = vis & (j > pos - window)
    m = vis[None, None] & valid.bool()[:, None, None, :]
    if as_float is None:
        return m | ~m.any(-1, keepdim=True)  # SDPA's fix for rows that see nothing
    return torch.zeros(m.shape, dtype=as_float).masked_fill(~m, torch.finfo(as_float).min)


def check(out, ref, real, dtype):
    tol = {torch.float32: 2e-5, torch.bfloat16: 4 * 2.0**-8}[dtype]
    assert out.dtype == dtype and out.shape == ref.shape
    err = (out.double().cpu() - ref)[real].abs().max().item()
    assert err <= tol * max(1.0, ref.abs().max().item()), f"max error {err:.3g}"
    assert (out.cpu()[~real] == 0).all(), "padding query rows must be zeros"


# (pads per row, q_len, past, heads, kv_heads, head_dim, sliding_window)
CASES = [
    ((0, 3, 5), 12, 0, 4, 2, 32, None),   # left-padded prefill, GQA 2
    ((0, 3, 5), 1, 12, 4, 2, 32, None),   # decode against the cache
    ((2, 0), 3, 9, 6, 1, 64, None),       # chunked prefill, MQA
    ((4, 1), 10, 0, 2, 2, 16, 4),         # sliding window
    ((0, 0), 5, 3, 2, 1, 16, None),       # nothing padded: the mask function returns None
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("mask_kind", ["mask_function", "bool4d", "float4d"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "pads{}_q{}_past{}_h{}_{}_d{}_sw{}".format(*c))
def test_attention_forward_like_transformers(device, dtype, mask_kind, case):
    pads, q_len, past, h, hkv, d, sw = case
    b, kv_len = len(pads), past + q_len
    q = randn((b, h, q_len, d), dtype, 1).to(device)
    k = randn((b, hkv, kv_len, d), dtype, 2).to(device)
    v = randn((b, hkv, kv_len, d), dtype, 3).to(device)
    valid = padding_2d(pads, kv_len)
    if mask_kind == "mask_function":
        mask = fpt.mask_function(batch_size=b, cache_position=torch.arange(past, kv_len), kv_length=kv_len,
                                 kv_offset=0, attention_mask=valid.to(device).bool(), allow_is_causal_skip=True,
                                 dtype=dtype, config=None)
        assert (mask is None) == (sum(pads) == 0)
    else:
        mask = sdpa_style_4d(valid, q_len, window=sw, as_float=None if mask_kind == "bool4d" else dtype).to(device)
    scale = 1 / math.sqrt(d)
    out, weights = fpt.attention_forward(StandIn(h // hkv), q, k, v, mask, dropout=0.0, scaling=scale,
                                         sliding_window=sw, position_ids=None)
    assert weights is None
    ref, real = reference(q, k, v, valid, scale, window=sw)
    check(out, ref, real, dtype)
    # The same mask again (the next layer): the spans come from the cache on the tensor.
    out2, _ = fpt.attention_forward(StandIn(h // hkv), q, k, v, mask, dropout=0.0, scaling=scale, sliding_window=sw)
    assert torch.equal(out, out2)


def test_static_cache_tail_and_right_padding():
    # A static cache: 20 slots, 13 written (the mask is 13 long), the query is position 12.
    b, h, d = 2, 2, 16
    valid = padding_2d((0, 4), 13)
    mask = fpt.mask_function(batch_size=b, cache_position=torch.tensor([12]), kv_length=20, kv_offset=0,
                             attention_mask=valid.bool())
    assert mask.shape == (b, 20) and not mask[:, 13:].any()
    q = randn((b, h, 1, d), torch.float32, 4)
    k, v = randn((b, h, 20, d), torch.float32, 5), randn((b, h, 20, d), torch.float32, 6)
    k[:, :, 13:], v[:, :, 13:] = 1e4, 1e4  # unwritten slots must not be read
    out, _ = fpt.attention_forward(StandIn(1), q, k, v, mask, scaling=0.25)
    ref, real = reference(q, k[:, :, :13], v[:, :, :13], valid, 0.25)
    check(out, ref, real, torch.float32)
    # Right padding without a cache (q_len == kv_len): queries past the span are padding (zeros).
    valid = torch.tensor([[1] * 9 + [0] * 3, [1] * 12])
    q, k, v = (randn((2, 2, 12, 16), torch.float32, s) for s in (7, 8, 9))
    out, _ = fpt.attention_forward(StandIn(1), q, k, v, valid.bool(), scaling=0.25)
    ref, real = reference(q, k, v, valid, 0.25)
    ref[0, 9:] = 0  # the reference masks pad keys and pad queries; its rows 9.. of row 0 see keys
    check(out, ref, real & torch.tensor([[True] * 9 + [False] * 3, [True] * 12]), torch.float32)


def test_refusals():
    q = randn((1, 2, 6, 16), torch.float32, 10)
    mod = StandIn(1)
    with pytest.raises(ValueError, match="contiguous span"):
        fpt.attention_forward(mod, q, q, q, torch.tensor([[1, 1, 0, 1, 1, 1]]).bool())
    block = torch.ones(1, 1, 6, 6, dtype=torch.bool)  # bidirectional: not what a causal module expects
    with pytest.raises(ValueError, match="sdpa"):
        fpt.attention_forward(mod, q, q, q, block)
    bias = torch.zeros(1, 1, 6, 6)
    bias[..., 0] = -1.0
    with pytest.raises(ValueError, match="bias"):
        fpt.attention_forward(mod, q, q, q, bias)
    with pytest.raises(ValueError, match="dropout"):
        fpt.attention_forward(mod, q, q, q, None, dropout=0.1)
    # A non-causal module (an encoder) with its bidirectional mask is fine.
    out, _ = fpt.attention_forward(StandIn(1, causal=False), q, q, q, block, scaling=0.25)
    ref, real = reference(q, q, q, torch.ones(1, 6), 0.25, causal=False)
    check(out, ref, real, torch.float32)


# ---- the real transformers, where it imports -------------------------------------------------------------

def _transformers():
    try:
        import transformers
    except ImportError as e:
        pytest.skip(f"transformers is not importable here ({e}): only the stand-in tests ran; the real "
                    "transformers runs in scripts/gpu/h200.sh torch")
    return transformers


def tiny_qwen2(transformers, impl, device, dtype=torch.float32):
    cfg = transformers.Qwen2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation=impl).to(device, dtype).eval()


@pytest.mark.parametrize("device", DEVICES)
def test_real_transformers_qwen2_matches_sdpa(device):
    transformers = _transformers()
    name = fpt.register()  # "flashport", or its alias where transformers reserves "flash" names
    ours, ref = tiny_qwen2(transformers, name, device), tiny_qwen2(transformers, "sdpa", device)
    ids = torch.randint(3, 256, (2, 17), generator=torch.Generator().manual_seed(1)).to(device)
    mask = torch.ones_like(ids)
    mask[1, :5] = 0  # left padding
    with torch.no_grad():
        a = ours(input_ids=ids, attention_mask=mask).logits
        b = ref(input_ids=ids, attention_mask=mask).logits
    keep = mask.bool()
    assert (a[keep] - b[keep]).abs().max().item() < 1e-3
    gen = dict(attention_mask=mask, max_new_tokens=8, do_sample=False, return_dict_in_generate=True, output_scores=True,
               pad_token_id=0)
    with torch.no_grad():
        ga, gb = ours.generate(ids, **gen), ref.generate(ids, **gen)
    # Greedy tokens agree until a step where sdpa's top-2 logits are within the implementations' difference.
    for r in range(ids.shape[0]):
        for t, (x, y) in enumerate(zip(ga.sequences[r, 17:].tolist(), gb.sequences[r, 17:].tolist())):
            if x != y:
                top2 = gb.scores[t][r].float().topk(2).values
                assert (top2[0] - top2[1]).item() < 1e-3, f"row {r} step {t}: {x} vs {y} with a clear margin"
                break


def _fake_transformers(monkeypatch, reserves_flash):
    """A stand-in for the parts of transformers register() touches: the two interfaces (recording what is
    registered) and, for transformers 5, is_flash_attention_requested ("flash" anywhere in the name)."""
    import sys
    import types
    registered = {"attention": [], "mask": []}
    root = types.ModuleType("transformers")
    root.AttentionInterface = types.SimpleNamespace(register=lambda n, f: registered["attention"].append(n))
    masking = types.ModuleType("transformers.masking_utils")
    masking.AttentionMaskInterface = types.SimpleNamespace(register=lambda n, f: registered["mask"].append(n))
    utils, generic = types.ModuleType("transformers.utils"), types.ModuleType("transformers.utils.generic")
    if reserves_flash:
        generic.is_flash_attention_requested = lambda requested_attention_implementation=None: (
            "flash" in requested_attention_implementation)
    modules = {"transformers": root, "transformers.masking_utils": masking, "transformers.utils": utils,
               "transformers.utils.generic": generic}
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    return registered


@pytest.mark.parametrize("reserves_flash", [False, True])
def test_register_returns_a_name_transformers_accepts(monkeypatch, reserves_flash):
    registered = _fake_transformers(monkeypatch, reserves_flash)
    name = fpt.register()
    assert name == ("fport" if reserves_flash else "flashport")
    assert name in registered["attention"] and name in registered["mask"]
    if reserves_flash:
        with pytest.raises(ValueError, match="without 'flash'"):
            fpt.register("my_flash")
    assert fpt.register("mine") == "mine"
