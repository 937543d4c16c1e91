#!/usr/bin/env python3
"""The PyTorch extension's costs on a GPU, measured (not asserted) in one run:

1. per-call overhead of torch.ops.flashport.attention on a tiny problem: eager calls back to back (host
   launch path: Python wrapper, dispatcher, planner, launch) against the same call replayed from a CUDA
   graph (the kernel alone), beside SDPA's (flash backend) pair; with --bench-ops, flashport_bench_ops's
   own C++ timing of the same case for comparison;
2. time against SDPA's backends on sdpa_peers.py's problems (the seeds' fp16 d64 4k, bf16 d128 8k,
   Stable Diffusion's d40 16k), CUDA events around each call, median of --iters, same run;
3. extra memory over what was live before the call (torch.cuda.max_memory_allocated), ours vs SDPA flash;
4. transformers: a random Qwen2.5-7B-shaped bf16 model (from its config, no download) prefilling 4096
   tokens with attn_implementation="flashport" against "sdpa": one forward, median of a few.

Writes <out>/torch_peers.json and <out>/torch_peers.md.
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flashport  # noqa: E402

from sdpa_peers import PEERS, PROBLEMS, TORCH_DTYPE  # noqa: E402  (the problems and backends of h200.sh bench)


def event_ms(fn, iters):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def extra_mib(fn):
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    out = fn()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    del out
    return peak / 2**20


def per_call(fn, n):
    """(eager us/call back to back, graph-replayed us/call)."""
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    eager = (time.perf_counter() - t0) / n * 1e6
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(100):
            fn()
    g.replay()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    reps = max(1, n // 100)
    for _ in range(reps):
        g.replay()
    torch.cuda.synchronize()
    graph = (time.perf_counter() - t0) / (reps * 100) * 1e6
    return eager, graph


def overhead(args):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q, k, v = (torch.randn(1, 128, 8, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    ours = per_call(lambda: torch.ops.flashport.attention(q, k, v, True, None, -1, False, "auto"), args.calls)
    wrapper = per_call(lambda: flashport.attention(q, k, v, causal=True), args.calls)

    def sdpa():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(qt, kt, vt, is_causal=True)
    peer = per_call(sdpa, args.calls)
    floor = per_call(lambda: q.mul(1.0), args.calls)  # one elementwise kernel: torch's own floor
    res = {"shape": "b1 s128 h8 d64 fp16 causal", "calls": args.calls,
           "op_us": {"eager": ours[0], "graph": ours[1], "overhead": ours[0] - ours[1]},
           "flashport.attention_us": {"eager": wrapper[0], "graph": wrapper[1], "overhead": wrapper[0] - wrapper[1]},
           "sdpa_flash_us": {"eager": peer[0], "graph": peer[1], "overhead": peer[0] - peer[1]},
           "torch.mul_us": {"eager": floor[0], "graph": floor[1], "overhead": floor[0] - floor[1]}}
    if args.bench_ops:
        try:
            r = subprocess.run([args.bench_ops, "--device", "gpu", "--op", "attention"], capture_output=True,
                               text=True, timeout=240)
            res["flashport_bench_ops"] = (r.stdout + r.stderr)[-4000:]
        except Exception as e:  # a measurement, not a test: record and go on
            res["flashport_bench_ops"] = f"failed: {e}"
    return res


def problems(args):
    from torch.nn.attention import sdpa_kernel
    rows = []
    for p in PROBLEMS:
        dt = TORCH_DTYPE[p["dtype"]]
        q, k, v = (torch.randn(p["batch"], p["seq"], p["heads"], p["head_dim"], device="cuda", dtype=dt)
                   for _ in range(3))
        qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
        row = {"name": p["name"]}

        def ours():
            return flashport.attention(qt, kt, vt, causal=p["causal"], layout="bhsd")
        try:
            row["flashport_ms"] = event_ms(ours, args.iters)
            row["flashport_extra_mib"] = extra_mib(ours)
        except (RuntimeError, ValueError) as e:
            row["flashport_ms"] = None
            row["flashport_error"] = str(e).splitlines()[0][:200]
        for name, be in PEERS:
            if name == "sdpa_math" and p["seq"] > 8192:
                row[name + "_ms"] = None  # its score matrix does not fit
                continue

            def peer(be=be):
                with sdpa_kernel(be):
                    return F.scaled_dot_product_attention(qt, kt, vt, is_causal=p["causal"])
            try:
                row[name + "_ms"] = event_ms(peer, args.iters)
                if name == "sdpa_flash":
                    row["sdpa_flash_extra_mib"] = extra_mib(peer)
            except RuntimeError as e:
                row[name + "_ms"] = None
                row[name + "_error"] = str(e).splitlines()[0][:200]
        rows.append(row)
        print(json.dumps(row), flush=True)
        del q, k, v, qt, kt, vt
        torch.cuda.empty_cache()
    return rows


def qwen7b(args):
    try:
        import transformers
    except ImportError as e:
        return {"skipped": f"transformers: {e}"}
    import flashport.integrations.transformers as fpt
    fp_name = fpt.register()  # "flashport", or its alias where transformers reserves "flash" names
    cfg = transformers.Qwen2Config(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                                   num_attention_heads=28, num_key_value_heads=4, max_position_embeddings=32768,
                                   rope_theta=1000000.0, tie_word_embeddings=False)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda"):
            model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa").eval()
    finally:
        torch.set_default_dtype(old)
    ids = torch.randint(0, 152064, (1, args.prefill), device="cuda")
    res = {"model": "Qwen2.5-7B-shaped, random bf16", "prefill_tokens": args.prefill,
           "transformers": transformers.__version__, "flashport_name": fp_name}
    for impl, name in (("flashport", fp_name), ("sdpa", "sdpa")):
        if hasattr(model, "set_attn_implementation"):
            model.set_attn_implementation(name)
        else:
            model.config._attn_implementation = name
        with torch.no_grad():
            ms = event_ms(lambda: model(input_ids=ids, use_cache=False, logits_to_keep=1), args.model_iters)
            mib = extra_mib(lambda: model(input_ids=ids, use_cache=False, logits_to_keep=1))
        res[impl] = {"forward_ms": ms, "peak_extra_mib": mib}
        print(impl, res[impl], flush=True)
    del model
    torch.cuda.empty_cache()
    return res


def markdown(rep):
    lines = [f"# flashport's PyTorch extension on {rep['device']} (torch {rep['torch']})", "",
             "## Per-call overhead (us per call; eager back to back vs replayed from a CUDA graph)", "",
             "| call | eager | graph | overhead |", "|---|---|---|---|"]
    o = rep.get("overhead", {})
    for key in ("op_us", "flashport.attention_us", "sdpa_flash_us", "torch.mul_us"):
        if key in o:
            lines.append(f"| {key[:-3]} | {o[key]['eager']:.1f} | {o[key]['graph']:.1f} | {o[key]['overhead']:.1f} |")
    lines += ["", "## Time (ms, median, CUDA events) and extra memory (MiB) vs SDPA", "",
              "| problem | flashport | math | efficient | flash | cuDNN | ours / flash | MiB ours | MiB flash |",
              "|---|---|---|---|---|---|---|---|---|"]

    def f(x):
        return "—" if x is None else f"{x:.3f}"
    for r in (rep.get("problems") if isinstance(rep.get("problems"), list) else []):
        ratio = (r["flashport_ms"] / r["sdpa_flash_ms"]) if r.get("sdpa_flash_ms") and r.get("flashport_ms") else None
        lines.append(f"| {r['name']} | {f(r['flashport_ms'])} | {f(r.get('sdpa_math_ms'))} | "
                     f"{f(r.get('sdpa_efficient_ms'))} | {f(r.get('sdpa_flash_ms'))} | {f(r.get('sdpa_cudnn_ms'))} | "
                     f"{f(ratio)} | {f(r.get('flashport_extra_mib'))} | {f(r.get('sdpa_flash_extra_mib'))} |")
    q = rep.get("qwen7b", {})
    if "flashport" in q:
        lines += ["", f"## transformers {q['transformers']}: {q['model']}, prefill {q['prefill_tokens']} tokens", "",
                  "| attn_implementation | forward ms | peak extra MiB |", "|---|---|---|"]
        for impl in ("flashport", "sdpa"):
            if impl in q:
                lines.append(f"| {impl} | {q[impl]['forward_ms']:.1f} | {q[impl]['peak_extra_mib']:.0f} |")
    elif q:
        lines += ["", f"transformers: {q}"]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--prefill", type=int, default=4096)
    ap.add_argument("--model-iters", type=int, default=3)
    ap.add_argument("--bench-ops", default="", help="flashport_bench_ops binary for its own timing of the cases")
    ap.add_argument("--skip", default="", help="comma-separated parts to skip: overhead,problems,qwen7b")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    skip = set(filter(None, args.skip.split(",")))
    rep = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "flashport": flashport.build_info()}
    for part, fn in (("overhead", overhead), ("problems", problems), ("qwen7b", qwen7b)):
        if part in skip:
            continue
        try:
            rep[part] = fn(args)
        except Exception as e:  # a measurement: record the failure and measure the rest
            rep[part] = {"error": f"{type(e).__name__}: {e}"}
            print(f"{part}: {rep[part]['error']}", flush=True)
        with open(os.path.join(args.out, "torch_peers.json"), "w") as fh:
            json.dump(rep, fh, indent=1)
    md = markdown(rep)
    with open(os.path.join(args.out, "torch_peers.md"), "w") as fh:
        fh.write(md)
    print(md)


if __name__ == "__main__":
    main()
