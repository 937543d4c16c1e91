#!/usr/bin/env python3
"""flashport's CPU engine beside llama.cpp in one run: same model, same prompt ids, same thread count.

    python3 bench/cpu_llama.py [--reps 3] [--threads 2] [--max-tokens 64] [--peer /tmp/peer-llama]
                               [--build build/cpu] [--json OUT.json]

The peer is ../shared/peers/llamacpp (relative to the repository root): llama.cpp's prebuilt CPU
libraries through npm's node-llama-cpp, a seeded random Qwen2.5-0.5B-shaped bf16 folder (every
weight drawn independently), its bf16 GGUF and a seeded 128-id prompt; its setup.sh is run once
when --peer lacks them. Without ../shared the benchmark says so and exits 0 (a skip).

Each repetition runs `flashport generate --json` and then llama_run.mjs, alternating, so both see
the same machine load; the figures are the medians over repetitions of prefill tok/s (prompt tokens
/ time to the first token) and decode tok/s ((generated - 1) / time after it), the same definitions
on both sides. Greedy, EOS ignored, repetition penalty 1 on both.

The decode limit is the weights' bytes (each read once per token) over the machine's read-only
bandwidth, measured by flashport_cpu_ceilings before and after the runs (memcpy's read + write
figure is printed too; its limit is lower). The 1-minute load average is printed at the start and
the end: the machine is shared, so note it with the figures.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_json(cmd, env=None):
    """Runs cmd and returns the last line of its stdout parsed as JSON."""
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def ceilings(build, threads):
    """(read-only GB/s, memcpy GB/s, sgemm GFLOP/s) from flashport_cpu_ceilings."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = subprocess.run([str(build / "bin/flashport_cpu_ceilings")], env=env, check=True, capture_output=True,
                         text=True).stdout
    def num(pattern):
        m = re.search(pattern, out)
        return float(m.group(1)) if m else float("nan")
    return num(r"read 1 GiB: ([\d.]+)"), num(r"memcpy 1 GiB: ([\d.]+)"), num(r"sgemm \d+\^3: ([\d.]+)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--peer", default="/tmp/peer-llama", help="the peer's work folder (setup.sh's WORK_DIR)")
    ap.add_argument("--build", default=str(ROOT / "build/cpu"))
    ap.add_argument("--json", help="also write every run and the summary here")
    args = ap.parse_args()

    shared = ROOT.parent / "shared" / "peers" / "llamacpp"
    if not shared.is_dir():
        print(f"skip: {shared} is absent (the llama.cpp peer lives outside the repository)")
        return 0
    peer, build = Path(args.peer), Path(args.build)
    model, gguf, ids_file = peer / "qwen05b-rand", peer / "qwen05b-rand-bf16.gguf", peer / "prompt128.ids"
    if not (gguf.is_file() and ids_file.is_file() and (peer / "node_modules/node-llama-cpp").is_dir()):
        subprocess.run(["bash", str(shared / "setup.sh"), str(peer)], cwd=ROOT, check=True)
    flashport = build / "bin/flashport"
    if not flashport.is_file():
        sys.exit(f"error: {flashport} not found: build the cpu preset first")
    ids = ids_file.read_text().strip()
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    load0 = os.getloadavg()[0]
    read0, copy0, sgemm0 = ceilings(build, args.threads)

    ours, theirs = [], []
    for rep in range(args.reps):
        f = run_json([str(flashport), "generate", "--model", str(model), "--prompt-ids", ids, "--max-tokens",
                      str(args.max_tokens), "--ignore-eos", "--temperature", "0", "--repetition-penalty", "1",
                      "--json"], env=env)
        ours.append(f)
        l = run_json(["node", str(shared / "llama_run.mjs"), "--model", str(gguf), "--prompt-ids", ids,
                      "--max-tokens", str(args.max_tokens), "--threads", str(args.threads)],
                     env=dict(os.environ, NODE_PATH=str(peer / "node_modules")))
        theirs.append(l)
        fig = f["figures"]
        print(f"rep {rep + 1}: flashport prefill {fig['prefill_tok_s']:.1f} decode {fig['decode_tok_s']:.2f} | "
              f"llama.cpp prefill {l['prefill_tok_s']:.1f} decode {l['decode_tok_s']:.2f} tok/s "
              f"(load {os.getloadavg()[0]:.2f})", flush=True)

    read1, copy1, sgemm1 = ceilings(build, args.threads)
    load1 = os.getloadavg()[0]
    med = statistics.median
    fp_pre, fp_dec = med(r["figures"]["prefill_tok_s"] for r in ours), med(r["figures"]["decode_tok_s"] for r in ours)
    ll_pre, ll_dec = med(r["prefill_tok_s"] for r in theirs), med(r["decode_tok_s"] for r in theirs)
    weight_bytes = ours[0]["figures"]["weight_bytes"]
    read_bw, copy_bw = med([read0, read1]), med([copy0, copy1])
    read_limit, copy_limit = read_bw * 1e9 / weight_bytes, copy_bw * 1e9 / weight_bytes
    same = sum(a == b for a, b in zip(ours[0].get("generated_ids", []), theirs[0].get("generated_ids", [])))
    summary = {
        "threads": args.threads, "reps": args.reps, "prompt_tokens": len(ids.split(",")),
        "max_tokens": args.max_tokens, "load_avg_1min": [load0, load1],
        "flashport": {"prefill_tok_s": fp_pre, "decode_tok_s": fp_dec},
        "llama_cpp": {"prefill_tok_s": ll_pre, "decode_tok_s": ll_dec},
        "ratio": {"prefill": fp_pre / ll_pre, "decode": fp_dec / ll_dec},
        "weight_bytes": weight_bytes, "read_gbps": [read0, read1], "memcpy_gbps": [copy0, copy1],
        "sgemm_gflops": [sgemm0, sgemm1], "decode_limit_tok_s": {"read": read_limit, "memcpy": copy_limit},
        "decode_of_read_limit": {"flashport": fp_dec / read_limit, "llama_cpp": ll_dec / read_limit},
        "greedy_ids_equal_first_run": same,
    }
    print(f"\nmedians of {args.reps} alternating runs, {args.threads} threads, "
          f"{summary['prompt_tokens']}-token prompt, {args.max_tokens} tokens; 1-min load {load0:.2f} -> {load1:.2f}")
    print(f"{'':10} {'flashport':>10} {'llama.cpp':>10} {'ratio':>7}")
    print(f"{'prefill':10} {fp_pre:10.1f} {ll_pre:10.1f} {fp_pre / ll_pre:6.2f}x   tok/s")
    print(f"{'decode':10} {fp_dec:10.2f} {ll_dec:10.2f} {fp_dec / ll_dec:6.2f}x   tok/s")
    print(f"decode limit: {weight_bytes / 1e6:.1f} MB of weights / read {read0:.1f}, {read1:.1f} GB/s = "
          f"{read_limit:.1f} tok/s (memcpy {copy0:.1f}, {copy1:.1f} GB/s: {copy_limit:.1f} tok/s); flashport at "
          f"{100 * fp_dec / read_limit:.0f}%, llama.cpp at {100 * ll_dec / read_limit:.0f}% of the read limit")
    print(f"sgemm {sgemm0:.0f}, {sgemm1:.0f} GFLOP/s; greedy ids equal in the first run: {same}/{args.max_tokens}")
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary, "flashport": ours, "llama_cpp": theirs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
