"""The extension on CUDA (skips without it): the op against SDPA in the same run over dtypes, layouts,
causal and GQA; torch.compile(fullgraph=True) of a module calling flashport.attention; CUDA graph
capture and replay of attention and paged_attention; the current stream honoured (a side stream whose
producer is deliberately delayed); transformers attn_implementation="flashport" on tiny random Qwen2 and
Qwen3 models in bf16 against "sdpa" (logits, greedy generate up to near-ties, batched generation with left
padding against per-prompt generation)."""
import math

import pytest

from torch_support import TOL, randn, reference

import torch
import flashport

if not torch.cuda.is_available() or "CUDA" not in flashport.build_info():
    pytest.skip(f"no CUDA here (torch.cuda.is_available() = {torch.cuda.is_available()}, extension: "
                f"{flashport.build_info()}): the GPU tests run in scripts/gpu/h200.sh torch", allow_module_level=True)

import torch.nn.functional as F

DEV = "cuda"
DT = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


def sdpa_bshd(q, k, v, causal):
    """SDPA on bshd tensors, GQA by repeat, causal bottom-right by an explicit mask when q_len != kv_len."""
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    rep = qt.shape[1] // kt.shape[1]
    kt, vt = kt.repeat_interleave(rep, 1), vt.repeat_interleave(rep, 1)
    sq, skv = qt.shape[2], kt.shape[2]
    mask = None
    if causal and sq != skv:
        mask = torch.ones(sq, skv, dtype=torch.bool, device=q.device).tril(skv - sq)
    o = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask, is_causal=causal and sq == skv)
    return o.transpose(1, 2)


# (batch, q_len, kv_len, heads, kv_heads, head_dim, causal)
CASES = [(2, 256, 256, 8, 8, 64, False), (2, 256, 256, 8, 2, 128, True), (1, 64, 1000, 16, 4, 128, True),
         (3, 1, 777, 8, 1, 64, True), (1, 333, 333, 4, 4, 40, False), (2, 128, 128, 4, 2, 256, True)]


@pytest.mark.parametrize("dtype", DT)
@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "b{}_q{}_kv{}_h{}_{}_d{}_c{}".format(*c))
def test_op_vs_sdpa(dtype, layout, case):
    b, sq, skv, h, hkv, d, causal = case
    dt = DT[dtype]
    q, k, v = (randn((b, s, n, d), dt, seed).to(DEV) for s, n, seed in ((sq, h, 1), (skv, hkv, 2), (skv, hkv, 3)))
    args = (q, k, v) if layout == "bshd" else tuple(t.transpose(1, 2) for t in (q, k, v))
    out = flashport.attention(*args, causal=causal, layout=layout)
    if layout == "bhsd":
        out = out.transpose(1, 2)
    ref = sdpa_bshd(q, k, v, causal)
    truth = reference(q.cpu(), k.cpu(), v.cpu(), causal)[0]
    # Ours against float64 with the CPU suite's tolerance; SDPA within twice that of ours.
    err = (out.double().cpu() - truth).abs().max().item()
    assert err <= TOL[dt] * max(1.0, truth.abs().max().item()), f"ours vs float64: {err:.3g}"
    diff = (out.double() - ref.double()).abs().max().item()
    assert diff <= 2 * TOL[dt] * max(1.0, truth.abs().max().item()), f"ours vs SDPA: {diff:.3g}"


class TinyAttention(torch.nn.Module):
    def __init__(self, dim=256, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.out = torch.nn.Linear(dim, dim)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, -1).unbind(2)  # strided bshd views
        o = flashport.attention(q, k, v, causal=True)
        return self.out(o.reshape(b, s, -1))


def test_torch_compile_fullgraph():
    torch._dynamo.reset()
    m = TinyAttention().to(DEV, torch.bfloat16).eval()
    x = randn((2, 128, 256), torch.bfloat16, 4).to(DEV)
    compiled = torch.compile(m, fullgraph=True)  # a graph break raises
    with torch.no_grad():
        eager, got = m(x), compiled(x)
        got2 = compiled(x * 0.5)
        eager2 = m(x * 0.5)
    assert (got.float() - eager.float()).abs().max().item() < 2e-2
    assert (got2.float() - eager2.float()).abs().max().item() < 2e-2
    with torch.no_grad():
        explain = torch._dynamo.explain(m)(x)
    assert explain.graph_break_count == 0, explain.break_reasons


def test_cuda_graph_attention_and_paged():
    q, k, v = (randn((2, 200, 8, 128), torch.bfloat16, s).to(DEV) for s in (5, 6, 7))
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        flashport.attention(q, k, v, causal=True)  # warm-up outside capture
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = flashport.attention(q, k, v, causal=True)
    for seed in (8, 9):
        q.copy_(randn(q.shape, q.dtype, seed))
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, flashport.attention(q, k, v, causal=True))

    # Paged decode: one graph for several steps (lengths grow in place; fixed split count).
    nb, bs, hkv, d, b = 64, 16, 2, 128, 3
    kc, vc = (randn((nb, bs, hkv, d), torch.bfloat16, s).to(DEV) for s in (10, 11))
    table = torch.randperm(nb, generator=torch.Generator().manual_seed(0))[: b * 16].view(b, 16).int().to(DEV)
    lens = torch.tensor([5, 100, 250], dtype=torch.int32, device=DEV)
    qd = randn((b, 1, 8, d), torch.bfloat16, 12).to(DEV)
    kw = dict(num_splits=4, max_seq_len=16 * bs)
    with torch.cuda.stream(s):
        flashport.paged_attention(qd, kc, vc, table, lens, **kw)
    torch.cuda.current_stream().wait_stream(s)
    g2 = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g2):
        pout = flashport.paged_attention(qd, kc, vc, table, lens, **kw)
    for step in range(3):
        lens += 1
        g2.replay()
        torch.cuda.synchronize()
        assert torch.equal(pout, flashport.paged_attention(qd, kc, vc, table, lens, **kw))
        # and against the dense float64 reference
        for r in range(b):
            n = int(lens[r])
            blocks = table[r, : (n + bs - 1) // bs].long()
            kk = kc[blocks].reshape(-1, hkv, d)[:n][None].cpu()
            vv = vc[blocks].reshape(-1, hkv, d)[:n][None].cpu()
            ref = reference(qd[r:r + 1].cpu(), kk, vv, True)[0]
            err = (pout[r:r + 1].double().cpu() - ref).abs().max().item()
            assert err <= TOL[torch.bfloat16] * max(1.0, ref.abs().max().item())


def test_current_stream_is_honoured():
    q, k, v = (randn((4, 1024, 8, 64), torch.float16, s).to(DEV) for s in (13, 14, 15))
    fresh = randn(q.shape, q.dtype, 16).to(DEV)
    expected = flashport.attention(fresh, k, v, causal=True)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    done = torch.cuda.Event()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)  # ~0.1 s of spinning: the producer is late
        q.copy_(fresh)                  # ... then writes the op's input
        out = flashport.attention(q, k, v, causal=True)  # must queue behind it on `side`
        done.record(side)
    # The default stream got nothing: it is idle while the side stream still spins.
    assert torch.cuda.default_stream().query()
    assert not side.query(), "the delay did not hold the side stream (GPU too fast for the sleep?)"
    done.synchronize()
    assert torch.equal(out, expected), "the op did not wait for the producer on the current stream"


# ---- transformers on CUDA, bf16 ----------------------------------------------------------------------------

def _transformers():
    try:
        import transformers
    except ImportError as e:
        pytest.skip(f"transformers is not importable here: {e}")
    import flashport.integrations.transformers as fpt
    global FP_IMPL
    FP_IMPL = fpt.register()  # "flashport", or its alias where transformers reserves "flash" names
    return transformers


FP_IMPL = "flashport"


def make_model(transformers, family, impl):
    common = dict(vocab_size=512, hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=512)
    if family == "qwen2":
        cfg = transformers.Qwen2Config(**common)
    else:
        if not hasattr(transformers, "Qwen3Config"):
            pytest.skip(f"transformers {transformers.__version__} has no Qwen3")
        cfg = transformers.Qwen3Config(head_dim=64, **common)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation=impl)
    return model.to(DEV, torch.bfloat16).eval()


def agree_up_to_ties(tokens_a, tokens_b, scores_b, tie):
    """Greedy token streams agree until the first step where b's top-2 margin is within `tie` (then the
    streams may part); returns how many steps matched."""
    for t, (a, b) in enumerate(zip(tokens_a.tolist(), tokens_b.tolist())):
        if a != b:
            top2 = scores_b[t].float().topk(2).values
            margin = (top2[0] - top2[1]).item()
            assert margin <= tie, f"step {t}: tokens {a} vs {b} with a clear margin {margin:.3g} > {tie:.3g}"
            return t
    return len(tokens_a)


@pytest.mark.parametrize("family", ["qwen2", "qwen3"])
def test_transformers_flashport_vs_sdpa(family):
    transformers = _transformers()
    ours, ref = make_model(transformers, family, FP_IMPL), make_model(transformers, family, "sdpa")
    ids = torch.randint(3, 512, (1, 300), generator=torch.Generator().manual_seed(1)).to(DEV)
    with torch.no_grad():
        la, lb = ours(input_ids=ids).logits.float(), ref(input_ids=ids).logits.float()
    scale = lb.abs().max().item()
    diff = (la - lb).abs().max().item()
    assert diff <= 3e-2 * max(1.0, scale), f"logits differ by {diff:.3g} (max |logit| {scale:.3g})"
    tie = max(4 * diff, 1e-3)
    gen = dict(max_new_tokens=24, do_sample=False, return_dict_in_generate=True, output_scores=True)
    with torch.no_grad():
        prompt = dict(input_ids=ids[:, :40], attention_mask=torch.ones_like(ids[:, :40]))
        ga, gb = ours.generate(**prompt, **gen), ref.generate(**prompt, **gen)
    ta, tb = ga.sequences[0, 40:], gb.sequences[0, 40:]
    agree_up_to_ties(ta, tb, [s[0] for s in gb.scores], tie)


@pytest.mark.parametrize("family", ["qwen2", "qwen3"])
def test_transformers_batched_left_padding(family):
    transformers = _transformers()
    model = make_model(transformers, family, FP_IMPL)
    g = torch.Generator().manual_seed(2)
    prompts = [torch.randint(3, 512, (n,), generator=g) for n in (7, 30, 19)]
    width = max(len(p) for p in prompts)
    ids = torch.zeros(len(prompts), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for r, p in enumerate(prompts):
        ids[r, width - len(p):], mask[r, width - len(p):] = p, 1
    gen = dict(max_new_tokens=16, do_sample=False, return_dict_in_generate=True, output_scores=True, pad_token_id=0)
    with torch.no_grad():
        batched = model.generate(ids.to(DEV), attention_mask=mask.to(DEV), **gen)
        for r, p in enumerate(prompts):
            single = model.generate(p[None].to(DEV), attention_mask=torch.ones(1, len(p), dtype=torch.long,
                                                                               device=DEV), **gen)
            logit_scale = max(s[0].float().abs().max().item() for s in single.scores)
            # bf16 batched vs single GEMMs differ in rounding: ties up to a few bf16 ulps of the logits
            agree_up_to_ties(batched.sequences[r, width:], single.sequences[0, len(p):], [s[0] for s in single.scores],
                             max(4 * 2.0**-8 * logit_scale, 1e-3))
