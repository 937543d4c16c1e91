#!/usr/bin/env python3
"""Writes a random bfloat16 Hugging Face folder with a released Qwen model's shapes, for measuring
the CPU engine's speed on real sizes without downloading weights (the values are meaningless).

    python3 tools/make_random_qwen.py --config tests/data/models/configs/qwen2.5-0.5b-instruct \
        --out /tmp/qwen2.5-0.5b-random [--seed 0]

Standard library only (this machine has no numpy): a seeded 1 MiB block of N(0, 0.02²) bf16 values
is tiled through each matrix (so the file builds in seconds), norm weights are 1, biases small. The
tiling doesn't make decoding cheaper: every weight still has its own address and is read from
memory. Not committed; the folder is ~1 GB for Qwen2.5-0.5B.
"""
import argparse
import json
import random
import shutil
import struct
from pathlib import Path


def bf16_block(rng, std, n):
    """n bf16 values ~ N(0, std^2), rounded to nearest even, as little-endian bytes."""
    out = bytearray()
    for _ in range(n):
        u = struct.unpack("<I", struct.pack("<f", rng.gauss(0.0, std)))[0]
        u += 0x7FFF + ((u >> 16) & 1)
        out += struct.pack("<H", (u >> 16) & 0xFFFF)
    return bytes(out)


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

    rng = random.Random(args.seed)
    block = bf16_block(rng, 0.02, 1 << 19)  # 1 MiB
    small = bf16_block(rng, 0.02, 1 << 12)
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
            src_block = block if kind == "matrix" else small
            start = rng.randrange(0, len(src_block) // 2) * 2  # a different phase per tensor
            pattern = src_block[start:] + src_block[:start]
            full, rest = divmod(nbytes, len(pattern))
            f.write(pattern * full + pattern[:rest])
    print(f"wrote {out / 'model.safetensors'}: {len(entries)} tensors, {offset / 1e9:.3f} GB")


if __name__ == "__main__":
    main()
