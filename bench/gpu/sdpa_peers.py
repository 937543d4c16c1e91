#!/usr/bin/env python3
"""flashport's GPU attention beside PyTorch SDPA's backends (math, efficient, flash, cuDNN), in one run.

For each problem: ours (`flashport bench attention --device gpu`, flash mma, flash portable, naive) and
each SDPA backend, timed the same way (synchronise, host clock around one call, synchronise; median
of --iters calls after a warm-up) and with extra memory measured the same way (the output allocated
inside the measured region: our tracked allocator's peak minus what was live before; torch's
max_memory_allocated minus memory_allocated before). Also measures the two ceilings of this GPU in
the same run: device-to-device copy bandwidth and a large bf16 matrix product.

Writes <out>/bench.json and <out>/bench.png and prints a table with ratios:
  speed vs X = time(X) / time(ours): >= 1.0 means ours is at least as fast;
  mem vs flash = extra(ours) / extra(SDPA flash): <= 1.1 is the target.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

PROBLEMS = [
    # The seeds' benchmark.
    dict(name="seeds_fp16_d64_4k", dtype="fp16", batch=8, heads=16, seq=4096, head_dim=64, causal=False),
    dict(name="bf16_d128_8k", dtype="bf16", batch=2, heads=16, seq=8192, head_dim=128, causal=False),
    dict(name="bf16_d128_8k_causal", dtype="bf16", batch=2, heads=16, seq=8192, head_dim=128, causal=True),
    dict(name="bf16_d256_8k_causal", dtype="bf16", batch=2, heads=16, seq=8192, head_dim=256, causal=True),
    # Stable Diffusion 1.5 at 1024 px: batch 2, 8 heads, 16384 tokens, head dim 40.
    dict(name="sd15_fp16_d40_16k", dtype="fp16", batch=2, heads=8, seq=16384, head_dim=40, causal=False),
    # A few queries against a long KV through the dense API (split-KV): one decode token of a
    # Qwen2.5-7B-shaped model (28 query heads over 4 KV heads) against 64k keys, and a batch of 8
    # sequences with 4 new tokens each against 16k.
    dict(name="q1_bf16_d128_gqa7_64k", dtype="bf16", batch=1, heads=28, kv_heads=4, q_len=1, seq=65536,
         head_dim=128, causal=True),
    dict(name="q4_bf16_d128_gqa7_16k_b8", dtype="bf16", batch=8, heads=28, kv_heads=4, q_len=4, seq=16384,
         head_dim=128, causal=True),
]
PEERS = [("sdpa_math", SDPBackend.MATH), ("sdpa_efficient", SDPBackend.EFFICIENT_ATTENTION),
         ("sdpa_flash", SDPBackend.FLASH_ATTENTION), ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION)]
TORCH_DTYPE = {"fp16": torch.float16, "bf16": torch.bfloat16}


def q_len(p):
    return p.get("q_len", p["seq"])  # "seq" is the KV length; the query length too unless q_len says


def flops(p):
    f = 4.0 * p["batch"] * p["heads"] * q_len(p) * p["seq"] * p["head_dim"]
    return f / 2 if p["causal"] and q_len(p) == p["seq"] else f


def time_calls(fn, iters):
    fn()  # warm-up: kernel selection, workspace, module load
    torch.cuda.synchronize()
    ms = []
    for _ in range(iters):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ms.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ms), ms


def run_peer(p, backend, iters):
    dt = TORCH_DTYPE[p["dtype"]]
    g = torch.Generator(device="cuda").manual_seed(0)
    kv_heads = p.get("kv_heads", p["heads"])
    # Our [batch, len, heads, dim] order, seen as SDPA's [batch, heads, len, dim].
    q = torch.randn((p["batch"], q_len(p), p["heads"], p["head_dim"]), device="cuda", dtype=dt, generator=g)
    k, v = (torch.randn((p["batch"], p["seq"], kv_heads, p["head_dim"]), device="cuda", dtype=dt, generator=g)
            for _ in range(2))
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    gqa = dict(enable_gqa=True) if kv_heads != p["heads"] else {}
    # SDPA's is_causal is top-left aligned; ours (a KV cache's) bottom-right. One query stands at the
    # last position, where the mask hides nothing: no mask. More queries than one get an explicit
    # bottom-right boolean mask (which SDPA's flash backend refuses: it then reports n/a).
    mask, causal = None, p["causal"]
    if p["causal"] and q_len(p) != p["seq"]:
        causal = False
        if q_len(p) > 1:
            i = torch.arange(q_len(p), device="cuda")[:, None] + (p["seq"] - q_len(p))
            mask = torch.arange(p["seq"], device="cuda")[None, :] <= i
    out = {}

    def call():
        with sdpa_kernel(backend):
            out["o"] = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, **gqa)
        out.pop("o")  # freed inside the call, like ours

    try:
        median, all_ms = time_calls(call, iters)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        with sdpa_kernel(backend):
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, **gqa)
        torch.cuda.synchronize()
        extra = torch.cuda.max_memory_allocated() - base
        del o
        return dict(median_ms=median, ms=all_ms, extra_mb=extra / 1e6, tflops=flops(p) / (median / 1e3) / 1e12)
    except Exception as e:  # a backend that does not support the shape says so
        return dict(error=str(e).split("\n")[0][:200])
    finally:
        del q, k, v
        torch.cuda.empty_cache()


def variant_parts(variant):
    """'wgmma/FLASHPORT_GPU_PDL=0' -> ('wgmma_0', 'wgmma', {FLASHPORT_GPU_PDL: '0'}):
    FLASHPORT_GPU_FLASH's value, then extra environment settings, each after a '/'."""
    base, *settings = variant.split("/")
    env = dict(kv.split("=", 1) for kv in settings)
    return "_".join([base] + list(env.values())), base, env


def run_ours(p, binary, iters, variant, impls):
    label, base, extra_env = variant_parts(variant)
    path = "/tmp/flashport_bench_%s_%s.json" % (p["name"], label)
    cmd = [binary, "bench", "attention", "--device", "gpu", "--batch", str(p["batch"]), "--heads", str(p["heads"]),
           "--kv-heads", str(p.get("kv_heads", p["heads"])), "--q-len", str(q_len(p)), "--kv-len", str(p["seq"]),
           "--head-dim", str(p["head_dim"]), "--dtype", p["dtype"], "--impl", impls, "--iters", str(iters),
           "--json", path]
    if p["causal"]:
        cmd.append("--causal")
    env = dict(os.environ, FLASHPORT_GPU_FLASH=base, **extra_env)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        return {"flash_" + label: dict(error=(r.stderr or r.stdout).strip().split("\n")[-1][:200])}
    res = {}
    for row in json.load(open(path))["results"]:
        name = "naive" if row["impl"] == "naive" else "flash_" + label
        res[name] = row
    return res


def ceilings():
    n = 1 << 30  # 2 GiB of bf16 per buffer: far past the L2
    x = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    ms, _ = time_calls(lambda: y.copy_(x), 10)
    copy_tbs = 2 * x.numel() * 2 / (ms / 1e3) / 1e12
    del x, y
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    ms, _ = time_calls(lambda: a @ b, 10)
    mm_tflops = 2 * 8192 ** 3 / (ms / 1e3) / 1e12
    del a, b
    torch.cuda.empty_cache()
    return dict(copy_tb_per_s=copy_tbs, bf16_matmul_tflops=mm_tflops)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flashport", required=True, help="path to the flashport binary (build/cuda/bin/flashport)")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--only", default="", help="comma-separated problem names")
    ap.add_argument("--variants", default="",
                    help="more flash variants to time beside mma and portable, comma-separated (e.g. wgmma: "
                         "FLASHPORT_GPU_FLASH's values, each optionally followed by /NAME=VALUE environment settings); the "
                         "summary gives each one's ratios too")
    args = ap.parse_args()

    dev = torch.cuda.get_device_properties(0)
    report = dict(device=dev.name, sm_count=dev.multi_processor_count, torch=torch.__version__,
                  cuda=torch.version.cuda, ceilings=ceilings(), problems=[])
    print("device %s, torch %s; ceilings: copy %.2f TB/s, bf16 matmul %.0f TFLOP/s" %
          (dev.name, torch.__version__, report["ceilings"]["copy_tb_per_s"], report["ceilings"]["bf16_matmul_tflops"]))
    only = set(filter(None, args.only.split(",")))
    for p in PROBLEMS:
        if only and p["name"] not in only:
            continue
        rows = {}
        rows.update(run_ours(p, args.flashport, args.iters, "mma", "flash,naive"))
        rows.update(run_ours(p, args.flashport, max(3, args.iters // 3), "portable", "flash"))
        for variant in filter(None, args.variants.split(",")):
            rows.update(run_ours(p, args.flashport, args.iters, variant, "flash"))
        for name, backend in PEERS:
            rows[name] = run_peer(p, backend, args.iters if name != "sdpa_math" else max(3, args.iters // 3))
        report["problems"].append(dict(problem=p, flops=flops(p), results=rows))
        print_problem(p, rows)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "bench.json"), "w") as f:
        json.dump(report, f, indent=1)
    plot(report, os.path.join(args.out, "bench.png"))
    print_summary(report)
    for variant in filter(None, args.variants.split(",")):
        print_summary(report, variant_parts(variant)[0])


def ok(r):
    return r is not None and "error" not in r


def print_problem(p, rows):
    print("\n== %s: %s batch %d, %d heads (%d KV), q_len %d, kv_len %d, head_dim %d%s" % (
        p["name"], p["dtype"], p["batch"], p["heads"], p.get("kv_heads", p["heads"]), q_len(p), p["seq"],
        p["head_dim"], ", causal" if p["causal"] else ""))
    print("%-16s %-24s %10s %9s %11s %10s" % ("impl", "kernel", "ms", "TFLOP/s", "extra MB", "rel err"))
    for name, r in rows.items():
        if not ok(r):
            print("%-16s %s" % (name, r.get("error", "?")))
            continue
        err = r.get("rel_err")
        print("%-16s %-24s %10.3f %9.1f %11.1f %10s" % (name, r.get("kernel", "-"), r["median_ms"], r["tflops"],
                                                         r["extra_mb"], "%.2e" % err if err is not None else "-"))


def print_summary(report, variant="mma"):
    print("\n== summary: speed = time(peer) / time(ours flash %s); >= 1.0 means ours is at least as fast" % variant)
    print("%-22s %9s %9s %9s %9s %9s %12s" % ("problem", "ours ms", "vs flash", "vs cudnn", "vs effic", "vs math",
                                              "mem/flash"))
    for entry in report["problems"]:
        rows = entry["results"]
        ours = rows.get("flash_" + variant)
        if not ok(ours):
            print("%-22s ours failed: %s" % (entry["problem"]["name"], (ours or {}).get("error")))
            continue

        def ratio(peer):
            r = rows.get(peer)
            return "%9.2f" % (r["median_ms"] / ours["median_ms"]) if ok(r) else "%9s" % "n/a"

        fl = rows.get("sdpa_flash")
        mem = "%12.3f" % (ours["extra_mb"] / fl["extra_mb"]) if ok(fl) and fl["extra_mb"] > 0 else "%12s" % "n/a"
        print("%-22s %9.3f %s %s %s %s %s" % (entry["problem"]["name"], ours["median_ms"], ratio("sdpa_flash"),
                                               ratio("sdpa_cudnn"), ratio("sdpa_efficient"), ratio("sdpa_math"), mem))


def plot(report, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    names = ["flash_mma", "flash_portable", "naive", "sdpa_flash", "sdpa_cudnn", "sdpa_efficient", "sdpa_math"]
    probs = report["problems"]
    fig, ax = plt.subplots(figsize=(12, 5))
    width = 0.8 / len(names)
    for i, n in enumerate(names):
        ys = [e["results"][n]["tflops"] if ok(e["results"].get(n)) else 0 for e in probs]
        ax.bar([j + i * width for j in range(len(probs))], ys, width, label=n)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(probs))])
    ax.set_xticklabels([e["problem"]["name"] for e in probs], fontsize=8)
    ax.set_ylabel("TFLOP/s (higher is better)")
    ax.set_title("attention forward on %s (same run)" % report["device"])
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
