#!/usr/bin/env python3
"""The PyTorch extension's costs on a GPU, measured (not asserted) in one run:

1. per-call overhead of torch.ops.flashport.attention on a tiny, launch-bound problem (tests/ops/
   attention_case.h's launch_d64_128_causal): calls back to back timed as flashport_bench_ops times the
   C++ call (`iters` calls, one synchronise, host clock, median of reps) against the C++ call itself
   (with --bench-ops, run in this process's turn); the host's cost per call alone (a burst shorter than
   the launch queue, no synchronise); eager against the same calls replayed from a CUDA graph (the
   kernel alone); SDPA's flash backend and one torch.mul (torch's own floor) beside it;
2. time against SDPA's backends on sdpa_peers.py's problems (the seeds' fp16 d64 4k, bf16 d128 8k,
   Stable Diffusion's d40 16k), CUDA events around each call, median of --iters, same run; with
   --bench-ops also the op and the C++ call timed the same way back to back, one after the other;
3. extra memory over what was live before the call (torch.cuda.max_memory_allocated), ours vs SDPA flash;
4. transformers: a random Qwen2.5-7B-shaped bf16 model (from its config, no download) prefilling 4096
   tokens with attn_implementation="flashport" against "sdpa": one forward, median of a few; and one
   forward of each under torch.profiler, its GPU time split into attention kernels and the rest.

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


def back_to_back(fn, iters, reps=7):
    """Seconds per call as flashport_bench_ops times its C++ call: `iters` calls, one synchronise, host
    clock around the lot; the median of `reps` runs after one warm-up run."""
    runs = []
    for r in range(reps + 1):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
        if r:
            runs.append((time.perf_counter() - t0) / iters)
    return statistics.median(runs)


def host_us(fn, burst=64, reps=15):
    """The host's own cost per call in us: a burst of calls shorter than the launch queue, timed without
    waiting for the GPU (median of reps); what a call costs when the kernel is not the limit."""
    runs = []
    for _ in range(reps + 1):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(burst):
            fn()
        runs.append((time.perf_counter() - t0) / burst * 1e6)
    torch.cuda.synchronize()
    return statistics.median(runs[1:])


# sdpa_peers.py's problem -> the same problem in tests/ops/attention_case.h (flashport_bench_ops's case).
BENCH_CASE = {"seeds_fp16_d64_4k": "seeds_d64_4k", "bf16_d128_8k": "d128_8k", "bf16_d128_8k_causal": "d128_8k_causal",
              "sd15_fp16_d40_16k": "sd15_d40_16k"}
BENCH_DTYPE = {"fp16": "f16", "bf16": "bf16"}


def bench_ops_us(args, case, dtype, iters):
    """flashport_bench_ops's median us per call of one attention case (the C++ call), or None."""
    if not args.bench_ops:
        return None
    try:
        r = subprocess.run([args.bench_ops, "--device", "gpu", "--op", "attention", "--dtype", dtype, "--filter", case,
                            "--iters", str(iters)], capture_output=True, text=True, timeout=240)
    except Exception as e:  # a measurement, not a test: record and go on
        print(f"flashport_bench_ops {case}: {e}", flush=True)
        return None
    for line in r.stdout.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if row.get("case") == case and row.get("ok"):
            return row["median_us"]
    print(f"flashport_bench_ops {case}: no ok row (rc {r.returncode}): {(r.stdout + r.stderr)[-500:]}", flush=True)
    return None


def overhead(args):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    # tests/ops/attention_case.h's launch_d64_128_causal: b1, 128 queries and keys, 8 heads, d64, causal.
    q, k, v = (torch.randn(1, 128, 8, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))

    def sdpa():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(qt, kt, vt, is_causal=True)
    default = torch.ops.flashport.attention.default  # the overload itself, past the packet's resolution
    calls = {"op": lambda: torch.ops.flashport.attention(q, k, v, True, None, -1, False, "auto"),
             "op.default": lambda: default(q, k, v, True, None, -1, False, "auto"),
             "flashport.attention": lambda: flashport.attention(q, k, v, causal=True),
             "sdpa_flash": sdpa,
             "torch.mul": lambda: q.mul(1.0)}  # one elementwise kernel: torch's own floor
    res = {"shape": "b1 s128 h8 d64 fp16 causal (launch_d64_128_causal)", "calls": args.calls, "iters": 200}
    cpp = bench_ops_us(args, "launch_d64_128_causal", "f16", 200)
    for name, fn in calls.items():
        eager, graph = per_call(fn, args.calls)
        res[name + "_us"] = {"back_to_back": back_to_back(fn, 200) * 1e6, "host": host_us(fn), "eager": eager,
                             "graph": graph, "overhead": eager - graph}
    if cpp is not None:
        res["cpp_us"] = cpp
        res["op_over_cpp_us"] = res["op_us"]["back_to_back"] - cpp
        res["wrapper_over_cpp_us"] = res["flashport.attention_us"]["back_to_back"] - cpp
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
            cpp = bench_ops_us(args, BENCH_CASE.get(p["name"], p["name"]), BENCH_DTYPE[p["dtype"]], 10)
            if cpp is not None:  # the C++ call, then the op, timed the same way one after the other
                row["cpp_b2b_ms"] = cpp / 1e3
                row["flashport_b2b_ms"] = back_to_back(ours, 10) * 1e3
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


ATTENTION_KERNEL_WORDS = ("flash", "fmha", "sdpa", "attention", "attn")


def gpu_profile(fn, top=8):
    """One call of fn under torch.profiler: GPU kernel ms in all, in attention kernels (names holding
    any of ATTENTION_KERNEL_WORDS: flashport's, SDPA's flash/efficient/cuDNN) and the rest, and the
    `top` kernels by time."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    by_name = {}
    for e in prof.events():
        if e.device_type != DeviceType.CUDA:
            continue
        us = e.time_range.end - e.time_range.start
        total, count = by_name.get(e.name, (0.0, 0))
        by_name[e.name] = (total + us, count + 1)
    total = sum(t for t, _ in by_name.values()) / 1e3
    attn = sum(t for n, (t, _) in by_name.items() if any(w in n.lower() for w in ATTENTION_KERNEL_WORDS)) / 1e3
    ranked = sorted(by_name.items(), key=lambda kv: -kv[1][0])[:top]
    return {"gpu_ms": total, "attention_ms": attn, "other_ms": total - attn,
            "top": [{"kernel": n[:90], "ms": t / 1e3, "calls": c} for n, (t, c) in ranked]}


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
            prof = gpu_profile(lambda: model(input_ids=ids, use_cache=False, logits_to_keep=1))
        res[impl] = {"forward_ms": ms, "peak_extra_mib": mib, "profile": prof}
        print(impl, res[impl], flush=True)
    del model
    torch.cuda.empty_cache()
    return res


def markdown(rep):
    def f(x, digits=3):
        return "—" if x is None else f"{x:.{digits}f}"
    lines = [f"# flashport's PyTorch extension on {rep['device']} (torch {rep['torch']})", ""]
    o = rep.get("overhead", {})
    lines += [f"## Per-call cost, {o.get('shape', '')} (us per call)", "",
              "back to back: 200 calls, one synchronise, host clock, median of 7 (flashport_bench_ops's method); "
              "host: the host's time per call in a 64-call burst (no synchronise); eager/graph: calls back to "
              "back against the same calls replayed from a CUDA graph.", "",
              "| call | back to back | host | eager | graph | eager - graph |", "|---|---|---|---|---|---|"]
    if "cpp_us" in o:
        lines.append(f"| C++ flashport::attention (flashport_bench_ops) | {o['cpp_us']:.1f} | | | | |")
    for key in ("op_us", "op.default_us", "flashport.attention_us", "sdpa_flash_us", "torch.mul_us"):
        if key in o:
            r = o[key]
            lines.append(f"| {key[:-3]} | {f(r.get('back_to_back'), 1)} | {f(r.get('host'), 1)} | {r['eager']:.1f} | "
                         f"{r['graph']:.1f} | {r['overhead']:.1f} |")
    if "op_over_cpp_us" in o:
        lines += ["", f"The op over the C++ call: {o['op_over_cpp_us']:.1f} us (torch.ops.flashport.attention), "
                  f"{o['wrapper_over_cpp_us']:.1f} us (flashport.attention)."]
    lines += ["", "## Time (ms, median, CUDA events) and extra memory (MiB) vs SDPA", "",
              "| problem | flashport | math | efficient | flash | cuDNN | ours / flash | MiB ours | MiB flash |",
              "|---|---|---|---|---|---|---|---|---|"]
    probs = rep.get("problems") if isinstance(rep.get("problems"), list) else []
    for r in probs:
        ratio = (r["flashport_ms"] / r["sdpa_flash_ms"]) if r.get("sdpa_flash_ms") and r.get("flashport_ms") else None
        lines.append(f"| {r['name']} | {f(r['flashport_ms'])} | {f(r.get('sdpa_math_ms'))} | "
                     f"{f(r.get('sdpa_efficient_ms'))} | {f(r.get('sdpa_flash_ms'))} | {f(r.get('sdpa_cudnn_ms'))} | "
                     f"{f(ratio)} | {f(r.get('flashport_extra_mib'))} | {f(r.get('sdpa_flash_extra_mib'))} |")
    if any("cpp_b2b_ms" in r for r in probs):
        lines += ["", "## The op against the C++ call (ms; 10 calls back to back, host clock, median of 7)", "",
                  "| problem | C++ (flashport_bench_ops) | op (flashport.attention, bhsd) | op / C++ |", "|---|---|---|---|"]
        for r in probs:
            if "cpp_b2b_ms" in r:
                lines.append(f"| {r['name']} | {r['cpp_b2b_ms']:.3f} | {r['flashport_b2b_ms']:.3f} | "
                             f"{r['flashport_b2b_ms'] / r['cpp_b2b_ms']:.3f} |")
    q = rep.get("qwen7b", {})
    if "flashport" in q:
        lines += ["", f"## transformers {q['transformers']}: {q['model']}, prefill {q['prefill_tokens']} tokens", "",
                  "| attn_implementation | forward ms | peak extra MiB |", "|---|---|---|"]
        for impl in ("flashport", "sdpa"):
            if impl in q:
                lines.append(f"| {impl} | {q[impl]['forward_ms']:.1f} | {q[impl]['peak_extra_mib']:.0f} |")
        lines += ["", "One forward under torch.profiler: GPU kernel time (ms), attention kernels and the rest.", "",
                  "| attn_implementation | GPU | attention | other | top kernels (ms, calls) |", "|---|---|---|---|---|"]
        for impl in ("flashport", "sdpa"):
            p = q.get(impl, {}).get("profile")
            if p:
                top = "; ".join(f"{t['kernel'][:48]} {t['ms']:.1f} ({t['calls']})" for t in p["top"][:5])
                lines.append(f"| {impl} | {p['gpu_ms']:.1f} | {p['attention_ms']:.1f} | {p['other_ms']:.1f} | {top} |")
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
