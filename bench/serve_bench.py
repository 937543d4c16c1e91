#!/usr/bin/env python3
"""Figures of `flashport serve` on this machine (stdlib only): what the HTTP layer costs.

  python3 bench/serve_bench.py [--model models/tiny-kjv] [--bin build/cpu/bin/flashport]

- one-token requests per second: non-streaming /v1/completions with max_tokens 1, one client on a
  keep-alive connection, then 8 clients;
- the server's overhead per streamed token: a greedy 200-token stream's time per token against
  `flashport generate`'s decode time per token on the same model (HTTP + JSON + SSE + the
  scheduler's hand-off);
- inter-token latency of a stream while other clients send long prompts (prefilled in chunks of
  --max-step-tokens), against the same stream alone: the bound docs/serve.md states.
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "serve"))
import serve_harness  # noqa: E402
from serve_harness import Server  # noqa: E402


def one_token_rps(srv, clients, seconds=3.0):
    counts = [0] * clients
    stop = time.time() + seconds

    def run(i):
        c = srv.conn()
        body = json.dumps({"prompt": "In", "max_tokens": 1}).encode()
        while time.time() < stop:
            c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
            r = c.getresponse()
            r.read()
            assert r.status == 200
            counts[i] += 1
        c.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / seconds


def stream_gaps(srv, tokens, prompt="In"):
    """Times between a stream's data chunks (one per token here: the tiny model's tokens are words)."""
    c = srv.conn()
    body = {"prompt": prompt, "max_tokens": tokens, "ignore_eos": True, "temperature": 0, "stream": True}
    c.request("POST", "/v1/completions", body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    stamps = [t for t, block in serve_harness.sse_events(r) if block.startswith("data: {")]
    c.close()
    return [b - a for a, b in zip(stamps, stamps[1:])]


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p / 100 * len(v)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="models/tiny-kjv")
    ap.add_argument("--bin", default="build/cpu/bin/flashport")
    ap.add_argument("--max-step-tokens", default="64")
    a = ap.parse_args()
    # Passive OpenMP waiting for both runs, as the tests use: on a shared 2-core machine spinning
    # workers make the tiny model's microsecond ops wait for descheduled threads.
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    serve_harness.BIN, serve_harness.MODEL = a.bin, a.model

    gen = subprocess.run([a.bin, "generate", "--model", a.model, "--prompt", "In", "--max-tokens", "200",
                          "--ignore-eos", "--temperature", "0", "--json"], capture_output=True, text=True, check=True)
    engine_ms = 1e3 / json.loads(gen.stdout)["figures"]["decode_tok_s"]
    one = subprocess.run([a.bin, "generate", "--model", a.model, "--prompt", "In", "--max-tokens", "1", "--json"],
                         capture_output=True, text=True, check=True)
    engine_ttft_ms = json.loads(one.stdout)["figures"]["ttft_ms"]

    with Server("--parallel", "8", "--max-queue", "64", "--max-step-tokens", a.max_step_tokens) as srv:
        one_token_rps(srv, 1, 1.0)  # warm-up
        rps1 = one_token_rps(srv, 1)
        rps8 = one_token_rps(srv, 8)
        gaps = []
        for _ in range(3):
            gaps += stream_gaps(srv, 200)
        # The median: on a shared machine the mean is the scheduler's noise, not the server's cost.
        http_ms = 1e3 * pct(gaps, 50)
        alone_p50, alone_max = pct(gaps, 50), max(gaps)

        # The same stream while 4 clients keep sending 240-token prompts (max_tokens 1).
        long_prompt = [1000 + (i % 900) for i in range(240)]
        stop = [False]

        def prefiller():
            c = srv.conn()
            body = json.dumps({"prompt": long_prompt, "max_tokens": 1}).encode()
            while not stop[0]:
                c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
                c.getresponse().read()
            c.close()

        threads = [threading.Thread(target=prefiller) for _ in range(4)]
        for t in threads:
            t.start()
        loaded = []
        for _ in range(3):
            loaded += stream_gaps(srv, 200)
        stop[0] = True
        for t in threads:
            t.join()

    print("one-token requests/s: %.0f with 1 client (keep-alive; %.2f ms each, of which the engine's TTFT for a "
          "1-token prompt is %.2f ms), %.0f with 8 clients" % (rps1, 1e3 / rps1, engine_ttft_ms, rps8))
    print("per streamed token (median): %.3f ms through HTTP vs %.3f ms engine decode (flashport generate): "
          "overhead %.3f ms" % (http_ms, engine_ms, http_ms - engine_ms))
    print("inter-token latency alone: p50 %.2f ms, max %.2f ms; with 4 clients sending 240-token prompts "
          "(--max-step-tokens %s): p50 %.2f ms, p99 %.2f ms, max %.2f ms"
          % (alone_p50 * 1e3, alone_max * 1e3, a.max_step_tokens, pct(loaded, 50) * 1e3, pct(loaded, 99) * 1e3,
             max(loaded) * 1e3))


if __name__ == "__main__":
    main()
