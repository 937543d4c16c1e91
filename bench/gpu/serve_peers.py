#!/usr/bin/env python3
"""`flashport serve` on a GPU against `flashport bench engine`, same run, same random model folder.

For each concurrency B (default 1, 8, 32, 64):
- `bench engine --batch B`: the engine driven directly, greedy, prompts of --prompt-len random ids,
  --new-tokens each; its decode tok/s is the ceiling a server can approach;
- the server: B clients at once, each one streaming /v1/completions (token-id prompt of the same
  length, temperature 0, ignore_eos, --new-tokens, stream_options.include_usage) over its own
  connection. Per stream: TTFT (request sent -> first token chunk) and the arrival time of every token
  chunk. The aggregate decode tok/s is counted where every stream is decoding: from the last stream's
  first token to the first stream's last token, the chunks all streams received in that window over its
  length (before it, later prompts' prefill chunks share the steps; bench engine's figure is pure
  decode rounds too). B = 1: tokens after the first over the first-to-last time, the median stream.
  One warm-up round of B short streams comes first; B = 1 runs --single-reps streams one after another.

The folder: a Qwen2.5-7B-shaped random bf16 model made with transformers (no download), with the real
Qwen3 tokenizer from tests/data/tokenizer/qwen3 and the vocabulary cut to the tokenizer's size, so
that every id the random model emits can be detokenized (Qwen2.5's own config pads its vocabulary past
its tokenizer; a trained model never emits those ids, a random one does).

Writes <out>/serve_peers.json and <out>/serve_peers.md. Stdlib plus transformers/torch for the folder.
"""
import argparse
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOKENIZER = ROOT / "tests" / "data" / "tokenizer" / "qwen3"
sys.path.insert(0, str(ROOT / "tests" / "serve"))
from serve_harness import sse_events  # noqa: E402  (stdlib only)


def tokenizer_size(folder=TOKENIZER):
    """One past the largest id a folder's tokenizer.json knows (vocabulary and added tokens)."""
    tok = json.loads((Path(folder) / "tokenizer.json").read_text())
    ids = list(tok["model"]["vocab"].values()) + [t["id"] for t in tok.get("added_tokens", [])]
    return max(ids) + 1


def make_folder(folder, layers):
    if (folder / "config.json").exists():
        return {"folder": str(folder), "made": False}
    import torch
    import transformers
    vocab = tokenizer_size()
    cfg = transformers.Qwen2Config(vocab_size=vocab, hidden_size=3584, intermediate_size=18944,
                                   num_hidden_layers=layers, num_attention_heads=28, num_key_value_heads=4,
                                   max_position_embeddings=32768, rope_theta=1000000.0, tie_word_embeddings=False,
                                   bos_token_id=151643, eos_token_id=151645)
    t0 = time.perf_counter()
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda"):
            model = transformers.AutoModelForCausalLM.from_config(cfg)
    finally:
        torch.set_default_dtype(old)
    if folder.exists():
        shutil.rmtree(folder)
    model.save_pretrained(str(folder))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TOKENIZER / name, folder / name)
    del model
    torch.cuda.empty_cache()
    return {"folder": str(folder), "made": True, "vocab": vocab, "layers": layers, "seconds": time.perf_counter() - t0}


def bench_engine(args, folder, batches):
    cmd = [args.flashport, "bench", "engine", "--model", str(folder), "--device", args.device, "--batch",
           ",".join(map(str, batches)), "--prompt-len", str(args.prompt_len), "--new-tokens", str(args.new_tokens),
           "--reps", "2", "--seed", "0", "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.engine_timeout)
    if r.returncode != 0:
        raise RuntimeError(f"bench engine failed (rc {r.returncode}): {r.stderr[-800:]}")
    report = json.loads(r.stdout)
    return {run["batch"]: {"decode_tok_s": run["decode_tok_s"], "ttft_ms": run["ttft_ms"],
                           "step_ms_median": run.get("step_ms_median")} for run in report["runs"]}


class Server:
    def __init__(self, args, folder, parallel):
        cmd = [args.flashport, "serve", "--model", str(folder), "--device", args.device, "--port", "0", "--parallel",
               str(parallel), "--max-queue", str(4 * parallel)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines = []
        self.port = None
        deadline = time.time() + args.load_timeout
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line.rstrip())
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
            if "ready" in line:
                break
        if self.port is None or self.proc.poll() is not None:
            raise RuntimeError("serve did not start: " + " | ".join(self.lines[-10:]))
        threading.Thread(target=self._drain, daemon=True).start()  # keep its pipe from filling

    def _drain(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def stream(port, prompt, tokens, timeout):
    """One streamed completion: (ttft s, token chunk arrival times, completion tokens, ok, error)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    body = {"prompt": prompt, "max_tokens": tokens, "temperature": 0, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    c.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        return None, None, 0, False, f"HTTP {r.status}: {r.read()[:200]!r}"
    stamps = []
    usage, done = None, False
    for now, block in sse_events(r):
        data = block.removeprefix("data: ").strip()
        if not data or data.startswith(":"):
            continue
        if data == "[DONE]":
            done = True
            continue
        msg = json.loads(data)
        if msg.get("usage"):
            usage = msg["usage"]
        if msg.get("choices") and msg["choices"][0].get("text"):
            stamps.append(now)
    c.close()
    n = usage["completion_tokens"] if usage else 0
    ok = done and usage is not None and n == tokens and len(stamps) > 1
    return (stamps[0] - t0) if stamps else None, stamps, n, ok, None if ok else f"done={done} usage={usage}"


def round_of(port, clients, prompts, tokens, timeout):
    results = [None] * clients

    def run(i):
        try:
            results[i] = stream(port, prompts[i % len(prompts)], tokens, timeout)
        except Exception as e:  # a measurement: count it as a failed stream
            results[i] = (None, None, 0, False, f"{type(e).__name__}: {e}")
    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, time.perf_counter() - t0


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else None


def serve_runs(args, port, batches, vocab):
    import random
    rng = random.Random(0)
    prompts = [[rng.randrange(100, min(vocab, 150000)) for _ in range(args.prompt_len)] for _ in range(max(batches))]
    out = {}
    for b in batches:
        round_of(port, b, prompts, 8, args.stream_timeout)  # warm-up: this batch's shapes
        if b == 1:
            res = []
            for _ in range(args.single_reps):
                res += round_of(port, 1, prompts, args.new_tokens, args.stream_timeout)[0]
            wall = None
        else:
            res, wall = round_of(port, b, prompts, args.new_tokens, args.stream_timeout)
        good = [r for r in res if r[3]]
        ttft = [r[0] * 1e3 for r in good]
        rate = None
        if b == 1 and good:
            rate = statistics.median((len(r[1]) - 1) / (r[1][-1] - r[1][0]) for r in good)
        elif len(good) == len(res) and good:
            start, end = max(r[1][0] for r in good), min(r[1][-1] for r in good)
            if end > start:
                rate = sum(sum(start < t <= end for t in r[1]) for r in good) / (end - start)
        row = {"streams": len(res), "failed": len(res) - len(good),
               "errors": sorted({r[4] for r in res if r[4]})[:3],
               "ttft_ms_p50": quantile(ttft, 0.5), "ttft_ms_p99": quantile(ttft, 0.99),
               "decode_tok_s": rate, "wall_s": wall,
               "tokens_per_s_overall": sum(r[2] for r in good) / wall if wall else None}
        out[b] = row
        print(f"serve B={b}: {row}", flush=True)
    return out


def markdown(rep):
    lines = [f"# flashport serve vs bench engine on {rep.get('device', 'the GPU')}", "",
             f"Folder: {rep['folder'].get('folder')} (vocabulary {rep['folder'].get('vocab', '?')}"
             f"{'; made here: Qwen2.5-7B-shaped, random bf16' if rep['folder'].get('made') else ''}); "
             f"prompt {rep['prompt_len']} token ids, {rep['new_tokens']} new tokens per stream, greedy; "
             f"device {rep.get('device_kind', '')}.", "",
             "| streams | bench engine decode tok/s | serve decode tok/s (HTTP, SSE) | serve / engine | serve TTFT p50 ms | "
             "p99 ms | engine TTFT ms | failed streams |", "|---|---|---|---|---|---|---|---|"]
    for b, s in rep.get("serve", {}).items():
        e = rep.get("engine", {}).get(b) or rep.get("engine", {}).get(str(b)) or {}
        ratio = s["decode_tok_s"] / e["decode_tok_s"] if s.get("decode_tok_s") and e.get("decode_tok_s") else None

        def f(x, d=1):
            return "—" if x is None else f"{x:.{d}f}"
        lines.append(f"| {b} | {f(e.get('decode_tok_s'))} | {f(s.get('decode_tok_s'))} | {f(ratio, 3)} | "
                     f"{f(s.get('ttft_ms_p50'))} | {f(s.get('ttft_ms_p99'))} | {f(e.get('ttft_ms'))} | "
                     f"{s['failed']} of {s['streams']} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flashport", required=True, help="the flashport binary (a GPU build)")
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--folder", default="/tmp/serve-bench/random-qwen2.5-7b",
                    help="made there when it has no config.json; an existing folder is used as it is")
    ap.add_argument("--device", default="gpu", help="gpu, or cpu to try the script on a small folder")
    ap.add_argument("--layers", type=int, default=28)
    ap.add_argument("--batches", default="1,8,32,64")
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--single-reps", type=int, default=5)
    ap.add_argument("--engine-timeout", type=int, default=300)
    ap.add_argument("--load-timeout", type=int, default=300)
    ap.add_argument("--stream-timeout", type=int, default=120)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    batches = [int(b) for b in args.batches.split(",")]
    rep = {"prompt_len": args.prompt_len, "new_tokens": args.new_tokens, "batches": batches, "device_kind": args.device}
    if args.device == "gpu":
        try:
            import torch
            rep["device"] = torch.cuda.get_device_name()
        except Exception:
            pass

    def save():
        with open(os.path.join(args.out, "serve_peers.json"), "w") as fh:
            json.dump(rep, fh, indent=1)
    folder = Path(args.folder)
    rep["folder"] = make_folder(folder, args.layers)
    config_vocab = json.loads((folder / "config.json").read_text())["vocab_size"]
    rep["folder"].setdefault("vocab", min(config_vocab, tokenizer_size(folder)))
    print("folder:", rep["folder"], flush=True)
    save()
    # The server first: bench engine's figures come after, on a machine as warm as the server's was.
    srv = Server(args, folder, max(batches))
    rep["serve_start"] = srv.lines[:4]
    try:
        rep["serve"] = serve_runs(args, srv.port, batches, rep["folder"]["vocab"])
    finally:
        srv.stop()
        rep["serve_log_tail"] = srv.lines[-6:]
        save()
    rep["engine"] = bench_engine(args, folder, batches)
    print("engine:", rep["engine"], flush=True)
    save()
    md = markdown(rep)
    with open(os.path.join(args.out, "serve_peers.md"), "w") as fh:
        fh.write(md)
    print(md)


if __name__ == "__main__":
    sys.exit(main())
