#!/usr/bin/env python3
"""Writes a random bfloat16 Hugging Face folder with a released Qwen model's shapes, for measuring
the CPU engine's speed on real sizes without downloading weights (the values are meaningless).

    /usr/bin/python3 tools/make_random_qwen.py --config tests/data/models/configs/qwen2.5-0.5b-instruct \
        --out /tmp/qwen2.5-0.5b-random [--seed 0]

Needs numpy (Debian's python3-numpy). Matrices and biases are N(0, 0.02²), norm weights 1, and every
value is drawn independently from one seeded generator (numpy's PCG64, in chunks of 4M values so
memory stays small; ~1 GB of Qwen2.5-0.5B takes seconds). Independent draws matter: a folder whose
values repeat (one block tiled) has embedding rows that repeat, so tokens tie and greedy decoding
follows rounding noise instead of testing anything. Not committed; the folder is ~1 GB for
Qwen2.5-0.5B.
"""
import argparse
import json
import shutil
import struct
import sys
from pathlib import Path

try:
    import numpy as np
except ImportError:
    sys.exit("make_random_qwen.py needs numpy: run it with /usr/bin/python3 (python3-numpy) or pip install numpy")

CHUNK = 1 << 22  # values drawn and written at a time (16 MB of fp32)


def write_bf16_normal(f, rng, std, n):
    """Writes n independent N(0, std²) values as little-endian bf16, rounded to nearest even."""
    for start in range(0, n, CHUNK):
        x = rng.standard_normal(min(CHUNK, n - start), dtype=np.float32) * np.float32(std)
        u = x.view(np.uint32)
        u = u + (np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1)))
        f.write((u >> np.uint32(16)).astype("<u2").tobytes())


def tensors(c):
    """(name, shape, kind) in transformers' order; kind is 'matrix', 'norm' or 'bias'."""
    h, inter, v = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    heads, kv = c["num_attention_heads"], c["num_key_value_heads"]
    hd = c.get("head_dim") or h // heads
    qwen3 = c["model_type"] == "qwen3"
    bias = not qwen3 or c.get("attention_bias", False)
    yield "model.embed_tokens.weight", [v, h], "matrix"
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        yield p + "input_layernorm.weight", [h], "norm"
        for n, rows in (("q", heads * hd), ("k", kv * hd), ("v", kv * hd)):
            yield p + f"self_attn.{n}_proj.weight", [rows, h], "matrix"
            if bias:
                yield p + f"self_attn.{n}_proj.bias", [rows], "bias"
        if qwen3:
            yield p + "self_attn.q_norm.weight", [hd], "norm"
            yield p + "self_attn.k_norm.weight", [hd], "norm"
        yield p + "self_attn.o_proj.weight", [h, heads * hd], "matrix"
        yield p + "post_attention_layernorm.weight", [h], "norm"
        yield p + "mlp.gate_proj.weight", [inter, h], "matrix"
        yield p + "mlp.up_proj.weight", [inter, h], "matrix"
        yield p + "mlp.down_proj.weight", [h, inter], "matrix"
    yield "model.norm.weight", [h], "norm"
    if not c.get("tie_word_embeddings", False):
        yield "lm_head.weight", [v, h], "matrix"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True, help="folder with config.json (and generation_config.json)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    src, out = Path(args.config), Path(args.out)
    config = json.loads((src / "config.json").read_text())
    out.mkdir(parents=True, exist_ok=True)
    for f in ("config.json", "generation_config.json"):
        if (src / f).exists():
            shutil.copy(src / f, out / f)

    rng = np.random.default_rng(args.seed)
    one = struct.pack("<H", 0x3F80)  # bf16 1.0

    entries, header, offset = list(tensors(config)), {}, 0
    for name, shape, _ in entries:
        n = 1
        for d in shape:
            n *= d
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + 2 * n]}
        offset += 2 * n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(out / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for name, shape, kind in entries:
            nbytes = header[name]["data_offsets"][1] - header[name]["data_offsets"][0]
            if kind == "norm":
                f.write(one * (nbytes // 2))
                continue
            write_bf16_normal(f, rng, 0.02, nbytes // 2)
    print(f"wrote {out / 'model.safetensors'}: {len(entries)} tensors, {offset / 1e9:.3f} GB")


if __name__ == "__main__":
    main()
