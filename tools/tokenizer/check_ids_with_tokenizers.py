#!/usr/bin/env python3
"""Cross-checks tests/data/tokenizer/qwen3_ids.json (made with the JS reference encoder) against
Hugging Face's own tokenizers library on the same tokenizer.json, so that the goldens flashport is
tested against are also those of the Rust implementation transformers uses. Offline; no GPU.

    python3 tools/tokenizer/check_ids_with_tokenizers.py [--out report.json]

Prints "N of N identical" and each difference; exits 1 if any entry differs.
"""
import argparse
import json
import sys
from pathlib import Path

import tokenizers

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "tokenizer"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    tok = tokenizers.Tokenizer.from_file(str(DATA / "qwen3" / "tokenizer.json"))
    entries = json.loads((DATA / "qwen3_ids.json").read_text(encoding="utf-8"))
    diffs = []
    for e in entries:
        ids = tok.encode(e["text"], add_special_tokens=False).ids
        if ids != e["ids"]:
            diffs.append({"name": e["name"], "tokenizers": ids, "reference": e["ids"]})
        decoded = tok.decode(ids, skip_special_tokens=False)
        if decoded != e.get("nfc", e["text"]):
            diffs.append({"name": e["name"], "decode": decoded})
    same = len(entries) - len({d["name"] for d in diffs})
    summary = f"{same} of {len(entries)} strings identical (tokenizers {tokenizers.__version__})"
    print(summary)
    for d in diffs:
        print(json.dumps(d, ensure_ascii=False))
    if args.out:
        args.out.write_text(json.dumps({"summary": summary, "diffs": diffs}, ensure_ascii=False, indent=1) + "\n")
    sys.exit(1 if diffs else 0)


if __name__ == "__main__":
    main()
