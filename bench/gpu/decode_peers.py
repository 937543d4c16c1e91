#!/usr/bin/env python3
"""flashport's paged decode attention beside PyTorch SDPA (cuDNN, flash, efficient) and a device-to-device
copy, in one run: the decode targets of issue 3.

Problems (GQA 28 query / 4 KV heads, head dim 128, bf16, one query token), paged_attention's bench
problems of the same name (tests/ops/paged_attention_case.h), read from `flashport_bench_ops --list`:
  b1_32k   batch 1, 32768 tokens   target: >= 1.0x SDPA cuDNN's K+V GB/s
  b64_8k   batch 64, 8192 tokens   target: >= 85% of the copy's bandwidth

Ours runs through bench/gpu/paged_attention.cpp (a shuffled paged cache, block size 16), with both split
kernels: `ours` is the default (tensor cores on NVIDIA), `ours_portable` the FP32 kernel HIP runs
(FLASHPORT_GPU_DECODE=portable); `ours_splitsN` force N splits (the heuristic's check) and
`ours_stagesN` N pipeline stages per warp (FLASHPORT_GPU_DECODE_STAGES). The peers read a
dense KV [batch, kv_heads, seq, 128] (enable_gqa=True), as the anchors did. Bandwidth counts the K and V
bytes read once: 2 * batch * seq * kv_heads * 128 * 2. The copy counts read + write, like the anchors.
Timing, the same for everyone: `iters` calls back to back, one synchronise, host clock around the lot;
the median of `reps` runs, per call. For the peers also a CUDA-graph replay of the same call (no
Python/dispatch overhead between calls), and the faster of the two is the peer's figure; `ours_graph`
is ours under the same graph replay (flashport_bench_paged_attention --graph 1).

Writes <out>/decode.json and prints a table with the ratios.
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
from torch.nn.attention import SDPBackend, sdpa_kernel

DEFAULT_PROBLEMS = "b1_32k,b64_8k"
# Forced split counts timed beside the automatic choice (default kernel), to check the heuristic.
SPLIT_SWEEP = {"b1_32k": [1, 132], "b64_8k": [2, 3]}
# K/V pipeline stages per warp of the mma kernel (FLASHPORT_GPU_DECODE_STAGES; the default at d128 is 3).
STAGE_SWEEP = [2, 4]
PEERS = [("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION), ("sdpa_flash", SDPBackend.FLASH_ATTENTION),
         ("sdpa_efficient", SDPBackend.EFFICIENT_ATTENTION)]


def load_problems(cases_bench, names):
    """The named paged_attention bench problems (bf16), from the case list through --list."""
    listed = subprocess.run([cases_bench, "--list", "--op", "paged_attention", "--dtype", "bf16"], check=True,
                            capture_output=True, text=True).stdout
    found = {}
    for line in listed.splitlines():
        c = json.loads(line)
        p = c["params"]
        found[c["case"]] = dict(name=c["case"], batch=p["batch"], seq=p["seq_len"], heads=p["n_heads"],
                                kv_heads=p["n_kv_heads"], head_dim=p["head_dim"], dtype=c["dtype"])
    missing = [n for n in names if n not in found]
    if missing:
        raise SystemExit("decode_peers: no paged_attention problem named %s in %s --list" % (missing, cases_bench))
    return [found[n] for n in names]


def kv_bytes(p):
    return 2.0 * p["batch"] * p["seq"] * p["kv_heads"] * p["head_dim"] * 2


def time_back_to_back(fn, iters, reps):
    fn()
    torch.cuda.synchronize()
    ms = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
        ms.append((time.perf_counter() - t0) * 1e3 / iters)
    return statistics.median(ms)


def time_graph(fn, iters, reps):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()  # warm-up outside the capture (kernel selection, workspace)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(iters):
            fn()
    g.replay()
    torch.cuda.synchronize()
    ms = []
    for _ in range(reps):
        t0 = time.perf_counter()
        g.replay()
        torch.cuda.synchronize()
        ms.append((time.perf_counter() - t0) * 1e3 / iters)
    return statistics.median(ms)


def copy_bandwidth(iters, reps):
    x = torch.randn(1 << 30, device="cuda", dtype=torch.bfloat16)  # 2 GiB, far past the L2
    y = torch.empty_like(x)
    ms = time_back_to_back(lambda: y.copy_(x), max(3, iters // 10), reps)
    del x, y
    torch.cuda.empty_cache()
    return dict(median_ms=ms, tb_per_s=2 * (1 << 30) * 2 / (ms / 1e3) / 1e12)


def run_peer(p, backend, iters, reps):
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(p["batch"], p["heads"], 1, p["head_dim"], device="cuda", dtype=torch.bfloat16, generator=g)
    k = torch.randn(p["batch"], p["kv_heads"], p["seq"], p["head_dim"], device="cuda", dtype=torch.bfloat16, generator=g)
    v = torch.randn_like(k)
    out = {}

    def call():
        with sdpa_kernel(backend):
            out["o"] = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)

    res = {}
    try:
        res["eager_ms"] = time_back_to_back(call, iters, reps)
    except Exception as e:  # a backend that does not support the shape says so
        res = dict(error=str(e).split("\n")[0][:200])
    if "error" not in res:
        try:
            res["graph_ms"] = time_graph(call, iters, reps)
        except Exception as e:
            res["graph_error"] = str(e).split("\n")[0][:200]
        res["median_ms"] = min(res["eager_ms"], res.get("graph_ms", float("inf")))
        res["kv_gbps"] = kv_bytes(p) / (res["median_ms"] / 1e3) / 1e9
    del q, k, v
    out.clear()
    torch.cuda.empty_cache()
    return res


def run_ours(p, binary, iters, reps, splits=0, variant=None, stages=None, graph=False):
    env = dict(os.environ)
    env.pop("FLASHPORT_GPU_DECODE", None)
    env.pop("FLASHPORT_GPU_DECODE_STAGES", None)
    if variant:
        env["FLASHPORT_GPU_DECODE"] = variant
    if stages:
        env["FLASHPORT_GPU_DECODE_STAGES"] = str(stages)
    cmd = [binary, "--batch", str(p["batch"]), "--seq", str(p["seq"]), "--heads", str(p["heads"]),
           "--kv-heads", str(p["kv_heads"]), "--head-dim", str(p["head_dim"]), "--dtype", p["dtype"],
           "--iters", str(iters), "--reps", str(reps), "--splits", str(splits), "--graph", "1" if graph else "0"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        return dict(error=(r.stderr or r.stdout).strip().split("\n")[-1][:300])
    return json.loads(r.stdout.strip().split("\n")[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", required=True, help="path to flashport_bench_paged_attention")
    ap.add_argument("--cases", help="path to flashport_bench_ops, whose --list gives the problems' shapes "
                    "(default: beside --bench)")
    ap.add_argument("--problems", default=DEFAULT_PROBLEMS, help="paged_attention problem names, comma-separated")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    cases = args.cases or os.path.join(os.path.dirname(args.bench), "flashport_bench_ops")
    problems = load_problems(cases, [n for n in args.problems.split(",") if n])

    dev = torch.cuda.get_device_properties(0)
    report = dict(device=dev.name, sm_count=dev.multi_processor_count, torch=torch.__version__,
                  cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(), problems=[])
    report["copy"] = copy_bandwidth(args.iters, args.reps)
    print("device %s, torch %s, cuDNN %s; copy %.3f TB/s (read + write)" %
          (dev.name, torch.__version__, report["cudnn"], report["copy"]["tb_per_s"]), flush=True)
    for p in problems:
        rows = dict(ours=run_ours(p, args.bench, args.iters, args.reps),
                    ours_graph=run_ours(p, args.bench, args.iters, args.reps, graph=True),
                    ours_portable=run_ours(p, args.bench, args.iters, args.reps, variant="portable"))
        for n in SPLIT_SWEEP.get(p["name"], []):
            rows["ours_splits%d" % n] = run_ours(p, args.bench, args.iters, args.reps, splits=n)
        for n in STAGE_SWEEP:
            rows["ours_stages%d" % n] = run_ours(p, args.bench, args.iters, args.reps, stages=n)
        for name, backend in PEERS:
            rows[name] = run_peer(p, backend, args.iters, args.reps)
        report["problems"].append(dict(problem=p, kv_bytes=kv_bytes(p), results=rows))
        print_problem(p, rows, report["copy"]["tb_per_s"])
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "decode.json"), "w") as f:
        json.dump(report, f, indent=1)
    print_summary(report)


def ok(r):
    return r is not None and "error" not in r


def print_problem(p, rows, copy_tbs):
    print("\n== %s: batch %d, %d tokens, %d q / %d kv heads, d %d, %s; K+V %.1f MB" % (
        p["name"], p["batch"], p["seq"], p["heads"], p["kv_heads"], p["head_dim"], p["dtype"], kv_bytes(p) / 1e6))
    print("%-15s %-34s %10s %9s %9s" % ("impl", "kernel / timing", "ms", "GB/s", "of copy"))
    for name, r in rows.items():
        if not ok(r):
            print("%-15s %s" % (name, r.get("error", "?")))
            continue
        how = r.get("kernel", "eager %.4f, graph %s" % (r.get("eager_ms", 0),
                                                        "%.4f" % r["graph_ms"] if "graph_ms" in r else "n/a"))
        print("%-15s %-34s %10.4f %9.0f %8.1f%%" % (name, how, r["median_ms"], r["kv_gbps"],
                                                    100 * r["kv_gbps"] / (copy_tbs * 1e3)), flush=True)


def print_summary(report):
    copy = report["copy"]["tb_per_s"] * 1e3
    print("\n== summary: GB/s ratios (ours / peer); copy = device-to-device copy, read + write, same run")
    print("%-10s %-14s %9s %10s %10s %10s" % ("problem", "ours", "GB/s", "vs cuDNN", "vs flash", "of copy"))
    for e in report["problems"]:
        rows = e["results"]

        def ratio(ours, peer):
            r = rows.get(peer)
            return "%10.2f" % (ours["kv_gbps"] / r["kv_gbps"]) if ok(r) else "%10s" % "n/a"

        for name in ("ours", "ours_graph", "ours_portable"):
            ours = rows.get(name)
            if not ok(ours):
                print("%-10s %-14s failed: %s" % (e["problem"]["name"], name, (ours or {}).get("error")))
                continue
            print("%-10s %-14s %9.0f %s %s %9.1f%%" % (e["problem"]["name"], name, ours["kv_gbps"],
                                                        ratio(ours, "sdpa_cudnn"), ratio(ours, "sdpa_flash"),
                                                        100 * ours["kv_gbps"] / copy))


if __name__ == "__main__":
    sys.exit(main())
