#!/usr/bin/python3
"""Trains models/tiny-kjv: a tiny Qwen3-architecture model on the King James Bible, with its own
byte-level BPE tokenizer, written as a Hugging Face folder that `flashport generate` runs with no
download. See README.md beside this file for the why and the numbers.

    sudo apt-get install -y python3-torch python3-regex bible-kjv bible-kjv-text
    /usr/bin/python3 tools/train_tiny_qwen/train.py          # from the repository root

Steps: extract the text (kjv.py) -> train the BPE (bpe.py) -> tokenise -> train the model
(qwen3.py) on the CPU for a fixed wall-clock budget -> write the folder (weights in bfloat16, by
safetensors_io.py) -> compute reference logits and a greedy continuation with the saved weights,
for the C++ test tests/embedded/test_tiny_kjv.cpp.

Reproducibility: everything is seeded, but the learning-rate schedule runs on
progress = max(step / max_steps, elapsed / time_budget), so on a busy machine training stops early
(with the learning rate fully decayed) rather than overrunning its budget. Two runs on differently
loaded machines can therefore differ; each run records its step count and losses in
training_log.json.
"""
import argparse
import json
import math
import os
import platform
import random
import re
import sys
import time
from pathlib import Path

# Passive OpenMP waiting, set before torch loads libgomp: on a machine shared with builds, spinning
# workers wait for descheduled threads at every op; measured here at 230 tok/s spinning against
# 3100 tok/s passive (2 threads, 3.5M-parameter model).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bpe  # noqa: E402
import kjv  # noqa: E402
import safetensors_io  # noqa: E402
from qwen3 import Qwen3ForCausalLM, Qwen3Shape  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

# The prompt whose logits the C++ test compares, and the length of the greedy continuation it checks.
REFERENCE_PROMPT = "And God said, Let there be light: and there was light. And God saw the"
REFERENCE_GREEDY = 32


def log(*a):
    print(*a, flush=True)


def build_streams(books, tok, val_every):
    """Token streams for training and validation. Each verse is a line; books are separated by
    <|endoftext|> (so the model knows the EOS token, and generation can end). Every val_every-th
    verse goes to validation instead, spread over the whole Bible rather than one book."""
    eot = tok.specials["<|endoftext|>"]
    train, val, k = [], [], 0
    for _, verses in books:
        for v in verses:
            (val if k % val_every == val_every - 1 else train).extend(tok.encode(v + "\n"))
            k += 1
        train.append(eot)
    return torch.tensor(train, dtype=torch.long), torch.tensor(val, dtype=torch.long)


def batches(stream, batch, ctx, gen):
    """Random windows of ctx + 1 tokens (input and shifted target)."""
    starts = torch.randint(0, len(stream) - ctx - 1, (batch,), generator=gen)
    x = torch.stack([stream[s:s + ctx + 1] for s in starts.tolist()])
    return x[:, :-1], x[:, 1:]


@torch.no_grad()
def evaluate(model, stream, ctx, windows=24):
    """Mean next-token loss (nats) over evenly spaced windows of the stream, in float32."""
    model.eval()
    step = max(1, (len(stream) - ctx - 1) // windows)
    losses = []
    for s in range(0, len(stream) - ctx - 1, step)[:windows]:
        x = stream[s:s + ctx + 1][None]
        losses.append(F.cross_entropy(model(x[:, :-1])[0], x[0, 1:]).item())
    model.train()
    return sum(losses) / len(losses)


def lr_at(progress, peak, warmup_frac, floor):
    if progress < warmup_frac:
        return peak * progress / warmup_frac
    p = (progress - warmup_frac) / (1 - warmup_frac)
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(p, 1.0))))


def train(model, train_stream, a):
    gen = torch.Generator().manual_seed(a.seed + 1)
    # Weight decay on the matrices only (not the norm weights), as is usual for transformers.
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, 0.95))
    history = []
    t0 = time.time()
    step, smoothed = 0, None
    while True:
        progress = max(step / a.max_steps, (time.time() - t0) / a.time_budget)
        if progress >= 1.0:
            break
        lr = lr_at(progress, a.lr, a.warmup, a.lr_floor)
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = batches(train_stream, a.batch, a.ctx, gen)
        # bfloat16 autocast roughly doubles CPU throughput (AVX-512 BF16); the master weights, the
        # norms, softmax and the loss stay in float32.
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(x)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        smoothed = loss.item() if smoothed is None else 0.95 * smoothed + 0.05 * loss.item()
        if step % a.log_every == 0:
            el = time.time() - t0
            rec = {"step": step, "elapsed_s": round(el, 1), "lr": round(lr, 6), "train_loss": round(smoothed, 4),
                   "tokens_seen": step * a.batch * a.ctx}
            log(f"step {step:5d}  {el:6.0f}s  lr {lr:.2e}  loss {smoothed:.3f}  "
                f"{rec['tokens_seen'] / el:.0f} tok/s")
            history.append(rec)
    elapsed = time.time() - t0
    return {"steps": step, "train_seconds": round(elapsed, 1), "tokens_seen": step * a.batch * a.ctx,
            "final_train_loss_smoothed": round(smoothed, 4), "history": history}


def export(model, tok, shape, out):
    """The Hugging Face folder. Weights are stored in bfloat16 (half the size); config.json says
    float32, so transformers (dtype="auto") and flashport both upcast them and compute in float32,
    exactly like the reference below."""
    out.mkdir(parents=True, exist_ok=True)
    tensors = {n: p.detach().to(torch.bfloat16) for n, p in model.state_dict().items()}
    safetensors_io.save(tensors, out / "model.safetensors", metadata={"format": "pt"})
    eot, im_end = tok.specials["<|endoftext|>"], tok.specials["<|im_end|>"]
    config = {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": eot,
        "eos_token_id": eot,
        "head_dim": shape.head_dim,
        "hidden_act": "silu",
        "hidden_size": shape.hidden_size,
        "initializer_range": 0.02,
        "intermediate_size": shape.intermediate_size,
        "max_position_embeddings": shape.max_position_embeddings,
        "max_window_layers": shape.num_hidden_layers,
        "num_attention_heads": shape.num_attention_heads,
        "num_hidden_layers": shape.num_hidden_layers,
        "num_key_value_heads": shape.num_key_value_heads,
        "rms_norm_eps": shape.rms_norm_eps,
        "rope_scaling": None,
        "rope_theta": shape.rope_theta,
        "sliding_window": None,
        "tie_word_embeddings": shape.tie_word_embeddings,
        "torch_dtype": "float32",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": shape.vocab_size,
    }
    generation = {
        "bos_token_id": eot,
        "eos_token_id": [eot, im_end],
        "pad_token_id": eot,
        "do_sample": True,
        # Sampling rather than greedy: a model this small loops under greedy decoding. These values
        # keep the text varied but on common words; a little repetition penalty breaks loops.
        "temperature": 0.8,
        "top_k": 40,
        "top_p": 0.95,
        "repetition_penalty": 1.1,
        "max_new_tokens": 128,
    }
    write_json(out / "config.json", config)
    write_json(out / "generation_config.json", generation)
    write_json(out / "tokenizer.json", tok.tokenizer_json(), compact=True)
    write_json(out / "tokenizer_config.json", tok.tokenizer_config_json(shape.max_position_embeddings))


def write_json(path, obj, compact=False):
    with open(path, "w", encoding="utf-8") as f:
        if compact:  # tokenizer.json: one vocab/merge per line would double its size for nothing
            json.dump(obj, f, ensure_ascii=False, separators=(",", ":"))
        else:
            json.dump(obj, f, ensure_ascii=False, indent=2)
        f.write("\n")


@torch.no_grad()
def reference(out, tok, shape, ref_out, books):
    """Reloads the saved bfloat16 weights into a float32 model (what the engine computes) and
    records the logits at every position of REFERENCE_PROMPT plus a greedy continuation, computed
    by full recomputation (no KV cache), and the words of the training text for the word test."""
    model = Qwen3ForCausalLM(shape)
    weights = {n: t.float() for n, t in safetensors_io.load(out / "model.safetensors").items()}
    model.load_state_dict(weights)
    model.eval()
    prompt = tok.encode(REFERENCE_PROMPT)
    logits = model(torch.tensor([prompt]))[0]
    ids = list(prompt)
    margins = []
    for _ in range(REFERENCE_GREEDY):
        row = model(torch.tensor([ids]))[0, -1]
        top2 = row.topk(2).values
        margins.append((top2[0] - top2[1]).item())
        ids.append(int(row.argmax()))
    top2 = logits.topk(2, dim=-1).values
    ref_out.mkdir(parents=True, exist_ok=True)
    logits.contiguous().numpy().astype("<f4").tofile(ref_out / "logits_f32.bin")
    write_json(ref_out / "reference.json", {
        "model": "models/tiny-kjv",
        "made_by": "tools/train_tiny_qwen/train.py (plain PyTorch Qwen3, float32, bf16 weights upcast)",
        "torch": torch.__version__,
        "prompt": REFERENCE_PROMPT,
        "prompt_ids": prompt,
        "logits_file": "logits_f32.bin",
        "logits_shape": [len(prompt), shape.vocab_size],
        "greedy_ids": ids[len(prompt):],
        "greedy_text": tok.decode(ids[len(prompt):]),
        "min_top2_margin_prompt": (top2[:, 0] - top2[:, 1]).min().item(),
        "min_top2_margin_greedy": min(margins),
    })
    # Lower-case words of the training text, for "are the generated words English?".
    words = sorted({w.lower() for _, vs in books for v in vs for w in re.findall(r"[A-Za-z]+", v)})
    (ref_out / "kjv_words.txt").write_text("\n".join(words) + "\n")
    return tok.decode(ids[len(prompt):])


@torch.no_grad()
def sample(model, tok, prompt, n, seed, temperature=0.8, top_k=40):
    gen = torch.Generator().manual_seed(seed)
    ids = tok.encode(prompt)
    for _ in range(n):
        row = model(torch.tensor([ids[-model.s.max_position_embeddings:]]))[0, -1] / temperature
        v, i = row.topk(top_k)
        ids.append(int(i[torch.multinomial(torch.softmax(v, -1), 1, generator=gen)]))
    return tok.decode(ids)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=REPO / "models" / "tiny-kjv")
    p.add_argument("--ref-out", type=Path, default=REPO / "tests" / "embedded" / "data")
    p.add_argument("--vocab", type=int, default=2048)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--intermediate", type=int, default=768)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--head-dim", type=int, default=32)
    p.add_argument("--ctx", type=int, default=256, help="training window = max_position_embeddings")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--lr-floor", type=float, default=0.1, help="final lr as a fraction of the peak")
    p.add_argument("--warmup", type=float, default=0.03, help="fraction of training")
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--max-steps", type=int, default=3000)
    p.add_argument("--time-budget", type=float, default=780, help="seconds of training, at most")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=25)
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    random.seed(a.seed)
    t_all = time.time()

    books = kjv.books()
    log(f"text: {len(books)} books, {sum(len(v) for _, v in books)} verses")
    val_every = 100
    # The BPE learns from the training verses only (the same split as build_streams).
    verses = [v for _, vs in books for v in vs]
    train_text = "".join(v + "\n" for k, v in enumerate(verses) if k % val_every != val_every - 1)
    t = time.time()
    tok = bpe.Tokenizer(bpe.train(train_text, a.vocab, log=log))
    log(f"bpe: vocab {tok.vocab_size} ({len(tok.merges)} merges) in {time.time() - t:.1f}s")
    train_stream, val_stream = build_streams(books, tok, val_every)
    log(f"tokens: train {len(train_stream)}, val {len(val_stream)} "
        f"({len(train_text) / len(train_stream):.2f} chars/token)")

    shape = Qwen3Shape(vocab_size=tok.vocab_size, hidden_size=a.hidden, intermediate_size=a.intermediate,
                       num_hidden_layers=a.layers, num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
                       head_dim=a.head_dim, max_position_embeddings=a.ctx)
    model = Qwen3ForCausalLM(shape)
    model.init_weights(torch.Generator().manual_seed(a.seed))
    log(f"model: {model.param_count()} parameters, {shape}")
    val_before = evaluate(model, val_stream, a.ctx)
    record = train(model, train_stream, a)
    val_after = evaluate(model, val_stream, a.ctx)
    log(f"trained {record['steps']} steps in {record['train_seconds']}s; val loss {val_before:.3f} -> {val_after:.3f}")

    export(model, tok, shape, a.out)
    greedy = reference(a.out, tok, shape, a.ref_out, books)
    samples = [sample(model, tok, pr, 48, seed=1) for pr in ("And God said", "In the beginning", "Jesus said unto")]
    for s in samples:
        log("sample:", repr(s))
    log("greedy after the reference prompt:", repr(greedy))

    sizes = {f.name: f.stat().st_size for f in sorted(a.out.iterdir()) if f.is_file()}
    write_json(a.out / "training_log.json", {
        "script": "tools/train_tiny_qwen/train.py",
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(a).items() if k not in ("out", "ref_out")},
        "machine": {"python": platform.python_version(), "torch": torch.__version__, "threads": a.threads,
                    "cpu": platform.processor() or platform.machine()},
        "parameters": model.param_count(),
        "train_tokens": len(train_stream),
        "val_tokens": len(val_stream),
        "val_loss_before": round(val_before, 4),
        "val_loss_after": round(val_after, 4),
        **record,
        "total_seconds": round(time.time() - t_all, 1),
        "samples_temperature_0.8_top_k_40": samples,
    })
    log("sizes:", sizes, "total", sum(sizes.values()))


if __name__ == "__main__":
    main()
