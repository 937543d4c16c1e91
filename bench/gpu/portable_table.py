#!/usr/bin/env python3
"""The portable path's table (issue: "the portable path never loses to naive"), in one run on one GPU.

The portable kernels are what a GPU without a specialised path runs (every HIP target without matrix
cores, and any HIP build without hipBLAS for its GEMMs). On an NVIDIA GPU they are forced with
FLASHPORT_GPU_FLASH=portable, FLASHPORT_GPU_DECODE=portable and FLASHPORT_GPU_BLAS=portable. Rows:

  attention (bench/gpu/sdpa_peers.py's problems): flash portable; the default flash (tensor cores);
    naive with the vendor GEMM (cuBLAS: what a ROCm user's naive path gets from rocBLAS) and naive with
    the portable GEMM (what a HIP build without hipBLAS runs). Portable and naive take turns, --rounds
    times, and each figure is the median of its rounds' medians: naive moves 10-15 % between runs.
  matmul (flashport_bench_matmul): the engine's prefill products, vendor and portable GEMM, as TFLOP/s
    and as a share of the FP32 FMA rate (the portable GEMM's target: >= 50 %).
  engine (flashport bench engine): the random Qwen2.5-7B-shaped bf16 folder of bench/gpu/engine_peers.py
    (made here with transformers when missing), batch 1, 512 prompt tokens: prefill tok/s, TTFT and
    decode tok/s, default against everything portable.

Writes <out>/portable_table.json and portable_table.md. No AMD GPU exists here: nothing in this table
is an AMD figure.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sdpa_peers import PROBLEMS, flops, run_ours  # noqa: E402

PORTABLE_ENV = dict(FLASHPORT_GPU_FLASH="portable", FLASHPORT_GPU_DECODE="portable", FLASHPORT_GPU_BLAS="portable")


def with_env(env, fn, *a):
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return fn(*a)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def attention_rows(args):
    rows = []
    for p in PROBLEMS:
        runs = {"flash_portable": [], "flash_default": [], "naive_vendor_gemm": [], "naive_portable_gemm": []}
        kernels = {}
        for _ in range(args.rounds):
            for name, variant, impls, env in (("flash_portable", "portable", "flash", {}),
                                              ("naive_vendor_gemm", "mma", "naive", {}),
                                              ("naive_portable_gemm", "mma", "naive", {"FLASHPORT_GPU_BLAS": "portable"}),
                                              ("flash_default", "mma", "flash", {})):
                got = with_env(env, run_ours, p, args.flashport, args.iters, variant, impls)
                r = got.get("naive" if impls == "naive" else "flash_" + variant, {})
                if "median_ms" in r:
                    runs[name].append(r["median_ms"])
                    kernels[name] = r.get("kernel", "?")
                else:
                    kernels[name] = "error: " + str(r.get("error", got))
        row = dict(problem=p["name"], flops=flops(p), kernels=kernels, rounds=runs)
        for name, ms in runs.items():
            row[name + "_ms"] = statistics.median(ms) if ms else None
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def matmul_rows(args):
    rows = []
    for label, env in (("vendor", {}), ("portable", {"FLASHPORT_GPU_BLAS": "portable"})):
        r = subprocess.run([args.bench_matmul, "--fp32-peak-tflops", str(args.fp32_peak_tflops)], capture_output=True,
                           text=True, env=dict(os.environ, **env), timeout=300)
        for line in r.stdout.splitlines():
            if line.startswith("{"):
                row = json.loads(line)
                row["gemm"] = label
                rows.append(row)
                print(line, flush=True)
        if r.returncode != 0:
            rows.append(dict(gemm=label, error=r.stderr.strip()[-300:]))
            print("matmul %s failed: %s" % (label, r.stderr.strip()[-300:]), flush=True)
    return rows


def engine_rows(args):
    import engine_peers  # the engine bench's own random folder (transformers, ~25 s)
    folder = Path(args.folder)
    if not (folder / "config.json").exists():
        engine_peers.create_folder(engine_peers.config_dir("qwen2.5-7b-instruct"), folder, engine_peers.SEED, {})
    rows = dict(folder=str(folder))
    for label, env in (("default", {}), ("portable", PORTABLE_ENV)):
        cmd = [args.flashport, "bench", "engine", "--model", str(folder), "--device", "gpu", "--batch", "1",
               "--prompt-len", "512", "--new-tokens", "64", "--reps", "2", "--seed", "0", "--json"]
        r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **env), timeout=400)
        if r.returncode != 0:
            rows[label] = dict(error=r.stderr.strip()[-300:])
        else:
            run = json.loads(r.stdout)["runs"][0]
            rows[label] = {k: run.get(k) for k in ("ttft_ms", "prefill_tok_s", "decode_tok_s")}
        print(label, json.dumps(rows[label]), flush=True)
    return rows


def fmt(x, spec="%.2f"):
    return spec % x if isinstance(x, (int, float)) else "-"


def write_md(report, path):
    lines = ["# The portable path beside naive and the default path (%s)" % report.get("device", "?"), "",
             "Portable: FLASHPORT_GPU_FLASH/DECODE/BLAS=portable. Ratio = naive / portable: >= 1.0 means the "
             "portable flash kernel is at least as fast. No AMD GPU ran any of this.", ""]
    if report.get("attention"):
        lines += ["| problem | flash portable ms | default flash ms | naive (vendor GEMM) ms | naive (portable GEMM) ms "
                  "| vs naive vendor | vs naive portable | portable TF/s |", "|---|---|---|---|---|---|---|---|"]
        for r in report["attention"]:
            fp, nv, npg = r["flash_portable_ms"], r["naive_vendor_gemm_ms"], r["naive_portable_gemm_ms"]
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                r["problem"], fmt(fp, "%.3f"), fmt(r["flash_default_ms"], "%.3f"), fmt(nv, "%.3f"), fmt(npg, "%.3f"),
                fmt(nv / fp if fp and nv else None), fmt(npg / fp if fp and npg else None),
                fmt(r["flops"] / (fp / 1e3) / 1e12 if fp else None, "%.1f")))
        lines.append("")
    if report.get("matmul"):
        lines += ["| GEMM | kernel | tokens x in -> out | ms | TFLOP/s | share of FP32 FMA rate | FP32 floor ms | ok |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in report["matmul"]:
            if "error" in r:
                lines.append("| %s | error: %s | | | | | | |" % (r["gemm"], r["error"]))
                continue
            lines.append("| %s | %s | %d x %d -> %d | %.3f | %.1f | %.0f %% | %.3f | %s |" % (
                r["gemm"], r["kernel"], r["tokens"], r["in"], r["out"], r["median_ms"], r["tflops"],
                100 * r["fp32_fma_share"], r["fp32_floor_ms"], r["ok"]))
        lines.append("")
    eng = report.get("engine")
    if eng:
        lines += ["| engine (7B-shaped bf16, batch 1, 512 prompt tokens) | TTFT ms | prefill tok/s | decode tok/s |",
                  "|---|---|---|---|"]
        for label in ("default", "portable"):
            e = eng.get(label, {})
            lines.append("| %s | %s | %s | %s |" % (label, fmt(e.get("ttft_ms"), "%.1f"),
                                                     fmt(e.get("prefill_tok_s"), "%.0f"),
                                                     fmt(e.get("decode_tok_s"), "%.1f")) if "error" not in e else
                         "| %s | error: %s | | |" % (label, e["error"]))
    Path(path).write_text("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flashport", required=True)
    ap.add_argument("--bench-matmul", help="flashport_bench_matmul (the matmul rows)")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--fp32-peak-tflops", type=float, default=66.9, help="the H200's: 132 SMs x 128 x 2 x 1.98 GHz")
    ap.add_argument("--parts", default="attention,matmul,engine")
    ap.add_argument("--folder", default="/tmp/engine-bench/random-qwen2.5-7b-instruct")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    report = dict(fp32_peak_tflops=args.fp32_peak_tflops)
    try:
        import torch
        report["device"] = torch.cuda.get_device_name(0)
    except Exception:  # the table does not need torch except to make the engine's folder
        pass
    if "attention" in parts:
        report["attention"] = attention_rows(args)
    if "matmul" in parts and args.bench_matmul:
        report["matmul"] = matmul_rows(args)
    if "engine" in parts:
        report["engine"] = engine_rows(args)
    os.makedirs(args.out, exist_ok=True)
    Path(args.out, "portable_table.json").write_text(json.dumps(report, indent=1))
    write_md(report, Path(args.out, "portable_table.md"))
    print(Path(args.out, "portable_table.md").read_text())


if __name__ == "__main__":
    main()
