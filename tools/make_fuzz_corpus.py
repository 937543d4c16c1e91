#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (tests/fuzz/README.md), one folder per target:

  tests/fuzz/corpus/<target>/<seed>

derived from the committed fixtures in tests/data (and models/tiny-kjv): the valid files, the
broken-file corpora, and for each JSON input the three shapes of hostile file a fuzzer reaches
slowly on its own: 100 000-deep nesting (in a typed field, whose error message quotes the value,
and at the top), numbers past every integer and float range, and files cut short. Seeds stay small
(the deep ones are about 200 KB) so that scripts/fuzz.sh's -max_len of 1 MiB holds every one.
Plain Python, no dependencies; re-running rewrites the folders exactly:

    python3 tools/make_fuzz_corpus.py
"""
import json
import shutil
import struct
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
OUT = REPO / "tests" / "fuzz" / "corpus"
DEPTH = 100_000

# Values that fit no integer type or float (JSON text, not Python values).
HUGE_NUMBERS = ["1e400", "-1e400", "99999999999999999999", "-9223372036854775809", "18446744073709551616",
                "9223372036854775807", "1e-400", "-0"]


def deep(depth=DEPTH):
    return "[" * depth + "]" * depth


def compact(obj) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


RAW = "@@raw@@"


def with_raw(obj, raw_json: str) -> str:
    """obj serialised with its RAW string replaced by raw JSON text (deep or huge values Python can't hold)."""
    return compact(obj).replace(json.dumps(RAW), raw_json, 1)


def with_raw_field(obj: dict, key: str, raw_json: str) -> str:
    return with_raw({**obj, key: RAW}, raw_json)


def json_seeds(valid: dict, typed_fields: list) -> dict:
    """Deep, huge-number and truncated variants of a valid JSON object."""
    text = compact(valid)
    seeds = {
        "deep_top.json": deep(),
        "deep_unclosed.json": "{\"a\":" + "[" * DEPTH,
        "truncated_half.json": text[: len(text) // 2],
        "truncated_in_string.json": text[: text.index('"', 1) + 3],
    }
    for field in typed_fields[:2]:
        seeds[f"deep_{field}.json"] = with_raw_field(valid, field, deep())
    for i, number in enumerate(HUGE_NUMBERS):
        field = typed_fields[i % len(typed_fields)]
        seeds[f"huge_{field}_{i}.json"] = with_raw_field(valid, field, number)
    return seeds


def write(target: str, seeds: dict):
    folder = OUT / target
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for name, content in sorted(seeds.items()):
        (folder / name).write_bytes(content.encode() if isinstance(content, str) else content)
    print(f"{folder.relative_to(REPO)}: {len(seeds)} seeds, {sum(len(f.read_bytes()) for f in folder.iterdir())} bytes")


def fixture_files(pattern: str, prefix: str, root=DATA) -> dict:
    return {prefix + "_".join(p.relative_to(root).parts[-3:]): p.read_bytes() for p in sorted(root.glob(pattern))}


# ---- safetensors -----------------------------------------------------------------------------------

def safetensors(header: str, data: bytes = b"") -> bytes:
    raw = header.encode()
    raw += b" " * ((8 - len(raw) % 8) % 8)
    return struct.pack("<Q", len(raw)) + raw + data


def safetensors_seeds() -> dict:
    seeds = {p.name: p.read_bytes() for p in sorted((DATA / "safetensors" / "broken").glob("*.safetensors"))}
    # A valid file with the tiny Qwen fixture's first tensors (names and dtype), shrunk to 2x2.
    model = (DATA / "models" / "qwen2-tiny-bf16" / "model.safetensors").read_bytes()
    (n,) = struct.unpack("<Q", model[:8])
    fixture = json.loads(model[8 : 8 + n])
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name in [k for k in fixture if k != "__metadata__"][:3]:
        header[name] = {"dtype": fixture[name]["dtype"], "shape": [2, 2], "data_offsets": [offset, offset + 8]}
        offset += 8
    valid = safetensors(compact(header), bytes(range(offset)))
    seeds["valid_small.safetensors"] = valid
    seeds["truncated_header.safetensors"] = valid[: 8 + len(compact(header)) // 2]
    seeds["truncated_data.safetensors"] = valid[:-5]
    one = {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}
    for field in ("shape", "data_offsets"):
        seeds[f"deep_{field}.safetensors"] = safetensors(with_raw({"t": {**one, field: RAW}}, deep()), bytes(4))
    seeds["deep_metadata.safetensors"] = safetensors('{"__metadata__":' + deep() + ',"t":' + compact(one) + "}", bytes(4))
    seeds["deep_top.safetensors"] = safetensors(deep())
    for i, number in enumerate(HUGE_NUMBERS):
        field = ("shape", "data_offsets")[i % 2]
        value = f"[{number}]" if field == "shape" else f"[0,{number}]"
        seeds[f"huge_{field}_{i}.safetensors"] = safetensors(with_raw({"t": {**one, field: RAW}}, value), bytes(4))
    return seeds


# ---- config.json, generation_config.json --------------------------------------------------------

def config_seeds(file_name: str, typed_fields: list) -> dict:
    seeds = fixture_files(f"models/**/{file_name}", "")
    seeds.update(fixture_files(file_name, "tiny-kjv_", REPO / "models" / "tiny-kjv"))
    valid = json.loads((DATA / "models" / "qwen2-tiny-f32" / file_name).read_text())
    seeds.update(json_seeds(valid, typed_fields))
    return seeds


# ---- tokenizer.json, tokenizer_config.json, chat template ---------------------------------------

def tokenizer_seeds() -> dict:
    broken = DATA / "tokenizer" / "broken"
    seeds = {"tiny.json": (DATA / "tokenizer" / "tiny" / "tokenizer.json").read_bytes()}
    seeds.update({p.name: p.read_bytes() for p in sorted(broken.glob("*.json"))
                  if not p.name.startswith("config_") and p.name != "expected_errors.json"})
    tiny = json.loads(seeds["tiny.json"])
    seeds.update(json_seeds(tiny, ["decoder", "normalizer", "model", "added_tokens", "pre_tokenizer"]))
    # Nested Sequences, which the loader walks recursively (as deep as fits in a small seed).
    nested = '{"type":"Sequence","decoders":[' * 2000 + '{"type":"ByteLevel"}' + "]}" * 2000
    seeds["nested_sequence_decoders.json"] = with_raw_field(tiny, "decoder", nested)
    return seeds


def qwen3_config() -> dict:
    return json.loads((DATA / "tokenizer" / "qwen3" / "tokenizer_config.json").read_text())


def tokenizer_config_seeds() -> dict:
    broken = DATA / "tokenizer" / "broken"
    seeds = {p.name: p.read_bytes() for p in sorted(broken.glob("config_*.json"))}
    # Qwen3's config with the added tokens the tiny tokenizer has (ids from its tokenizer.json).
    tiny_ids = {t["content"]: t["id"] for t in json.loads((DATA / "tokenizer" / "tiny" / "tokenizer.json").read_text())["added_tokens"]}
    config = qwen3_config()
    config["added_tokens_decoder"] = {str(tiny_ids[t["content"]]): t for t in config["added_tokens_decoder"].values()
                                      if t["content"] in tiny_ids}
    seeds["qwen3_for_tiny.json"] = compact(config)
    seeds.update(json_seeds(config, ["added_tokens_decoder", "eos_token", "chat_template"]))
    seeds["huge_token_id_key.json"] = compact({**config, "added_tokens_decoder": {"99999999999999999999": {"content": "x"}}})
    return seeds


# A ChatML template with a default system message (the Qwen2 / Qwen2.5 behaviour), written for the corpus.
CHATML_WITH_DEFAULT_SYSTEM = (
    "{%- for message in messages %}{%- if loop.first and message.role != 'system' %}"
    "{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{%- endif %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")


def chat_input(flags: int, template: str, messages: list) -> bytes:
    """The fuzz_chat_template input format (see that file): flags byte, template, NUL-separated role/content."""
    fields = [template]
    for m in messages:
        content = m["content"] + ("\x1f" + m["reasoning_content"] if "reasoning_content" in m else "")
        fields += [m["role"], content]
    return bytes([flags]) + "\0".join(fields).encode()


def chat_seeds() -> dict:
    templates = {"qwen3": qwen3_config()["chat_template"], "chatml": CHATML_WITH_DEFAULT_SYSTEM}
    seeds = {}
    for case in json.loads((DATA / "tokenizer" / "chat_goldens.json").read_text())["cases"]:
        thinking = case["enable_thinking"]
        flags = int(case["add_generation_prompt"]) | (0 if thinking is None else 2 | 4 * int(thinking))
        seeds[f"qwen3_{case['name']}"] = chat_input(flags | 8, templates["qwen3"], case["messages"])
        seeds[f"chatml_{case['name']}"] = chat_input(flags, templates["chatml"], case["messages"])
    hello = [{"role": "user", "content": "Hello!"}]
    seeds["empty_template"] = chat_input(1, "", hello)
    seeds["not_chatml"] = chat_input(1, "{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}", hello)
    seeds["truncated_template"] = chat_input(9, templates["qwen3"][: len(templates["qwen3"]) // 2], hello)
    seeds["unknown_role"] = chat_input(9, templates["qwen3"], [{"role": "robot", "content": "Hi"}])
    seeds["no_messages"] = chat_input(9, templates["qwen3"], [])
    seeds["invalid_utf8_content"] = chat_input(9, templates["qwen3"], hello)[:-3] + b"\xff\xfe"
    return seeds


def encode_seeds() -> dict:
    seeds = {f"qwen3_ids_{c['name']}": c["text"] for c in json.loads((DATA / "tokenizer" / "qwen3_ids.json").read_text())}
    seeds["invalid_utf8"] = b"ab\xff\xc3(\xe2\x82"
    seeds["truncated_utf8"] = "你好".encode()[:-1]
    seeds["long_whitespace"] = " \n\t" * 30_000
    seeds["long_digits"] = "7" * 100_000
    seeds["special_runs"] = "<|im_start|><|im_end|><think>" * 1000 + "<|im_"
    return seeds


def openai_request_seeds() -> dict:
    """`flashport serve` request bodies: a first byte selecting chat (odd) or completion (even), then
    the body. Valid requests of both kinds, then json_seeds' deep, huge and truncated variants."""
    chat = {"model": "tiny", "messages": [{"role": "system", "content": "be brief"},
                                          {"role": "user", "content": [{"type": "text", "text": "hi"}]}],
            "max_completion_tokens": 3, "stream": True, "stream_options": {"include_usage": True},
            "logprobs": True, "top_logprobs": 2, "stop": ["\n", "."], "seed": 5, "temperature": 0.7,
            "top_p": 0.9, "top_k": 5, "min_p": 0.1}
    completion = {"prompt": "hello", "max_tokens": 4, "logprobs": 1, "n": 1}
    seeds = {"chat_full.json": b"\x01" + compact(chat).encode(),
             "completion_basic.json": b"\x00" + compact(completion).encode(),
             "completion_ids.json": b"\x00" + compact({"prompt": [1, 2, 3], "max_tokens": 2}).encode(),
             "chat_bad_types.json": b"\x01" + compact({"messages": "x", "max_tokens": -1}).encode(),
             "invalid_utf8.json": b"\x00" + b'{"prompt":"\xff\xfe"}'}
    for name, text in json_seeds(completion, ["max_tokens", "prompt", "logprobs"]).items():
        seeds["completion_" + name] = b"\x00" + text.encode()
    for name, text in json_seeds(chat, ["messages", "temperature", "top_logprobs"]).items():
        seeds["chat_" + name] = b"\x01" + text.encode()
    return seeds


def main():
    write("safetensors_header", safetensors_seeds())
    write("model_config", config_seeds("config.json",
                                       ["hidden_size", "rope_scaling", "layer_types", "num_attention_heads"]))
    write("generation_config", config_seeds("generation_config.json", ["eos_token_id", "temperature", "top_k"]))
    write("tokenizer_json", tokenizer_seeds())
    write("tokenizer_config", tokenizer_config_seeds())
    write("chat_template", chat_seeds())
    write("tokenizer_encode", encode_seeds())
    write("openai_request", openai_request_seeds())


if __name__ == "__main__":
    main()
