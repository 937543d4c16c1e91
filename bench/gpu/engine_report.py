"""The figures and the table of the engine benchmark (bench/gpu/engine_peers.py), from its report: pure
Python, no torch, so tests/python checks it with made-up numbers on a machine without a GPU.

The report is engine.json's content: {"steps": {name: result dict, or {"error": text}}, ...}. summarize()
reads the steps into headline figures (None where a step failed or did not run) and the issue's checks;
markdown() turns both into engine.md's table.
"""

# The targets and bounds.
MILESTONE_RATIO = 4.0      # decode tok/s against transformers bf16 eager, batch 1
GOAL_TOK_S = 250.0         # decode tok/s on the H200 with Qwen2.5-7B ...
GOAL_FRACTION = 0.90       # ... which is 90% of the bandwidth limit there
MEMORY_SLACK_BYTES = 0.5e9  # driver delta <= weights + KV pool + 0.5 GB
AGREEMENT_SLACK = 0.01     # ours vs fp32 >= transformers bf16 vs fp32 minus 1 point
# Issue 16's targets.
LONG_CONTEXT_TOK_S = 235.0  # decode at 8192 tokens of context
TTFT_512_MS = 12.0          # first request and warm
TTFT_4096_VS_SDPA = 0.8     # ours / transformers sdpa at 4096 tokens ...
TTFT_4096_MS = 100.0        # ... and at most this
BATCHED_FRACTION = 0.85     # batched decode against weights + KV read once per step
SAMPLED_VS_GREEDY = 0.97    # sampled decode (Qwen's settings) within 3 % of greedy's speed


def get(d, *keys):
    """d[k0][k1]...; None where any level is missing (a failed step leaves only its error)."""
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def agreement(ids, reference):
    """The fraction of positions where two top-1 id lists agree (over the shorter one's length)."""
    if not ids or not reference:
        return None
    n = min(len(ids), len(reference))
    return sum(1 for a, b in zip(ids[:n], reference[:n]) if a == b) / n


def bandwidth_limit_tok_s(copy_gb_s, weight_bytes):
    """Decode tokens/s if every weight byte is read once per token at the device's copy bandwidth."""
    return copy_gb_s * 1e9 / weight_bytes if copy_gb_s and weight_bytes else None


def kv_bytes_per_token(shapes, dtype_bytes=2):
    """K and V of one token over every layer (bf16): what a decode step reads per cached token."""
    keys = ("num_hidden_layers", "num_key_value_heads", "hidden_size", "num_attention_heads")
    if not shapes or any(shapes.get(k) in (None, 0) for k in keys):
        return None
    head_dim = shapes.get("head_dim") or shapes["hidden_size"] // shapes["num_attention_heads"]
    return 2 * shapes["num_hidden_layers"] * shapes["num_key_value_heads"] * head_dim * dtype_bytes


def step_bound_tok_s(copy_gb_s, weight_bytes, kv_token_bytes, batch, context):
    """Decode tokens/s of `batch` sequences at `context` cached tokens each if a step reads every weight
    byte and every sequence's K/V once at the copy bandwidth."""
    if None in (copy_gb_s, weight_bytes, kv_token_bytes) or not copy_gb_s:
        return None
    return batch * copy_gb_s * 1e9 / (weight_bytes + batch * kv_token_bytes * context)


def common_prefix(a, b):
    n = 0
    for x, y in zip(a or [], b or []):
        if x != y:
            break
        n += 1
    return n


def bench_run(report, step, batch):
    """The `flashport bench engine` result of one batch size from a step's report, or None."""
    for run in get(report, "steps", step, "report", "runs") or []:
        if run.get("batch") == batch:
            return run
    return None


def memory_check(driver_peak_delta, weight_bytes, kv_bytes):
    """(bound, within) for the issue's memory criterion; (None, None) without the figures."""
    if None in (driver_peak_delta, weight_bytes, kv_bytes):
        return None, None
    bound = weight_bytes + kv_bytes + MEMORY_SLACK_BYTES
    return bound, driver_peak_delta <= bound


def summarize(report, batches=(8, 32, 64)):
    """Headline figures and checks from the steps."""
    s = {}
    shapes = report.get("shapes") or {}
    copy_gb_s, weights = get(report, "steps", "copy", "gb_per_s"), shapes.get("weight_bytes")
    kv_token = kv_bytes_per_token(shapes)
    prompt_len, new_tokens = report.get("prompt_len") or 0, report.get("new_tokens") or 0
    gen = get(report, "steps", "ours_generate", "figures")
    s["limit_tok_s"] = get(report, "steps", "copy", "limit_tok_s")
    s["decode_tok_s"] = {
        "ours": get(gen, "decode_tok_s"),
        "ours_bench_b1": get(bench_run(report, "ours_batched", 1), "decode_tok_s"),
        "eager": get(report, "steps", "hf_eager", "decode_tok_s"),
        "sdpa": get(report, "steps", "hf_sdpa", "decode_tok_s"),
    }
    d = s["decode_tok_s"]
    s["ratio_vs_eager"] = ratio(d["ours"], d["eager"])
    s["ratio_vs_sdpa"] = ratio(d["ours"], d["sdpa"])
    s["fraction_of_limit"] = {k: ratio(v, s["limit_tok_s"]) for k, v in d.items()}
    s["goal_tok_s"] = GOAL_TOK_S
    s["milestone_met"] = None if s["ratio_vs_eager"] is None else s["ratio_vs_eager"] >= MILESTONE_RATIO
    s["goal_met"] = None if d["ours"] is None else d["ours"] >= GOAL_TOK_S
    s["ttft_ms"] = {
        "512": {"ours": get(bench_run(report, "ours_batched", 1), "ttft_ms"),
                "ours_generate": get(gen, "ttft_ms"),
                "eager": get(report, "steps", "hf_eager", "ttft_ms"),
                "sdpa": get(report, "steps", "hf_sdpa", "ttft_ms")},
        "4096": {"ours": get(bench_run(report, "ours_ttft_long", 1), "ttft_ms"),
                 "eager": get(report, "steps", "hf_eager", "ttft_long_ms"),
                 "sdpa": get(report, "steps", "hf_sdpa", "ttft_long_ms")},
    }
    t4 = s["ttft_ms"]["4096"]
    t4["target_met"] = (None if t4["ours"] is None or t4["sdpa"] is None
                        else t4["ours"] <= TTFT_4096_VS_SDPA * t4["sdpa"] and t4["ours"] <= TTFT_4096_MS)
    s["ttft_ms"]["16384"] = {"ours": get(bench_run(report, "ours_ttft_16k", 1), "ttft_ms")}
    t512 = [x for x in (s["ttft_ms"]["512"]["ours"], s["ttft_ms"]["512"]["ours_generate"]) if x is not None]
    s["ttft_ms"]["512"]["target_met"] = None if len(t512) < 2 else max(t512) <= TTFT_512_MS
    long_run = bench_run(report, "ours_long_context", 1)
    long_ctx = (get(report, "steps", "ours_long_context", "report", "prompt_len") or 0) + \
        (get(report, "steps", "ours_long_context", "report", "new_tokens") or 0) / 2
    s["long_context"] = {"context": long_ctx or None, "decode_tok_s": get(long_run, "decode_tok_s"),
                         "bound_tok_s": step_bound_tok_s(copy_gb_s, weights, kv_token, 1, long_ctx)}
    s["long_context"]["met"] = (None if s["long_context"]["decode_tok_s"] is None
                                else s["long_context"]["decode_tok_s"] >= LONG_CONTEXT_TOK_S)
    sampled = get(report, "steps", "ours_sampled", "figures", "decode_tok_s")
    s["sampled"] = {"decode_tok_s": sampled, "vs_greedy": ratio(sampled, get(gen, "decode_tok_s"))}
    s["sampled"]["met"] = None if s["sampled"]["vs_greedy"] is None else s["sampled"]["vs_greedy"] >= SAMPLED_VS_GREEDY
    # Batch-1 decode with one switch off, same run: what each part of the step is worth.
    s["switches"] = {name: get(bench_run(report, step, 1), "decode_tok_s")
                     for name, step in (("all on", "ours_batched"), ("no dependent launches", "ours_nopdl"),
                                        ("no decode graph", "ours_nograph"))}
    bound, within = memory_check(get(gen, "driver_peak_delta_bytes"), get(gen, "weight_bytes"),
                                 get(gen, "kv_cache_bytes"))
    s["memory"] = {"ours_driver_peak_delta_bytes": get(gen, "driver_peak_delta_bytes"),
                   "ours_tracked_peak_bytes": get(gen, "peak_memory_bytes"),
                   "ours_bound_bytes": bound, "ours_within_bound": within,
                   "eager_peak_allocated_bytes": get(report, "steps", "hf_eager", "peak_allocated_bytes"),
                   "sdpa_peak_allocated_bytes": get(report, "steps", "hf_sdpa", "peak_allocated_bytes")}
    s["batched"] = {}
    for b in batches:
        run = bench_run(report, "ours_batched", b)
        b_bound, b_within = memory_check(get(run, "driver_peak_delta_bytes"),
                                         get(report, "steps", "ours_batched", "report", "weight_bytes"),
                                         get(run, "kv_cache_bytes"))
        b_limit = step_bound_tok_s(copy_gb_s, weights, kv_token, b, prompt_len + new_tokens / 2)
        s["batched"][str(b)] = {"decode_tok_s": get(run, "decode_tok_s"), "round_ms_median": get(run, "round_ms_median"),
                                "bound_tok_s": b_limit, "fraction_of_bound": ratio(get(run, "decode_tok_s"), b_limit),
                                "step_ms_median": get(run, "step_ms_median"),
                                "driver_peak_delta_bytes": get(run, "driver_peak_delta_bytes"),
                                "bound_bytes": b_bound, "within_bound": b_within}
    fp32 = get(report, "steps", "agreement", "fp32_top1")
    s["agreement"] = {"positions": len(fp32) if fp32 else None,
                      "ours": agreement(get(report, "steps", "ours_top1", "top1_ids"), fp32),
                      "eager": agreement(get(report, "steps", "agreement", "bf16_eager_top1"), fp32),
                      "sdpa": agreement(get(report, "steps", "agreement", "bf16_sdpa_top1"), fp32)}
    a = s["agreement"]
    s["agreement"]["met"] = None if None in (a["ours"], a["eager"]) else a["ours"] >= a["eager"] - AGREEMENT_SLACK
    s["greedy_common_prefix_vs_eager"] = common_prefix(get(report, "steps", "ours_generate", "generated_ids"),
                                                       get(report, "steps", "hf_eager", "generated_ids"))
    s["errors"] = {name: step["error"] for name, step in (report.get("steps") or {}).items()
                   if isinstance(step, dict) and step.get("error")}
    return s


# ---- formatting ----

def brief(result, indent="   "):
    """A step's numbers for the log: its scalars (and those of a nested `figures`), one line, then one
    line per batch size of a `bench engine` report. Lists (ids) and the error's traceback are left out."""
    def scalars(d):
        return ", ".join("%s %s" % (k, ("%.4g" % v) if isinstance(v, float) else v) for k, v in d.items()
                         if isinstance(v, (int, float, str)) and k not in ("error", "command", "folder"))
    lines = [indent + scalars(dict(result, **(result.get("figures") or {})))]
    lines += [indent + "  " + scalars(run) for run in get(result, "report", "runs") or []]
    return "\n".join(line for line in lines if line.strip())


def num(x, fmt="%.1f"):
    return "n/a" if x is None else fmt % x


def pct(x):
    return "n/a" if x is None else "%.1f%%" % (100 * x)


def times(x):
    return "n/a" if x is None else "%.2f×" % x


def gb(x):
    return "n/a" if x is None else "%.2f GB" % (x / 1e9)


def verdict(ok):
    return "n/a" if ok is None else ("met" if ok else "NOT met")


def markdown(report, s):
    """engine.md: a header, the table (ours / transformers eager / sdpa / bandwidth limit), the checks."""
    shapes = report.get("shapes") or {}
    d, t, m, a = s["decode_tok_s"], s["ttft_ms"], s["memory"], s["agreement"]
    lines = [
        "# Engine vs transformers: %s" % (report.get("model_name") or "?"),
        "",
        "%s; torch %s, transformers %s; %s layers, hidden %s, %s heads / %s KV heads, vocab %s; weights %s; "
        "device copy %s GB/s (read + write)." % (
            report.get("gpu", "?"), report.get("torch", "?"), report.get("transformers", "?"),
            shapes.get("num_hidden_layers", "?"), shapes.get("hidden_size", "?"), shapes.get("num_attention_heads", "?"),
            shapes.get("num_key_value_heads", "?"), shapes.get("vocab_size", "?"), gb(shapes.get("weight_bytes")),
            num(get(report, "steps", "copy", "gb_per_s"), "%.0f")),
        "Batch 1, a %s-token random prompt, %s new tokens, greedy; TTFT is the median of %s after a warm-up."
        % (report.get("prompt_len", "?"), report.get("new_tokens", "?"), report.get("reps", "?")),
        "",
        "| | ours | transformers eager | transformers sdpa | bandwidth limit | ours vs eager | target |",
        "|---|---|---|---|---|---|---|",
        "| decode tok/s | %s | %s | %s | %s | %s | ≥ %.0f× eager (milestone); %.0f tok/s (goal) |" % (
            num(d["ours"]), num(d["eager"]), num(d["sdpa"]), num(s["limit_tok_s"]), times(s["ratio_vs_eager"]),
            MILESTONE_RATIO, GOAL_TOK_S),
        "| %% of bandwidth limit | %s | %s | %s | 100%% | | %.0f%% |" % (
            pct(s["fraction_of_limit"]["ours"]), pct(s["fraction_of_limit"]["eager"]),
            pct(s["fraction_of_limit"]["sdpa"]), 100 * GOAL_FRACTION),
    ]
    for n in ("512", "4096"):
        lines.append("| TTFT %s (ms) | %s | %s | %s | | %s | |" % (
            n, num(t[n]["ours"]), num(t[n]["eager"]), num(t[n]["sdpa"]), times(ratio(t[n]["eager"], t[n]["ours"]))))
    lines.append("| peak memory | %s driver (bound %s: %s) | %s allocated | %s allocated | | | ≤ weights + KV pool + 0.5 GB |" % (
        gb(m["ours_driver_peak_delta_bytes"]), gb(m["ours_bound_bytes"]), verdict(m["ours_within_bound"]),
        gb(m["eager_peak_allocated_bytes"]), gb(m["sdpa_peak_allocated_bytes"])))
    for b, r in s["batched"].items():
        lines.append("| decode tok/s, %s sequences | %s (%s ms a round, %s in step(); memory bound %s) | | | %s (%s) | | ≥ %.0f%% of the bound |" % (
            b, num(r["decode_tok_s"]), num(r["round_ms_median"], "%.2f"), num(r["step_ms_median"], "%.2f"),
            verdict(r["within_bound"]), num(r.get("bound_tok_s")), pct(r.get("fraction_of_bound")),
            100 * BATCHED_FRACTION))
    lc = s.get("long_context") or {}
    lines.append("| decode tok/s at %s tokens of context | %s | | | %s | | ≥ %.0f tok/s |" % (
        num(lc.get("context"), "%.0f"), num(lc.get("decode_tok_s")), num(lc.get("bound_tok_s")), LONG_CONTEXT_TOK_S))
    lines.append("| TTFT 16384 (ms) | %s | | | | | reported |" % num(get(t, "16384", "ours")))
    lines.append("| top-1 agreement with fp32 (%s positions) | %s | %s | %s | | | ≥ eager − 1 point |" % (
        a["positions"] if a["positions"] is not None else "?", pct(a["ours"]), pct(a["eager"]), pct(a["sdpa"])))
    lines += [
        "",
        "TTFT \"ours vs eager\" is transformers' time over ours. Ours at batch 1: decode %s tok/s from `generate`, "
        "%s from `bench engine`; TTFT 512 from `generate` (one run) %s ms." % (
            num(d["ours"]), num(d["ours_bench_b1"]), num(t["512"]["ours_generate"])),
        "",
        "- milestone (≥ %.0f× transformers eager): %s" % (MILESTONE_RATIO, verdict(s["milestone_met"])),
        "- goal (≥ %.0f tok/s): %s" % (GOAL_TOK_S, verdict(s["goal_met"])),
        "- memory (driver peak delta ≤ weights + KV pool + 0.5 GB): %s" % verdict(m["ours_within_bound"]),
        "- agreement (ours ≥ transformers bf16 eager − 1 point): %s" % verdict(a["met"]),
        "- TTFT 512 ≤ %.0f ms, first request and warm: %s" % (TTFT_512_MS, verdict(get(t, "512", "target_met"))),
        "- TTFT 4096 ≤ %.1f× sdpa's and ≤ %.0f ms: %s" % (TTFT_4096_VS_SDPA, TTFT_4096_MS,
                                                       verdict(get(t, "4096", "target_met"))),
        "- decode at long context ≥ %.0f tok/s: %s" % (LONG_CONTEXT_TOK_S, verdict(get(s, "long_context", "met"))),
        "- sampled decode (temperature 0.7, top-k 20, top-p 0.8, repetition penalty 1.05) %s tok/s, %s of "
        "greedy's (≥ %.0f%%): %s" % (num(get(s, "sampled", "decode_tok_s")), pct(get(s, "sampled", "vs_greedy")),
                                     100 * SAMPLED_VS_GREEDY, verdict(get(s, "sampled", "met"))),
        "- batch-1 decode with one switch off (same run): %s" % ", ".join(
            "%s %s tok/s" % (k, num(v)) for k, v in (s.get("switches") or {}).items()),
        "- greedy tokens equal to transformers eager's for the first %s of %s" % (
            s["greedy_common_prefix_vs_eager"], report.get("new_tokens", "?")),
    ]
    if s["errors"]:
        lines += ["", "Failed steps:"]
        lines += ["- %s: %s" % (name, err.strip().splitlines()[-1][:300] if err.strip() else "?")
                  for name, err in s["errors"].items()]
    return "\n".join(lines) + "\n"
