#!/usr/bin/env python3
"""Makes the tiny random-initialised Qwen2 and Qwen3 model folders the engine tests load, with
reference outputs computed by transformers. Runs on the device machine (PyTorch 2.11,
transformers 5.17, offline); the model is tiny, so the references are computed on its CPU, where
float32 is exact IEEE arithmetic (no TF32 matmuls) and the run is deterministic.

    python3 tools/make_qwen_fixtures.py --out OUT/fixtures

then unpack OUT/fixtures/* into tests/data/models/. Folders written:

  qwen2-tiny-f32/     Qwen2ForCausalLM, float32 weights, tied embeddings (like Qwen2.5-0.5B)
  qwen2-tiny-bf16/    the same weights rounded to bfloat16
  qwen3-tiny-f32/     Qwen3ForCausalLM, float32, untied lm_head, explicit head_dim != hidden/heads
  qwen3-tiny-bf16/    the same weights rounded to bfloat16
  qwen3-tiny-bf16-sharded/  qwen3-tiny-bf16 split into shards with model.safetensors.index.json

Each non-sharded folder is a Hugging Face folder (config.json as transformers 5.x writes it, so it
uses the new names rope_parameters and dtype; generation_config.json; model.safetensors) plus
reference/:

  reference.json      prompt ids, greedy continuation ids, logits file names and shapes, margins
  logits_f32.bin      raw little-endian float32 [prompt_len, vocab]: transformers in float32 on
                      the folder's weights (bf16 weights are upcast exactly)
  logits_bf16run.bin  (bf16 folders) the logits of transformers run in bfloat16, stored as float32

Why the initialisation is not transformers' default: with std 0.02 the logits are nearly flat and
greedy decoding collapses into one repeated token, which hides bugs (a wrong position or a skipped
layer still "matches"). Weights are drawn with a larger std, biases are non-zero and norm weights
are 1 + noise, so that a dropped bias or an ignored norm weight changes the output. The script
tries a few (std, seed) pairs and keeps the first whose 64-token greedy continuation has many
distinct tokens and no near-tie between the top two logits.

The continuation ignores EOS (generation runs with eos_token_id unset), so it is always 64 tokens.
"""
import argparse
import json
import os
import random
import shutil
import sys
import time
import traceback
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import (  # noqa: E402
    GenerationConfig,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)

VOCAB = 512
BOS, EOS = 510, 511  # toy special ids; fixtures store token ids, no tokenizer is involved
PROMPT_LEN = 24
NEW_TOKENS = 64
WANT_DISTINCT = 40  # of 64 greedy tokens
WANT_MARGIN = 1e-2  # smallest top-1 minus top-2 logit along the references, so argmax is stable


def common():
    # A fresh dict each time: transformers normalises rope_parameters in place.
    return dict(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        hidden_act="silu",
        use_sliding_window=False,
        sliding_window=None,
        bos_token_id=BOS,
        eos_token_id=EOS,
        pad_token_id=None,
    )


MODELS = {
    # Qwen2: q/k/v biases, head_dim = hidden / heads = 16, tied lm_head.
    "qwen2": (Qwen2ForCausalLM, lambda: Qwen2Config(**common(), num_hidden_layers=2, max_window_layers=2,
                                                    tie_word_embeddings=True)),
    # Qwen3: q_norm/k_norm, head_dim 32 (so heads*head_dim = 128 != hidden 64), untied lm_head.
    "qwen3": (Qwen3ForCausalLM, lambda: Qwen3Config(**common(), num_hidden_layers=3, max_window_layers=3,
                                                    head_dim=32, attention_bias=False,
                                                    tie_word_embeddings=False)),
}

# What a released Qwen folder's generation_config.json holds (sampling defaults, a list of EOS ids),
# with the toy ids. Written by hand: GenerationConfig.save_pretrained refuses sampling fields when
# do_sample is false, and these are the fields the engine's parser reads.
GENERATION_CONFIG = {
    "bos_token_id": BOS,
    "pad_token_id": BOS,
    "eos_token_id": [EOS, BOS],
    "do_sample": True,
    "temperature": 0.7,
    "top_p": 0.8,
    "top_k": 20,
    "repetition_penalty": 1.05,
    "transformers_version": transformers.__version__,
}


def log(*parts):
    print(*parts, flush=True)


def init_weights(model, std, seed):
    """Larger-than-default random weights; see the module docstring for why."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g, dtype=torch.float32)
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * noise)
            else:  # matrices, embeddings and biases alike
                p.copy_(std * noise)
        if model.config.tie_word_embeddings:
            model.lm_head.weight.copy_(model.model.embed_tokens.weight)


@torch.no_grad()
def prompt_logits(model, prompt):
    out = model(input_ids=torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long))
    return out.logits[0].float()


def min_margin(logits):
    top2 = torch.topk(logits, 2, dim=-1).values
    return float((top2[..., 0] - top2[..., 1]).min())


@torch.no_grad()
def greedy_manual(model, prompt, n):
    """Greedy decoding by recomputing the whole sequence each step: no cache, nothing to go wrong."""
    ids, margins = list(prompt), []
    for _ in range(n):
        last = model(input_ids=torch.tensor([ids])).logits[0, -1].float()
        margins.append(min_margin(last))
        ids.append(int(torch.argmax(last)))
    return ids[len(prompt):], min(margins)


@torch.no_grad()
def greedy_generate(model, prompt, n):
    """transformers' own greedy generate (KV cache), with EOS unset so it never stops early."""
    # A clean generation config: from_pretrained loaded ours (do_sample true, EOS ids), and
    # generate() would merge those defaults into whatever we pass.
    model.generation_config = GenerationConfig(do_sample=False, eos_token_id=None, bos_token_id=None,
                                               pad_token_id=0)
    out = model.generate(input_ids=torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                         do_sample=False, max_new_tokens=n)
    return [int(t) for t in out[0, len(prompt):]]


def continuation(model, prompt):
    manual, margin = greedy_manual(model, prompt, NEW_TOKENS)
    try:
        gen = greedy_generate(model, prompt, NEW_TOKENS)
    except Exception as e:  # keep the fixture; say so in the reference
        log(f"  generate() failed ({type(e).__name__}: {e}); keeping the manual greedy loop")
        gen = None
    if gen is not None and gen != manual:
        # A shorter result means generate() stopped at an EOS it found in the model's config.
        log(f"  WARNING: generate() ({len(gen)} tokens) and the manual greedy loop differ: {gen} vs {manual}")
    return manual, gen, margin


def pick_init(arch, prompt):
    """The first (std, seed) whose float32 greedy continuation is varied and has no near-tie."""
    cls, make_config = MODELS[arch]
    best = None
    for std in (0.5, 0.35, 0.7, 1.0):
        for seed in range(4):
            torch.manual_seed(seed)
            model = cls(make_config()).float().eval()
            init_weights(model, std, seed)
            ids, margin = greedy_manual(model, prompt, NEW_TOKENS)
            margin = min(margin, min_margin(prompt_logits(model, prompt)))
            distinct = len(set(ids))
            log(f"  {arch}: std {std} seed {seed}: {distinct} distinct of {NEW_TOKENS}, min margin {margin:.4f}")
            score = (distinct >= WANT_DISTINCT and margin >= WANT_MARGIN, distinct, margin)
            if best is None or score > best[0]:
                best = (score, std, seed, model)
            if score[0]:
                return best[1:]
    log(f"  {arch}: no candidate met both targets; keeping the best")
    return best[1:]


def write_logits(path, logits):
    arr = logits.detach().cpu().numpy().astype("<f4", copy=False)
    path.write_bytes(np.ascontiguousarray(arr).tobytes())
    return list(arr.shape)


def reference_entry(folder, model, prompt, name, file_name, compute_dtype):
    logits = prompt_logits(model, prompt)
    shape = write_logits(folder / "reference" / file_name, logits)
    ids, gen, margin = continuation(model, prompt)
    entry = {
        "name": name,
        "compute_dtype": compute_dtype,
        "logits_file": file_name,
        "logits_dtype": "float32 little-endian, row-major",
        "logits_shape": shape,
        "greedy_ids": ids,
        "greedy_distinct": len(set(ids)),
        "greedy_from": "manual greedy loop (full recompute each step)",
        "generate_matches_manual": None if gen is None else gen == ids[:len(gen)],
        "generate_len": None if gen is None else len(gen),
        "min_top2_margin_prompt": min_margin(logits),
        "min_top2_margin_greedy": margin,
    }
    log(f"  {folder.name} [{name}]: {entry['greedy_distinct']} distinct greedy tokens; generate matches: "
        f"{entry['generate_matches_manual']}; margins prompt {entry['min_top2_margin_prompt']:.4f} "
        f"greedy {margin:.4f}")
    return entry


def load(cls, folder, dtype):
    return cls.from_pretrained(str(folder), dtype=dtype).eval()


def save_folder(model, folder, dtype):
    folder.mkdir(parents=True, exist_ok=True)
    model.to(dtype).save_pretrained(str(folder))
    (folder / "generation_config.json").write_text(json.dumps(GENERATION_CONFIG, indent=2) + "\n")
    (folder / "reference").mkdir(exist_ok=True)


def shard_folder(model_bf16, src, dst):
    """A sharded copy of src: transformers' own sharding if it splits this small model, else by hand."""
    if dst.exists():
        shutil.rmtree(dst)
    try:
        model_bf16.save_pretrained(str(dst), max_shard_size="150KB")
    except Exception as e:
        log(f"  save_pretrained(max_shard_size) failed ({type(e).__name__}: {e}); sharding by hand")
    if not (dst / "model.safetensors.index.json").exists():
        from safetensors.torch import load_file, save_file
        if dst.exists():
            shutil.rmtree(dst)
        dst.mkdir(parents=True)
        tensors = load_file(str(src / "model.safetensors"))
        names = sorted(tensors)
        parts = [names[i::3] for i in range(3)]
        weight_map, total = {}, 0
        for i, part in enumerate(parts):
            fname = f"model-{i + 1:05d}-of-{len(parts):05d}.safetensors"
            save_file({k: tensors[k] for k in part}, str(dst / fname), metadata={"format": "pt"})
            for k in part:
                weight_map[k] = fname
                total += tensors[k].numel() * tensors[k].element_size()
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (dst / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    for f in ("config.json", "generation_config.json"):
        shutil.copy(src / f, dst / f)
    shards = sorted(p.name for p in dst.glob("*.safetensors"))
    log(f"  {dst.name}: {len(shards)} shards: {shards}")
    return shards


def build_arch(arch, out, prompt, manifest):
    cls, _ = MODELS[arch]
    log(f"{arch}: choosing the initialisation")
    std, seed, model = pick_init(arch, prompt)
    ref_state = {k: v.clone() for k, v in model.state_dict().items()}
    for suffix, dtype in (("f32", torch.float32), ("bf16", torch.bfloat16)):
        folder = out / f"{arch}-tiny-{suffix}"
        save_folder(model, folder, dtype)
        model = model.float()  # save_folder cast it; later saves start again from float32
        model.load_state_dict(ref_state)
        refs = []
        m32 = load(cls, folder, torch.float32)
        refs.append(reference_entry(folder, m32, prompt, "f32", "logits_f32.bin", "float32"))
        if dtype == torch.bfloat16:
            m16 = load(cls, folder, torch.bfloat16)
            refs.append(reference_entry(folder, m16, prompt, "bf16run", "logits_bf16run.bin", "bfloat16"))
            if arch == "qwen3":
                sharded = out / f"{arch}-tiny-{suffix}-sharded"
                shards = shard_folder(m16, folder, sharded)
                again = prompt_logits(load(cls, sharded, torch.float32), prompt)
                same = bool(torch.equal(again, prompt_logits(m32, prompt)))
                log(f"  {sharded.name}: float32 logits identical to {folder.name}: {same}")
                manifest["models"][sharded.name] = {"same_weights_as": folder.name, "shards": shards,
                                                    "logits_identical": same}
        reference = {
            "model": folder.name,
            "architecture": cls.__name__,
            "weights_dtype": str(dtype).replace("torch.", ""),
            "init": {"std": std, "seed": seed, "norm_weights": "1 + 0.2 * N(0, 1)", "biases": "std * N(0, 1)"},
            "prompt_ids": prompt,
            "new_tokens": NEW_TOKENS,
            "eos": "ignored: the continuation was generated with eos_token_id unset",
            "attn_implementation": getattr(m32.config, "_attn_implementation", None),
            "computed_on": "cpu",
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "references": refs,
        }
        (folder / "reference" / "reference.json").write_text(json.dumps(reference, indent=1) + "\n")
        manifest["models"][folder.name] = {"std": std, "seed": seed,
                                           "greedy_distinct": [r["greedy_distinct"] for r in refs]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    out = args.out
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    torch.set_num_threads(min(8, os.cpu_count() or 1))
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, numpy {np.__version__}")

    rng = random.Random(20250601)
    prompt = [rng.randrange(0, BOS - 1) for _ in range(PROMPT_LEN)]
    manifest = {
        "made_by": "tools/make_qwen_fixtures.py",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": "cpu",
        "prompt_ids": prompt,
        "models": {},
    }

    failed = []
    for arch in MODELS:
        # One architecture failing must not lose the other's fixtures: the device run is one shot.
        try:
            t0 = time.time()
            build_arch(arch, out, prompt, manifest)
            log(f"{arch}: done in {time.time() - t0:.1f} s")
        except Exception:
            traceback.print_exc()
            failed.append(arch)
            log(f"{arch}: FAILED")

    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    manifest["total_bytes"] = total
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    log(f"wrote {total} bytes under {out}")
    for p in sorted(out.rglob("*")):
        if p.is_file():
            log(f"  {p.relative_to(out)}  {p.stat().st_size}")
    log((out / "qwen3-tiny-f32" / "config.json").read_text())
    if failed:
        log(f"failed: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
