#!/usr/bin/env python3
"""flashport's ops beside PyTorch's on the same cases, in one run.

The cases are the ops' shared test cases (tests/ops/<op>_case.h), listed by the bench itself
(`flashport_bench_ops --list`), so both sides run the same shapes and dtypes. Ours: flashport_bench_ops
--device gpu. The peer of each op:
  linear      F.rms_norm (when the case has a norm), F.linear (with the bias), then + residual or
              F.silu(gate) * up: what a transformers decoder layer runs
  rms_norm    F.rms_norm;  add_rms_norm: x + residual, then F.rms_norm
  rope        transformers' rotate_half with cos/sin gathered at the positions
  swiglu      F.silu(gate) * up;  add: a.add_(b)
  embedding   F.embedding, then .to(out dtype) where it differs
  matmul      F.linear (x · Wᵀ + b), out cast to the case's out dtype
  argmax      torch.argmax over each row (int64 ids where ours are int32)
  paged_cache_write    index_copy_ of k and v into the caches viewed as [slots, n_kv_heads, head_dim]
              (every token slotted: index_copy_ takes no padding slots, where ours skip -1)
  rope_qk_cache_write  the rope peer's math on q and on k, then paged_cache_write's peer with the rotated
              k (out of place, as transformers; ours rotates in place)
  attention   F.scaled_dot_product_attention on [batch, heads, len, dim] views, once per SDPA backend
              (sdpa_math, sdpa_efficient, sdpa_flash, sdpa_cudnn: torch.nn.attention.sdpa_kernel); a
              backend that rejects the shape is reported, not fatal. Causal with q_len != kv_len takes
              an explicit bottom-right mask (PyTorch's is_causal aligns top-left)
  attention_varlen  the same SDPA per sequence, in a Python loop (sdpa_loop, the default backend)
  paged_attention   gather_sdpa: the sequences' blocks gathered through the block table into dense
              K and V, then SDPA (default backend); the gather is timed with it
Timing, the same for both: `iters` calls back to back (by default about 2 ms of floor), one synchronise,
host clock around the lot; the median of `reps` runs, per call. Each peer line has ours' format ("impl": "torch"); the table gives
ours / torch time ratios (below 1: flashport is faster) and each side's share of the floor.

Writes <out>/ops.jsonl (every line, ours and the peers') and prints the table.
Usage: ops_peers.py --bench build/cuda/bin/flashport_bench_ops [--op linear] [--dtype bf16] [--filter qwen7b]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel

from sdpa_peers import PEERS as SDPA_PEERS  # each SDPA backend, as h200.sh bench times them

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def time_back_to_back(fn, iters, reps):
    fn()
    torch.cuda.synchronize()
    runs = []
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
        runs.append((time.perf_counter() - start) / iters)
    return statistics.median(runs)


def rand(shape, dtype, std=1.0, mean=0.0):
    return (torch.randn(shape, device="cuda", dtype=torch.float32) * std + mean).to(dtype)


def rope_cos_sin(tokens, hd, theta, dt):
    """Gathers of transformers' cos/sin tables ([tokens, 1, head_dim], x's dtype) at random positions
    below 40000: two callables, so the gather is timed with the call."""
    pos = torch.randint(0, 40000, (tokens,), device="cuda")
    inv = 1.0 / (theta ** (torch.arange(0, hd, 2, device="cuda", dtype=torch.float32) / hd))
    table = torch.outer(torch.arange(40000, device="cuda", dtype=torch.float32), inv)
    cos, sin = torch.cat([table.cos()] * 2, -1).to(dt), torch.cat([table.sin()] * 2, -1).to(dt)
    return (lambda: cos[pos][:, None, :]), (lambda: sin[pos][:, None, :])


def rotate(x, c, s):
    """transformers' apply_rotary_pos_emb on one tensor [tokens, heads, head_dim]: x·cos + rotate_half(x)·sin."""
    hd = x.shape[-1]
    return x * c + torch.cat([-x[..., hd // 2:], x[..., :hd // 2]], -1) * s


def peer_call(case):
    """The PyTorch call for one listed case, on fresh random tensors."""
    op, p, dt = case["op"], case["params"], DTYPES[case["dtype"]]
    if op == "linear":
        t, k, rows = p["tokens"], p["in"], p["rows"]
        cols = rows // 2 if p["swiglu"] else rows
        x, w = rand((t, k), dt, 0.3, 2.0), rand((rows, k), dt, k ** -0.5)
        b = rand((rows,), dt, 0.1) if p["bias"] else None
        g = rand((k,), dt, 0.2, 1.0) if p["norm"] else None
        r = rand((t, cols), dt) if p["residual"] else None

        def call():
            h = F.rms_norm(x, (k,), g, p["eps"]) if g is not None else x
            y = F.linear(h, w, b)
            if p["swiglu"]:
                return F.silu(y[:, :cols]) * y[:, cols:]
            return r + y if r is not None else y
        return call
    if op in ("rms_norm", "add_rms_norm"):
        shape = p["shape"]
        x, w, res = rand(shape, dt), rand((shape[-1],), dt, 0.5, 1.0), rand(shape, dt, 4.0)
        if op == "rms_norm":
            return lambda: F.rms_norm(x, (shape[-1],), w, p["eps"])
        return lambda: F.rms_norm(x + res, (shape[-1],), w, p["eps"])
    if op == "rope":
        t, nh, hd = p["tokens"], p["n_heads"], p["head_dim"]
        x = rand((t, nh, hd), dt)
        c, s = rope_cos_sin(t, hd, p["theta"], dt)
        return lambda: rotate(x, c(), s())
    if op == "swiglu":
        g, u = rand(p["shape"], dt, 3.0), rand(p["shape"], dt)
        return lambda: F.silu(g) * u
    if op == "add":
        a, b = rand(p["shape"], dt, 10.0), rand(p["shape"], dt)
        return lambda: a.add_(b)
    if op == "embedding":
        table = rand((p["vocab"], p["hidden"]), dt)
        ids = torch.randint(0, p["vocab"], (p["tokens"],), device="cuda")
        out_dt = DTYPES[p["out_dtype"]]
        return lambda: F.embedding(ids, table).to(out_dt)
    if op == "matmul":
        x, w = rand((p["tokens"], p["in"]), dt), rand((p["out"], p["in"]), DTYPES[p["w_dtype"]], 0.2)
        b = rand((p["out"],), DTYPES[p["w_dtype"]]) if p["bias"] else None
        out_dt = DTYPES[p["out_dtype"]]
        return lambda: F.linear(x, w, b).to(out_dt)
    if op in ("paged_cache_write", "rope_qk_cache_write"):
        t, nkv, hd, bs = p["tokens"], p["n_kv_heads"], p["head_dim"], p["block_size"]
        kc, vc = rand((p["num_blocks"] * bs, nkv, hd), dt), rand((p["num_blocks"] * bs, nkv, hd), dt)
        k, v = rand((t, nkv, hd), dt), rand((t, nkv, hd), dt)
        slots = torch.randperm(p["num_blocks"] * bs, device="cuda")[:t]
        if op == "paged_cache_write":
            return lambda: (kc.index_copy_(0, slots, k), vc.index_copy_(0, slots, v))
        q = rand((t, p["n_heads"], hd), dt)
        c, s = rope_cos_sin(t, hd, p["theta"], dt)

        def call():
            cos, sin = c(), s()
            kc.index_copy_(0, slots, rotate(k, cos, sin))
            vc.index_copy_(0, slots, v)
            return rotate(q, cos, sin)
        return call
    if op == "argmax":
        x = rand((p["rows"], p["n"]), dt)
        return lambda: torch.argmax(x, -1)
    raise ValueError("no peer for op " + op)


def sdpa(q, k, v, causal):
    """SDPA on [batch, heads, len, dim] with flashport's causal rule (bottom-right aligned)."""
    lq, lk = q.shape[-2], k.shape[-2]
    gqa = q.shape[1] != k.shape[1]
    if not causal or lq == 1:  # one query row at the end sees every key
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa)
    if lq == lk:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
    mask = torch.ones(lq, lk, dtype=torch.bool, device="cuda").tril(lk - lq)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)


def attention_peers(case):
    """(label, call) pairs for the attention family's cases."""
    op, p, dt = case["op"], case["params"], DTYPES[case["dtype"]]
    h, kvh, d = p["n_heads"], p["n_kv_heads"], p["head_dim"]
    if op == "attention":
        b = p["batch"]
        q = rand((b, p["q_len"], h, d), dt, 2.0).transpose(1, 2)
        k, v = (rand((b, p["kv_len"], kvh, d), dt).transpose(1, 2) for _ in range(2))

        def with_backend(backend):
            def call():
                with sdpa_kernel(backend):
                    return sdpa(q, k, v, p["causal"])
            return call
        return [(label, with_backend(backend)) for label, backend in SDPA_PEERS]
    if op == "attention_varlen":
        seqs = [(rand((1, lq, h, d), dt, 2.0).transpose(1, 2), rand((1, lk, kvh, d), dt).transpose(1, 2),
                 rand((1, lk, kvh, d), dt).transpose(1, 2)) for lq, lk in p["seqs"]]
        return [("sdpa_loop", lambda: [sdpa(q, k, v, p["causal"]) for q, k, v in seqs])]
    if op == "paged_attention":
        b, seq, bs = p["batch"], p["seq_len"], p["block_size"]
        per_seq = (seq + bs - 1) // bs
        kc, vc = (rand((b * per_seq, bs, kvh, d), dt) for _ in range(2))
        table = torch.randperm(b * per_seq, device="cuda").view(b, per_seq)
        q = rand((b, p["q_len"], h, d), dt, 2.0).transpose(1, 2)

        def call():
            k = kc[table].view(b, per_seq * bs, kvh, d)[:, :seq].transpose(1, 2)
            v = vc[table].view(b, per_seq * bs, kvh, d)[:, :seq].transpose(1, 2)
            return sdpa(q, k, v, p["causal"])
        return [("gather_sdpa", call)]
    return None


def peers(case):
    """The (label, call) pairs to time for one listed case, on fresh random tensors."""
    return attention_peers(case) or [("torch", peer_call(case))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", required=True, help="path to flashport_bench_ops")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--op", default="all")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--filter", default="")
    ap.add_argument("--iters", type=int, default=0, help="calls per timed run; 0: about 2 ms of floor (1 to 200)")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--peak-gbps", type=float, default=4800.0)
    ap.add_argument("--peak-gflops", type=float, default=989e3)
    args = ap.parse_args()

    sel = ["--op", args.op, "--dtype", args.dtype, "--filter", args.filter, "--device", "gpu"]
    listed = subprocess.run([args.bench, "--list"] + sel, check=True, capture_output=True, text=True).stdout
    cases = [json.loads(line) for line in listed.splitlines() if line.strip()]
    ours_out = subprocess.run([args.bench] + sel + ["--iters", str(args.iters), "--reps", str(args.reps),
                                                    "--peak-gbps", str(args.peak_gbps),
                                                    "--peak-gflops", str(args.peak_gflops)],
                              check=True, capture_output=True, text=True).stdout
    ours = {(r["op"], r["case"], r["dtype"]): r for r in map(json.loads, ours_out.splitlines()) if r}

    rows = []
    for c in cases:
        key = (c["op"], c["case"], c["dtype"])
        floor_s = max(c["bytes"] / (args.peak_gbps * 1e9), c["flops"] / (args.peak_gflops * 1e9))
        try:
            calls = peers(c)
        except Exception as e:  # e.g. out of memory making the inputs
            calls = [("torch", e)]
        for label, call in calls:
            try:
                if isinstance(call, Exception):
                    raise call
                # As the bench's --iters 0: about 2 ms of floor per run (an attention call may take 10).
                iters = args.iters or max(1, min(200, int(2e-3 / max(floor_s, 1e-7))))
                s = time_back_to_back(call, iters, args.reps)
                peer = dict(op=c["op"], case=c["case"], dtype=c["dtype"], device="gpu", impl=label,
                            kernel="torch " + torch.__version__, median_us=s * 1e6, gbps=c["bytes"] / s / 1e9,
                            gflops=c["flops"] / s / 1e9, floor_us=floor_s * 1e6, bytes=c["bytes"],
                            flops=c["flops"], ok=True)
            except Exception as e:  # a peer the installed torch lacks, or a backend that rejects the shape
                peer = dict(op=c["op"], case=c["case"], dtype=c["dtype"], impl=label,
                            error=str(e).split("\n")[0][:200])
            rows.append((ours.get(key), peer))
        torch.cuda.empty_cache()

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "ops.jsonl"), "w") as f:
        for o, p in rows:
            for r in (o, p):
                if r:
                    f.write(json.dumps(r) + "\n")
    print("%-14s %-34s %-5s %-14s %11s %11s %7s %7s %7s  %s" %
          ("op", "case", "dtype", "peer", "ours us", "peer us", "ratio", "ours%fl", "peer%fl", "our kernel"))
    for o, p in rows:
        if not o or "median_us" not in p:
            print("%-14s %-34s %-5s %-14s missing: %s" % (p["op"], p["case"], p["dtype"], p["impl"],
                                                         p.get("error", "no flashport line")))
            continue
        print("%-14s %-34s %-5s %-14s %11.2f %11.2f %7.2f %7.0f %7.0f  %s%s" %
              (o["op"], o["case"], o["dtype"], p["impl"], o["median_us"], p["median_us"],
               o["median_us"] / p["median_us"], 100 * o["floor_us"] / o["median_us"],
               100 * p["floor_us"] / p["median_us"], o["kernel"], "" if o["ok"] else "  (FAILED its float64 check)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
