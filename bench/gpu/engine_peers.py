#!/usr/bin/env python3
"""flashport's GPU engine beside transformers on a Qwen2.5-7B-shaped random bf16 folder (issue 5), in
one run of a few minutes on the device machine (PyTorch + transformers there, nothing downloaded):

  1. create   the folder: transformers builds the model from config.json straight on the GPU in bf16
              (fixed seed) and saves it as safetensors; the engine needs no tokenizer (ids only).
  2. copy     device-to-device copy bandwidth -> the bandwidth limit in tok/s (every weight byte read
              once per token).
  3. hf_eager transformers bf16, attn_implementation "eager" (the issue's reference) and then
     hf_sdpa  "sdpa": decode tok/s at batch 1 (512-token prompt, 128 new tokens, greedy), TTFT for 512
              and 4096-token prompts, peak memory.
  4. agreement  teacher-forced top-1 ids over 512 positions of one sequence: bf16 (eager, sdpa), then
              fp32 — the same weights upcast in place, which is what loading the folder with
              dtype=float32 gives, without reading 30 GB back. Random weights give flat logits that
              flip under any bf16 reordering, so bf16 is compared with fp32, not with bf16.
  5. ours     each in its own process: `generate` (decode tok/s, TTFT, the driver's memory peak),
              `bench engine` at batch 1, 8 and 32 (TTFT 512 median, batched decode), `bench engine`
              with a 4096-token prompt (TTFT), `perplexity` (teacher-forced top-1 ids).

The transformers model built in step 1 serves steps 3-4 (no reload) and is freed before step 5, so our
processes have the GPU to themselves. Every step is guarded: a failing one records its error and the
others still run; engine.json is rewritten after each step, so a run cut short keeps what it measured.
Writes <out>/engine.json and <out>/engine.md and prints the table.

    python3 bench/gpu/engine_peers.py --flashport build/h200/bin/flashport --out out [--quick]
"""
import argparse
import gc
import json
import os
import shutil
import statistics
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import engine_ours  # noqa: E402
import engine_report  # noqa: E402

# Nothing can be downloaded on the device machine: fail fast instead of waiting on the Hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
try:
    import torch
    import transformers
except ImportError:  # the development machine: --help works, the measurements need the device
    torch = transformers = None

CONFIGS = Path(__file__).resolve().parents[2] / "tests" / "data" / "models" / "configs"
DEFAULT_CONFIG = "qwen2.5-7b-instruct"
QUICK_CONFIG = "qwen2.5-0.5b-instruct"  # --quick: the same steps on a 1 GB model, for a smoke run

PROMPT_LEN, LONG_PROMPT_LEN, NEW_TOKENS = 512, 4096, 128
BATCHES = [1, 8, 32, 64]
LONG_CONTEXT, LONGEST_PROMPT = 8192, 16384  # decode at this context; TTFT of this prompt (ours only)
AGREEMENT_POSITIONS = 512
SEED = 0


def config_dir(name):
    """--config: a folder with config.json, a config.json path, or a folder name under the configs."""
    p = Path(name)
    if p.name == "config.json":
        p = p.parent
    if not p.exists() and (CONFIGS / name).exists():
        p = CONFIGS / name
    if not (p / "config.json").is_file():
        raise SystemExit("engine_peers: no config.json in %s" % p)
    return p


def sync_time(fn):
    """Seconds of fn() with the GPU idle before and drained after; returns (seconds, result)."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0, out


def free_cuda():
    gc.collect()
    torch.cuda.empty_cache()


def random_ids(n, vocab, seed):
    """Seeded token ids in the vocabulary, as a [1, n] tensor on the GPU."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (1, n), generator=g).cuda()


def set_attention(model, impl):
    """Switches the attention implementation of a built model; returns the one in effect. transformers
    >= 4.5x has set_attn_implementation; before, the layers read config._attn_implementation at call."""
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(impl)
    else:
        model.config._attn_implementation = impl
    return getattr(model.config, "_attn_implementation", impl)


# ---- 1. the random folder ----

def create_folder(config_path, folder, seed, state):
    """Builds the model on the GPU in bf16 from config.json with transformers' own initialisation
    (N(0, initializer_range²) matrices, unit norms, zero biases), saves it, keeps it in state["model"]."""
    from transformers import AutoConfig, AutoModelForCausalLM
    config = AutoConfig.from_pretrained(str(config_path))
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    # The default dtype, not model.to(bfloat16): .to() would also round the rotary inv_freq buffer,
    # which transformers keeps in fp32 (as does from_pretrained with a bf16 dtype).
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda"):
            try:
                model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
            except TypeError:  # a from_config without the keyword: the config carries the choice
                config._attn_implementation = "eager"
                model = AutoModelForCausalLM.from_config(config)
    finally:
        torch.set_default_dtype(previous)
    for p in model.parameters():  # should be none; a transformers that ignored the default dtype
        if p.dtype != torch.bfloat16:
            p.data = p.data.to(torch.bfloat16)
    model.eval()
    state["model"] = model

    # A model left at zeros (an init that did not run) would make every figure meaningless.
    w = model.model.layers[0].mlp.gate_proj.weight
    init_std = w.float().std().item()
    if not (1e-4 < init_std < 1.0):
        raise RuntimeError("the weights look uninitialised: std %g of layer 0's gate_proj" % init_std)

    if folder.exists():
        shutil.rmtree(folder)
    t0 = time.perf_counter()
    try:
        model.save_pretrained(str(folder), safe_serialization=True)
    except (TypeError, ValueError):  # a transformers without the keyword: safetensors is its only format
        model.save_pretrained(str(folder))
    save_s = time.perf_counter() - t0
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise RuntimeError("save_pretrained wrote no *.safetensors into %s" % folder)
    params = {id(p): p for p in model.parameters()}.values()  # tied weights once
    embed = model.get_input_embeddings().weight
    return {"folder": str(folder), "files": [f.name for f in files], "file_bytes": sum(f.stat().st_size for f in files),
            "save_s": save_s, "init_std": init_std, "param_count": sum(p.numel() for p in params),
            "weight_bytes": sum(p.numel() * p.element_size() for p in params),
            "embedding_bytes": embed.numel() * embed.element_size()}


# ---- 2. copy bandwidth ----

def copy_bandwidth(reps=7, iters=10):
    """A 2 GiB device-to-device copy (far past the L2), back to back; bytes read + written over the
    median time, as the decode benchmark counts it."""
    x = torch.randn(1 << 30, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    nbytes = 2 * x.numel() * x.element_size()

    def copies():
        for _ in range(iters):
            y.copy_(x)

    copies()  # warm-up
    times = [sync_time(copies)[0] / iters for _ in range(reps)]
    x = y = None  # 4 GiB back before the next step
    free_cuda()
    return {"bytes_per_copy": nbytes, "median_ms": statistics.median(times) * 1e3,
            "gb_per_s": nbytes / statistics.median(times) / 1e9}


# ---- 3. transformers' speed ----

def hf_generate(model, ids, new_tokens):
    """Greedy generate, exactly new_tokens (min = max: EOS cannot end it early), no repetition penalty."""
    with torch.inference_mode():
        return model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                              min_new_tokens=new_tokens, do_sample=False, num_beams=1, repetition_penalty=1.0,
                              use_cache=True, pad_token_id=0)


def hf_ttft_runs(model, ids, reps):
    """Seconds of generate(ids, one token), reps times back to back (the caller warms up first)."""
    return [sync_time(lambda: hf_generate(model, ids, 1))[0] for _ in range(reps)]


def hf_speed(model, impl, prompt, long_prompt, new_tokens, reps):
    """TTFT = generate(1 token), median of reps after a warm-up. Decode tok/s = (new_tokens - 1) /
    (generate(new_tokens) - TTFT): the prefill subtracted, generate's per-step work kept. Peak memory
    from PyTorch's allocator over the 512-token runs (weights included), then over the 4096 ones."""
    r = {"attn_implementation": set_attention(model, impl)}
    hf_generate(model, prompt, 4)  # warm-up: kernels, cuBLAS handles, the cache classes
    torch.cuda.synchronize()
    r["weights_allocated_bytes"] = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    first = hf_ttft_runs(model, prompt, reps)
    full, out = [], None
    for _ in range(reps):
        t, out = sync_time(lambda: hf_generate(model, prompt, new_tokens))
        full.append(t)
    generated = out.shape[1] - prompt.shape[1]
    ttft, total = statistics.median(first), statistics.median(full)
    r.update(ttft_ms=ttft * 1e3, ttft_runs_ms=[t * 1e3 for t in first], total_ms=total * 1e3,
             total_runs_ms=[t * 1e3 for t in full], generated_tokens=generated,
             decode_tok_s=(generated - 1) / (total - ttft) if total > ttft else None,
             generated_ids=out[0, prompt.shape[1]:].tolist(),
             peak_allocated_bytes=torch.cuda.max_memory_allocated(), peak_reserved_bytes=torch.cuda.max_memory_reserved())
    del out
    free_cuda()
    torch.cuda.reset_peak_memory_stats()
    hf_generate(model, long_prompt, 1)  # the long prompt's own warm-up (other attention shapes)
    long = hf_ttft_runs(model, long_prompt, reps)
    r.update(ttft_long_ms=statistics.median(long) * 1e3, ttft_long_runs_ms=[t * 1e3 for t in long],
             long_peak_allocated_bytes=torch.cuda.max_memory_allocated())
    free_cuda()
    return r


# ---- 4. agreement ----

def teacher_forced_top1(model, ids, positions):
    """The argmax (first maximum, as ours) of the logits at the first `positions` positions."""
    with torch.inference_mode():
        logits = model(input_ids=ids, use_cache=False).logits
        top1 = logits[0, :positions].argmax(dim=-1).tolist()
    del logits
    free_cuda()
    return top1


def hf_agreement(model, ids, positions, impls, work):
    """bf16 top-1 for each attention implementation, then fp32 (in place: the same folder at fp32,
    without TF32) with eager attention. The fp32 ids are also saved to <work>/fp32_top1.json."""
    r = {}
    for impl in impls:
        set_attention(model, impl)
        r["bf16_%s_top1" % impl] = teacher_forced_top1(model, ids, positions)
    torch.set_float32_matmul_precision("highest")  # no TF32: the default, said explicitly
    model.float()
    set_attention(model, "eager")
    r["fp32_dtype"] = str(next(model.parameters()).dtype)
    r["fp32_top1"] = teacher_forced_top1(model, ids, positions)
    with open(work / "fp32_top1.json", "w") as f:
        json.dump(r["fp32_top1"], f)
    return r


# ---- the run ----

class Steps:
    """Runs each step guarded and rewrites engine.json after it (see the module docstring)."""

    def __init__(self, report, out):
        self.report, self.out, self.t0 = report, out, time.perf_counter()

    def run(self, name, fn, *args, **kwargs):
        print("== %s (%.0f s into the run)" % (name, time.perf_counter() - self.t0), flush=True)
        t0 = time.perf_counter()
        try:
            result = fn(*args, **kwargs) or {}
        except Exception as e:  # any failure: record it, keep going
            result = {"error": "%s: %s\n%s" % (type(e).__name__, e, traceback.format_exc()[-2500:])}
            print("   failed: %s: %s" % (type(e).__name__, str(e)[:500]), flush=True)
            if torch is not None and torch.cuda.is_available():
                free_cuda()
        result["step_s"] = round(time.perf_counter() - t0, 2)
        print(engine_report.brief(result), flush=True)
        self.report["steps"][name] = result
        self.save()
        return result

    def elapsed(self):
        return time.perf_counter() - self.t0

    def save(self):
        self.report["summary"] = engine_report.summarize(self.report, batches=[b for b in BATCHES if b > 1])
        self.report["wall_s"] = round(self.elapsed(), 1)
        with open(self.out / "engine.json", "w") as f:
            json.dump(self.report, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flashport", required=True, help="our CLI binary (build/h200/bin/flashport)")
    ap.add_argument("--out", default=os.environ.get("OUT", "out"), help="where engine.json and engine.md go")
    ap.add_argument("--work", default="/tmp/engine-bench", help="where the random folder is written")
    ap.add_argument("--config", default=None, help="config.json (or its folder, or a name under %s); default %s"
                    % (CONFIGS, DEFAULT_CONFIG))
    ap.add_argument("--quick", action="store_true", help="the %s shapes instead (a fast smoke run)" % QUICK_CONFIG)
    ap.add_argument("--reps", type=int, default=3, help="timed runs per TTFT / transformers decode figure (median)")
    ap.add_argument("--skip-sdpa", action="store_true", help="transformers eager only")
    ap.add_argument("--sdpa-after-s", type=float, default=300,
                    help="skip transformers sdpa when the run is already this many seconds old")
    args = ap.parse_args()
    if torch is None or not torch.cuda.is_available():
        raise SystemExit("engine_peers: needs PyTorch with a GPU and transformers (run it on the device machine)")

    cfg = config_dir(args.config or (QUICK_CONFIG if args.quick else DEFAULT_CONFIG))
    out, work = Path(args.out), Path(args.work)
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    folder = work / ("random-" + cfg.name)
    shapes = json.loads((cfg / "config.json").read_text())
    report = {"model_name": "random " + cfg.name, "config": str(cfg / "config.json"), "quick": args.quick,
              "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
              "transformers": transformers.__version__, "prompt_len": PROMPT_LEN, "long_prompt_len": LONG_PROMPT_LEN,
              "new_tokens": NEW_TOKENS, "batches": BATCHES, "reps": args.reps, "seed": SEED,
              "agreement_positions": AGREEMENT_POSITIONS, "flashport": args.flashport,
              "shapes": {k: shapes.get(k) for k in ("model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
                                                    "num_attention_heads", "num_key_value_heads", "vocab_size",
                                                    "max_position_embeddings", "tie_word_embeddings")},
              "transformers_calls": {
                  "decode": "model.generate(ids, max_new_tokens=N, min_new_tokens=N, do_sample=False), N = %d and 1"
                            % NEW_TOKENS,
                  "top1": "model(ids).logits[0, :%d].argmax(-1)" % AGREEMENT_POSITIONS},
              "steps": {}}
    steps = Steps(report, out)
    state = {}
    vocab = shapes["vocab_size"]
    prompt = random_ids(PROMPT_LEN, vocab, SEED)
    long_prompt = random_ids(LONG_PROMPT_LEN, vocab, SEED + 1)
    scored = random_ids(AGREEMENT_POSITIONS + 1, vocab, SEED + 2)  # position t predicts t + 1

    created = steps.run("create", create_folder, cfg, folder, SEED, state)
    if "weight_bytes" in created:
        report["shapes"]["weight_bytes"] = created["weight_bytes"]
        report["shapes"]["embedding_bytes"] = created["embedding_bytes"]
    copy = steps.run("copy", copy_bandwidth)
    if "gb_per_s" in copy:
        copy["limit_tok_s"] = engine_report.bandwidth_limit_tok_s(copy["gb_per_s"], created.get("weight_bytes"))
        steps.save()

    model = state.pop("model", None)
    impls = ["eager"]
    if model is not None:
        steps.run("hf_eager", hf_speed, model, "eager", prompt, long_prompt, NEW_TOKENS, args.reps)
        if args.skip_sdpa or steps.elapsed() > args.sdpa_after_s:
            report["steps"]["hf_sdpa"] = {"error": "skipped (--skip-sdpa, or the run was past --sdpa-after-s)"}
        else:
            steps.run("hf_sdpa", hf_speed, model, "sdpa", prompt, long_prompt, NEW_TOKENS, args.reps)
            impls.append("sdpa")
        steps.run("agreement", hf_agreement, model, scored, AGREEMENT_POSITIONS, impls, work)
    del model
    free_cuda()  # our processes get the GPU to themselves
    report["hf_memory_left_bytes"] = torch.cuda.memory_reserved()

    binary, ids = args.flashport, prompt[0].tolist()
    if folder.is_dir():
        steps.run("ours_generate", engine_ours.generate, binary, folder, ids, NEW_TOKENS)
        steps.run("ours_batched", engine_ours.bench_engine, binary, folder, BATCHES, PROMPT_LEN, NEW_TOKENS, args.reps)
        steps.run("ours_ttft_long", engine_ours.bench_engine, binary, folder, [1], LONG_PROMPT_LEN, 1, args.reps)
        steps.run("ours_top1", engine_ours.top1, binary, folder, scored[0].tolist(), work)
        steps.run("ours_sampled", engine_ours.generate, binary, folder, ids, NEW_TOKENS,
                  sampling=engine_ours.QWEN_SAMPLING)
        steps.run("ours_nopdl", engine_ours.bench_engine, binary, folder, [1], PROMPT_LEN, NEW_TOKENS, 1,
                  env={"FLASHPORT_GPU_PDL": "0"})
        steps.run("ours_nograph", engine_ours.bench_engine, binary, folder, [1], PROMPT_LEN, NEW_TOKENS, 1,
                  env={"FLASHPORT_DECODE_GRAPH": "0"})
        if shapes.get("max_position_embeddings", 0) > LONGEST_PROMPT:
            steps.run("ours_long_context", engine_ours.bench_engine, binary, folder, [1], LONG_CONTEXT, 64, 1)
            steps.run("ours_ttft_16k", engine_ours.bench_engine, binary, folder, [1], LONGEST_PROMPT, 1, 1)

    steps.save()
    table = engine_report.markdown(report, report["summary"])
    (out / "engine.md").write_text(table)
    print("\n" + table, flush=True)
    print("wrote %s and %s (%.0f s)" % (out / "engine.json", out / "engine.md", steps.elapsed()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
