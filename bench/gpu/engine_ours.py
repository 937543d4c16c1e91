"""Our side of the engine benchmark (bench/gpu/engine_peers.py): each measurement runs the flashport CLI
in its own process, so its memory figures start from nothing and no PyTorch allocation shares its
device memory, and reads the one JSON object the CLI prints with --json.

No torch here: tests/python runs these functions against the CPU build on the tiny fixture folders
(device "cpu"), so the command lines and the JSON keys they read are checked without a GPU.
"""
import json
import os
import subprocess
import time


def ids_arg(ids):
    return ",".join(str(int(i)) for i in ids)


def shown(cmd):
    """The command line for the report, with long id lists shortened to a count."""
    parts = []
    for a in map(str, cmd):
        if len(a) > 120 and a.replace(",", "").isdigit():
            parts.append("<%d ids>" % (a.count(",") + 1))
        else:
            parts.append(a if a and " " not in a else "'%s'" % a)
    return " ".join(parts)


def run_cli(cmd, timeout, env=None):
    """Runs `cmd` (with `env` added to the environment); returns (the JSON object on stdout's last
    line, wall seconds). A non-zero exit or no JSON raises RuntimeError carrying the CLI's own message
    (its last stderr lines)."""
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=dict(os.environ, **(env or {})))
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
        raise RuntimeError("%s: exit %d: %s" % (shown(cmd[:3]), r.returncode, " | ".join(tail)))
    lines = r.stdout.strip().splitlines()
    if not lines:
        raise RuntimeError("%s printed nothing" % shown(cmd[:3]))
    return json.loads(lines[-1]), wall


GREEDY = ["--temperature", "0", "--repetition-penalty", "1"]
# Qwen2.5-Instruct's generation_config.json: what a sampled chat runs.
QWEN_SAMPLING = ["--temperature", "0.7", "--top-k", "20", "--top-p", "0.8", "--repetition-penalty", "1.05",
                 "--seed", "1"]


def generate(binary, model, prompt_ids, new_tokens, device="gpu", timeout=600, sampling=None):
    """`flashport generate` at batch 1: greedy (temperature 0, no repetition penalty, whatever the
    folder's generation_config.json says) unless `sampling` gives other flags, EOS ignored, the KV
    pool sized up front to the request (so the memory bound's "allocated KV pool" is exactly what it
    needs). Returns its figures (TTFT, decode tok/s, tracked and driver memory) and the generated ids."""
    cmd = [binary, "generate", "--model", str(model), "--device", device, "--prompt-ids", ids_arg(prompt_ids),
           "--max-tokens", str(new_tokens), "--ignore-eos"] + (sampling or GREEDY) + \
          ["--ctx", str(len(prompt_ids) + new_tokens), "--json"]
    j, wall = run_cli(cmd, timeout)
    return {"command": shown(cmd), "wall_s": wall, "figures": j["figures"], "generated_ids": j["generated_ids"],
            "stop_reason": j["stop_reason"]}


def bench_engine(binary, model, batches, prompt_len, new_tokens, reps, device="gpu", seed=0, timeout=600, env=None):
    """`flashport bench engine`: per batch size, TTFT (median of `reps`), decode tok/s summed over the
    sequences, round times and memory. Its random prompts are its own (seeded), not the peers' ids:
    the timing does not depend on which ids they are. `env`: variables for the run (a switch off)."""
    cmd = [binary, "bench", "engine", "--model", str(model), "--device", device, "--batch", ",".join(map(str, batches)),
           "--prompt-len", str(prompt_len), "--new-tokens", str(new_tokens), "--reps", str(reps), "--seed", str(seed),
           "--json"]
    j, wall = run_cli(cmd, timeout, env)
    for run in j.get("runs", []):
        run.pop("seq0_prompt_ids", None)  # up to 4096 ids each: not worth keeping in engine.json
    return {"command": " ".join("%s=%s" % kv for kv in (env or {}).items()) + (" " if env else "") + shown(cmd),
            "wall_s": wall, "report": j}


def top1(binary, model, ids, work_dir, device="gpu", timeout=600):
    """`flashport perplexity` teacher-forced on `ids`: the top-1 id at every position but the last
    (position t predicts token t + 1), len(ids) - 1 of them."""
    os.makedirs(work_dir, exist_ok=True)
    path = os.path.join(str(work_dir), "top1_input_ids.json")
    with open(path, "w") as f:
        json.dump([int(i) for i in ids], f)
    cmd = [binary, "perplexity", "--model", str(model), "--device", device, "--ids-file", path, "--json"]
    j, wall = run_cli(cmd, timeout)
    return {"command": shown(cmd), "wall_s": wall, "top1_ids": j["top1_ids"], "perplexity": j["perplexity"],
            "tok_s": j["tok_s"]}
