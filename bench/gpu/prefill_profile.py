#!/usr/bin/env python3
"""Where a long prefill's GPU time goes, ours beside transformers', kernel by kernel (issue 16's TTFT at
4096 tokens). Both sides are split into the same families by kernel name, so the table says which part
of the gap is the GEMMs (cuBLAS on both sides), which the attention and which the rest:

  hf     transformers (sdpa) on the random Qwen2.5-7B-shaped folder: creates the folder when it is
         missing, warms up, times generate(1 token) three times, then profiles one more with
         torch.profiler (CUDA kernels only). Writes <out>/hf.json.
  ours   reads the CSV of `ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum
         --print-summary per-kernel --csv` around our `generate` (one new token, so one prefill); writes
         <out>/ours.json.
  table  prints both side by side, with the FLOP floor of the products (Qwen2.5-7B shapes, 4096 tokens).
  gaps   reads `nsys stats --report cuda_gpu_trace --format csv` of one run: the GPU's busy time, its idle
         time between kernels, and the longest idle gaps with the kernels on either side.

ncu serialises kernels and torch.profiler does not, but both time each kernel on the GPU at the card's own
clocks (ncu's clock control is off), so per-family sums compare; launch gaps are the wall time minus
the sum.

    python3 bench/gpu/prefill_profile.py hf --folder F --ids 1,2,3 --out D
    python3 bench/gpu/prefill_profile.py ours --csv prefill.csv --out D
    python3 bench/gpu/prefill_profile.py table --out D
"""
import argparse
import csv
import json
import os
import re
import statistics
import sys
from pathlib import Path

# A kernel's family from its name. Order matters: the first match wins.
FAMILIES = [
    ("attention", re.compile(r"flash|fmha|attention|sdpa|softmax", re.I)),  # cuDNN's SDPA names sm90_ too
    ("gemm", re.compile(r"gemm|nvjet|xmma|cutlass|cublas|sm90_|splitKreduce", re.I)),
    ("norm", re.compile(r"norm", re.I)),
    ("rope / cache", re.compile(r"rope|rotary|cache|cat|copy_kernel|index", re.I)),
    ("swiglu / act", re.compile(r"swiglu|silu|act|mul|glu", re.I)),
]


def family(name):
    name = name.replace("flashport", "")  # our namespace would read as "flash"
    for fam, pattern in FAMILIES:
        if pattern.search(name):
            return fam
    return "other"


def summarise(kernels):
    """kernels: [(name, count, total_us)] -> {families: {fam: us}, total_us, top: [...]}"""
    fams = {}
    for name, _, us in kernels:
        fams[family(name)] = fams.get(family(name), 0.0) + us
    top = sorted(kernels, key=lambda k: -k[2])[:15]
    return {"families_us": fams, "total_us": sum(us for _, _, us in kernels),
            "top": [{"name": n[:110], "count": c, "total_us": us, "family": family(n)} for n, c, us in top]}


def ncu_kernels(path):
    """[(name, invocations, total us)] from ncu's per-kernel CSV summary (bench/gpu/ncu_summary.py's reader)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import ncu_summary
    return [(name, n, n * ns / 1e3) for name, n, ns in ncu_summary.rows(path)]


def hf(args):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import engine_peers as e
    import torch
    from torch.profiler import ProfilerActivity, profile
    folder = Path(args.folder)
    state = {}
    if folder.exists():
        from transformers import AutoModelForCausalLM
        state["model"] = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.bfloat16, device_map="cuda")
    else:
        e.create_folder(e.config_dir("qwen2.5-7b-instruct"), folder, e.SEED, state)
    model = state["model"]
    e.set_attention(model, "sdpa")
    ids = torch.tensor([[int(x) for x in args.ids.split(",")]], device="cuda")
    e.hf_generate(model, ids, 1)
    runs = [t * 1e3 for t in e.hf_ttft_runs(model, ids, 3)]
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        e.hf_generate(model, ids, 1)
        torch.cuda.synchronize()
    def device_us(ev):  # torch >= 2.4 names it device_time_total; before, cuda_time_total
        return getattr(ev, "device_time_total", None) or getattr(ev, "cuda_time_total", 0.0)
    kernels = [(ev.key, ev.count, device_us(ev)) for ev in prof.key_averages()
               if device_us(ev) > 0 and not ev.key.startswith(("aten::", "cuda", "Memcpy", "Memset"))]
    out = {"ttft_ms": statistics.median(runs), "ttft_runs_ms": runs, **summarise(kernels)}
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "hf.json").write_text(json.dumps(out, indent=1))
    print("hf sdpa TTFT %d: %.1f ms (runs %s); kernels %.1f ms" % (
        ids.shape[1], out["ttft_ms"], ", ".join("%.1f" % r for r in runs), out["total_us"] / 1e3))


def ours(args):
    out = summarise(ncu_kernels(args.csv))
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "ours.json").write_text(json.dumps(out, indent=1))
    print("ours: kernels %.1f ms" % (out["total_us"] / 1e3))


def gemm_tflop(tokens):
    """The prefill's projections for Qwen2.5-7B (28 layers, hidden 3584, kv 512, mlp 18944): 2 FLOPs a MAC."""
    per_token_layer = 3584 * (3584 + 2 * 512) + 3584 * 3584 + 3584 * 2 * 18944 + 18944 * 3584
    return 2.0 * per_token_layer * 28 * tokens / 1e12


def table(args):
    d = Path(args.out)
    sides = {name: json.loads((d / f"{name}.json").read_text())
             for name in ("ours", "hf") if (d / f"{name}.json").exists()}
    fams = sorted({f for s in sides.values() for f in s["families_us"]},
                  key=lambda f: -max(s["families_us"].get(f, 0.0) for s in sides.values()))
    names = list(sides)
    print("| kernels (ms of GPU time) | " + " | ".join(names) + " |")
    print("| --- |" + " --- |" * len(names))
    for f in fams + ["all"]:
        cells = []
        for n in names:
            us = sides[n]["total_us"] if f == "all" else sides[n]["families_us"].get(f, 0.0)
            cells.append("%.1f" % (us / 1e3))
        print("| %s | %s |" % (f, " | ".join(cells)))
    tf = gemm_tflop(args.tokens)
    for n in names:
        g = sides[n]["families_us"].get("gemm", 0.0)
        if g:
            print("%s: the products' %.1f TFLOP at %.0f TFLOP/s" % (n, tf, tf / (g / 1e6)))
    for n in names:
        print("\n%s, the 15 longest kernels:" % n)
        for k in sides[n]["top"]:
            print("  %9.2f ms %6d  %-10s %s" % (k["total_us"] / 1e3, k["count"], k["family"], k["name"]))


def gaps(args):
    with open(args.csv, newline="") as f:
        lines = [l for l in f if "," in l]
    rows = list(csv.DictReader(lines))
    if not rows:
        print("gaps: no rows in", args.csv)
        return
    col = lambda word: next(k for k in rows[0] if k and k.startswith(word))
    start, dur, name = col("Start"), col("Duration"), col("Name")
    ev = sorted((int(float(r[start])), int(float(r[dur])), r[name]) for r in rows if r[start] and r[dur])
    busy = sum(d for _, d, _ in ev)
    span = ev[-1][0] + ev[-1][1] - ev[0][0]
    holes = []
    end, prev = ev[0][0] + ev[0][1], ev[0][2]
    for s0, d, n in ev[1:]:
        if s0 > end:
            holes.append((s0 - end, prev, n, s0 - ev[0][0]))
        if s0 + d > end:
            end, prev = s0 + d, n
    idle = sum(h[0] for h in holes)
    print("gpu trace: %d activities over %.1f ms, busy %.1f ms, idle %.1f ms in %d gaps (%d over 50 us: %.1f ms)" % (
        len(ev), span / 1e6, busy / 1e6, idle / 1e6, len(holes), sum(h[0] > 50e3 for h in holes),
        sum(h[0] for h in holes if h[0] > 50e3) / 1e6))
    for gap, before, after, at in sorted(holes, reverse=True)[:12]:
        print("  %8.1f us at %8.2f ms  after %s  before %s" % (gap / 1e3, at / 1e6, before[:60], after[:60]))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("hf")
    h.add_argument("--folder", required=True)
    h.add_argument("--ids", required=True)
    h.add_argument("--out", required=True)
    o = sub.add_parser("ours")
    o.add_argument("--csv", required=True)
    o.add_argument("--out", required=True)
    t = sub.add_parser("table")
    t.add_argument("--out", required=True)
    t.add_argument("--tokens", type=int, default=4096)
    g = sub.add_parser("gaps")
    g.add_argument("--csv", required=True)
    args = p.parse_args()
    {"hf": hf, "ours": ours, "table": table, "gaps": gaps}[args.cmd](args)


if __name__ == "__main__":
    main()
