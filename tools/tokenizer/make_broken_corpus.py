#!/usr/bin/env python3
"""Writes the tokenizer test fixtures that need no real model:

  tests/data/tokenizer/tiny/tokenizer.json   a small valid byte-level BPE tokenizer in Qwen's layout
  tests/data/tokenizer/broken/*.json         deliberately broken variants of it (and of a config)
  tests/data/tokenizer/broken/expected_errors.json
                                             file -> a phrase its error message must contain

Each broken file breaks one thing, so a test failure points at one check. Files named config_*.json
are tokenizer_config.json files, loaded together with the valid tiny tokenizer.json.

    python3 tools/tokenizer/make_broken_corpus.py
"""
import copy
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "tests" / "data" / "tokenizer"

QWEN_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
              r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def bytes_to_unicode():
    """GPT-2's byte -> printable character table."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def tiny_tokenizer():
    table = bytes_to_unicode()
    vocab = {table[b]: b for b in range(256)}
    merges = [["Ġ", "t"], ["h", "e"], ["Ġt", "he"], ["l", "l"], ["e", "ll"], ["h", "ell"], ["hell", "o"],
              ["Ġ", "Ġ"], ["ĠĠ", "ĠĠ"], ["Ċ", "Ċ"]]
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    added = []
    for i, content in enumerate(["<|endoftext|>", "<|im_start|>", "<|im_end|>"]):
        added.append({"id": len(vocab) + i, "content": content, "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": True})
    added.append({"id": len(vocab) + 3, "content": "<think>", "single_word": False, "lstrip": False,
                  "rstrip": False, "normalized": False, "special": False})
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN_REGEX}, "behavior": "Isolated", "invert": False}, byte_level]},
        "post_processor": byte_level, "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }


def broken_variants(base):
    """name -> (file bytes, phrase the error must contain)."""
    text = json.dumps(base, ensure_ascii=False).encode()
    out = {
        "empty.json": (b"", "invalid JSON"),
        "truncated.json": (text[: len(text) // 2], "invalid JSON"),
        "not_an_object.json": (b"[1, 2, 3]", "must be a JSON object"),
        "invalid_utf8.json": (text.replace(b'"<think>"', b'"<th\xffnk>"'), "invalid JSON"),
    }

    def variant(name, phrase, edit):
        t = copy.deepcopy(base)
        edit(t)
        out[name] = (json.dumps(t, ensure_ascii=False, indent=1).encode(), phrase)

    variant("missing_model.json", 'no "model"', lambda t: t.pop("model"))
    variant("model_not_object.json", "model must be a JSON object", lambda t: t.update(model="BPE"))
    variant("unknown_model_type.json", 'model type "WordPiece" is not supported', lambda t: t["model"].update(type="WordPiece"))
    variant("missing_vocab.json", 'has no "vocab"', lambda t: t["model"].pop("vocab"))
    variant("vocab_wrong_type.json", "model.vocab must be a JSON object", lambda t: t["model"].update(vocab=["a", "b"]))
    variant("vocab_id_string.json", "must be a non-negative integer id", lambda t: t["model"]["vocab"].update(a="97"))
    variant("vocab_negative_id.json", "must be a non-negative integer id", lambda t: t["model"]["vocab"].update(a=-1))
    variant("vocab_duplicate_id.json", "gives id 97 to two tokens", lambda t: t["model"]["vocab"].update(b=97))
    variant("vocab_sparse_ids.json", "too sparse", lambda t: t["model"]["vocab"].update({"Ġthe": 2000000000}))
    variant("missing_merges.json", 'has no "merges"', lambda t: t["model"].pop("merges"))
    variant("merges_not_array.json", "model.merges must be an array", lambda t: t["model"].update(merges={"a": "b"}))
    variant("merge_no_space.json", "must be two tokens separated by one space", lambda t: t["model"]["merges"].append("ab"))
    variant("merge_three_parts.json", "must be two tokens separated by one space", lambda t: t["model"]["merges"].append("a b c"))
    variant("merge_wrong_type.json", "model.merges[10] must be a string", lambda t: t["model"]["merges"].append(42))
    variant("merge_array_of_three.json", "array of another shape", lambda t: t["model"]["merges"].append(["a", "b", "c"]))
    variant("merge_unknown_token.json", 'token "xq" is not in the vocabulary', lambda t: t["model"]["merges"].append(["x", "q"]))
    variant("merge_unknown_part.json", 'token "zzz" is not in the vocabulary', lambda t: t["model"]["merges"].append("zzz y"))
    variant("dropout.json", "dropout is not supported", lambda t: t["model"].update(dropout=0.1))
    variant("byte_fallback.json", "byte_fallback is not supported", lambda t: t["model"].update(byte_fallback=True))
    variant("subword_prefix.json", "continuing_subword_prefix is not supported", lambda t: t["model"].update(continuing_subword_prefix="##"))
    variant("normalizer_unsupported.json", 'normalizer type "NFKC" is not supported', lambda t: t.update(normalizer={"type": "NFKC"}))
    variant("normalizer_in_sequence.json", 'normalizer type "Lowercase" is not supported',
            lambda t: t.update(normalizer={"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}]}))
    variant("normalizer_no_type.json", 'has no "type"', lambda t: t.update(normalizer={"kind": "NFC"}))
    variant("pretokenizer_null.json", "needs a ByteLevel pre-tokenizer", lambda t: t.update(pre_tokenizer=None))
    variant("pretokenizer_unsupported.json", 'pre-tokenizer type "Metaspace" is not supported',
            lambda t: t["pre_tokenizer"]["pretokenizers"].insert(0, {"type": "Metaspace", "replacement": "▁"}))
    variant("pretokenizer_no_bytelevel.json", "has no ByteLevel step", lambda t: t["pre_tokenizer"]["pretokenizers"].pop())
    variant("pretokenizer_after_bytelevel.json", "after ByteLevel is not supported",
            lambda t: t["pre_tokenizer"]["pretokenizers"].append(copy.deepcopy(t["pre_tokenizer"]["pretokenizers"][0])))
    variant("split_bad_regex.json", "does not compile in PCRE2",
            lambda t: t["pre_tokenizer"]["pretokenizers"][0].update(pattern={"Regex": "(unclosed[\\p{L}"}))
    variant("split_no_pattern.json", 'must have a "Regex" or a "String"',
            lambda t: t["pre_tokenizer"]["pretokenizers"][0].update(pattern={"Glob": "*"}))
    variant("split_behavior_removed.json", 'Split behavior "Removed" is not supported',
            lambda t: t["pre_tokenizer"]["pretokenizers"][0].update(behavior="Removed"))
    variant("split_invert.json", "invert true is not supported", lambda t: t["pre_tokenizer"]["pretokenizers"][0].update(invert=True))
    variant("bytelevel_prefix_space.json", "add_prefix_space true is not supported",
            lambda t: t["pre_tokenizer"]["pretokenizers"][1].update(add_prefix_space=True))
    variant("bytelevel_wrong_type.json", "use_regex must be true or false",
            lambda t: t["pre_tokenizer"]["pretokenizers"][1].update(use_regex="no"))
    variant("decoder_null.json", "needs the ByteLevel decoder", lambda t: t.update(decoder=None))
    variant("decoder_unsupported.json", 'decoder type "WordPiece" is not supported', lambda t: t.update(decoder={"type": "WordPiece"}))
    variant("post_processor_template.json", 'post-processor type "TemplateProcessing" is not supported',
            lambda t: t.update(post_processor={"type": "TemplateProcessing", "single": [], "pair": [], "special_tokens": {}}))
    variant("added_tokens_not_array.json", "added_tokens must be an array", lambda t: t.update(added_tokens={"a": 1}))
    variant("added_token_no_content.json", 'has no "content"', lambda t: t["added_tokens"][0].pop("content"))
    variant("added_token_empty.json", "content is empty", lambda t: t["added_tokens"][0].update(content=""))
    variant("added_token_lstrip.json", "lstrip true, which flashport does not implement", lambda t: t["added_tokens"][0].update(lstrip=True))
    variant("added_token_id_conflict.json", "is given twice",
            lambda t: t["added_tokens"].append(dict(t["added_tokens"][0], content="<|other|>")))
    variant("added_token_bad_id.json", "must be a non-negative integer", lambda t: t["added_tokens"][0].update(id="x"))

    cfg = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "bos_token": None,
           "chat_template": "{{ '<|im_start|>' }}{{ '<|im_end|>' }}"}

    def config(name, phrase, edit):
        c = copy.deepcopy(cfg)
        edit(c)
        out[name] = (json.dumps(c, indent=1).encode(), phrase)

    config("config_eos_not_a_token.json", 'eos_token "</s>" is not a token', lambda c: c.update(eos_token="</s>"))
    config("config_eos_wrong_type.json", "eos_token must be a string or an object", lambda c: c.update(eos_token=5))
    config("config_template_wrong_type.json", "chat_template must be a string or a list", lambda c: c.update(chat_template=7))
    config("config_decoder_bad_key.json", 'key "abc" must be a token id',
           lambda c: c.update(added_tokens_decoder={"abc": {"content": "<x>", "special": True}}))
    config("config_decoder_conflict.json", "is given twice",
           lambda c: c.update(added_tokens_decoder={"266": {"content": "<|not_eot|>", "special": True}}))
    out["config_truncated.json"] = (json.dumps(cfg).encode()[:20], "tokenizer_config.json: invalid JSON")
    return out


def main():
    base = tiny_tokenizer()
    (OUT / "tiny").mkdir(parents=True, exist_ok=True)
    (OUT / "tiny" / "tokenizer.json").write_text(json.dumps(base, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    broken = OUT / "broken"
    broken.mkdir(parents=True, exist_ok=True)
    for old in broken.glob("*.json"):
        old.unlink()
    expected = {}
    for name, (data, phrase) in sorted(broken_variants(base).items()):
        (broken / name).write_bytes(data)
        expected[name] = phrase
    (broken / "expected_errors.json").write_text(json.dumps(expected, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote tiny/tokenizer.json and {len(expected)} broken files")


if __name__ == "__main__":
    main()
