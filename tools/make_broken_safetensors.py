#!/usr/bin/env python3
"""Writes the corpus of deliberately broken safetensors files the engine's loader must refuse:

  tests/data/safetensors/broken/*.safetensors   one broken thing each
  tests/data/safetensors/broken/expected_errors.json
        file -> phrases its error message must contain (the file name is always checked too)

Each file breaks exactly one rule of the format (huggingface/safetensors: an 8-byte little-endian
header length N <= 100,000,000, N bytes of JSON, then data that the tensors tile exactly), so a
failing test points at one check. The files double as the seed corpus of the loader's fuzz target.
Plain Python, no dependencies:

    python3 tools/make_broken_safetensors.py
"""
import json
import struct
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "data" / "safetensors" / "broken"


def raw(header: bytes, data: bytes = b"", length=None) -> bytes:
    """8-byte length (the real one unless given), header bytes, data."""
    n = len(header) if length is None else length
    return struct.pack("<Q", n) + header + data


def st(header: dict, data: bytes) -> bytes:
    """A file from a header dict, serialised compactly (insertion order kept) and space-padded to 8."""
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return raw(text, data)


def t(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


F32x4 = bytes(16)  # four float32 zeros

CASES = {
    # --- the length prefix ---
    "empty_file": (b"", ["0 bytes", "8-byte header length"]),
    "too_short": (b"\x05\x00\x00", ["3 bytes", "8-byte header length"]),
    "header_len_huge": (raw(b"{}", length=1 << 63), ["9223372036854775808", "100,000,000"]),
    "header_len_over_limit": (raw(b"{}", length=100_000_001), ["100000001", "100,000,000"]),
    "header_len_past_eof": (raw(b"{}", length=64), ["header length 64", "past the end of the file"]),
    # --- the JSON ---
    "header_empty": (raw(b""), ["invalid JSON"]),
    "header_not_json": (raw(b"{\"a\": dtype}"), ["invalid JSON"]),
    "header_truncated_json": (raw(b"{\"w\":{\"dtype\":\"F32\",\"sha"), ["invalid JSON"]),
    "header_invalid_utf8": (raw(b"{\"w\xff\xfe\":{}}"), ["invalid JSON"]),
    "header_not_object": (raw(b"[1, 2, 3]"), ["must be a JSON object", "array"]),
    "header_nul_padding": (raw(b"{}\x00\x00\x00\x00\x00\x00"), ["invalid JSON"]),
    "duplicate_tensor_name": (
        raw(b'{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
            b'"w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}', F32x4),
        ["duplicate key \"w\"", "top-level object"]),
    "duplicate_field_in_entry": (
        raw(b'{"w":{"dtype":"F32","dtype":"I32","shape":[4],"data_offsets":[0,16]}}', F32x4),
        ["duplicate key \"dtype\"", "object \"w\""]),
    # --- __metadata__ ---
    "metadata_not_object": (st({"__metadata__": ["pt"], "w": t("F32", [4], 0, 16)}, F32x4),
                            ["__metadata__ must be an object", "array"]),
    "metadata_value_not_string": (st({"__metadata__": {"format": "pt", "step": 3}, "w": t("F32", [4], 0, 16)}, F32x4),
                                  ["__metadata__[\"step\"] must be a string", "integer"]),
    # --- one tensor entry ---
    "entry_not_object": (st({"w": 5}, b""), ["tensor 'w'", "expected an object"]),
    "missing_dtype": (st({"w": {"shape": [4], "data_offsets": [0, 16]}}, F32x4), ["tensor 'w'", "missing \"dtype\""]),
    "missing_shape": (st({"w": {"dtype": "F32", "data_offsets": [0, 16]}}, F32x4), ["tensor 'w'", "missing \"shape\""]),
    "missing_offsets": (st({"w": {"dtype": "F32", "shape": [4]}}, F32x4), ["tensor 'w'", "missing \"data_offsets\""]),
    "unknown_dtype": (st({"w": t("F128", [1], 0, 16)}, bytes(16)), ["tensor 'w'", "unknown dtype \"F128\""]),
    "dtype_lowercase": (st({"w": t("f32", [4], 0, 16)}, F32x4), ["tensor 'w'", "unknown dtype \"f32\""]),
    "dtype_not_string": (st({"w": t(7, [4], 0, 16)}, F32x4), ["tensor 'w'", "dtype must be a string"]),
    "shape_not_array": (st({"w": t("F32", 4, 0, 16)}, F32x4), ["tensor 'w'", "shape must be an array"]),
    "shape_negative": (st({"w": t("F32", [-4], 0, 16)}, F32x4), ["tensor 'w'", "negative"]),
    "shape_fraction": (st({"w": t("F32", [2.5], 0, 10)}, bytes(10)), ["tensor 'w'", "non-negative integer"]),
    "shape_overflow": (st({"w": t("F32", [1 << 32, 1 << 32, 1 << 32], 0, 16)}, F32x4),
                       ["tensor 'w'", "overflows 64 bits"]),
    "shape_bytes_overflow": (st({"w": t("F64", [1 << 31, 1 << 31], 0, 16)}, F32x4),
                             ["tensor 'w'", "overflows 64 bits"]),
    "sub_byte_partial": (st({"w": t("F4", [3], 0, 2)}, bytes(2)), ["tensor 'w'", "not a whole number of bytes"]),
    "offsets_not_pair": (st({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0]}}, F32x4),
                         ["tensor 'w'", "data_offsets must be [begin, end]"]),
    "offsets_negative": (st({"w": t("F32", [4], -16, 0)}, F32x4), ["tensor 'w'", "data_offsets[0] is negative"]),
    "offsets_beyond_u64": (raw(b'{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,1e30]}}', F32x4),
                           ["tensor 'w'", "data_offsets[1] must be a non-negative integer"]),
    "offsets_reversed": (st({"w": t("U8", [0], 16, 0)}, bytes(16)), ["tensor 'w'", "end before they begin"]),
    "size_mismatch": (st({"w": t("F32", [3], 0, 16)}, F32x4), ["tensor 'w'", "hold 16 bytes", "needs 12"]),
    # --- the data section as a whole ---
    "truncated_data": (st({"a": t("F32", [4], 0, 16), "b": t("F32", [4], 16, 32)}, bytes(20)),
                       ["tensor 'b'", "past the end of the data section (20 bytes)", "truncated"]),
    "overlap": (st({"a": t("F32", [4], 0, 16), "b": t("F32", [2], 8, 16)}, F32x4),
                ["tensor 'b'", "overlaps tensor 'a'"]),
    "same_range_twice": (st({"a": t("F32", [4], 0, 16), "b": t("F32", [4], 0, 16)}, F32x4),
                         ["overlaps tensor 'a'"]),
    "gap": (st({"a": t("F32", [2], 0, 8), "b": t("F32", [2], 12, 20)}, bytes(20)),
            ["4 unused bytes before tensor 'b'", "contiguously"]),
    "gap_at_start": (st({"a": t("F32", [2], 8, 16)}, F32x4), ["8 unused bytes before tensor 'a'"]),
    "trailing_bytes": (st({"a": t("F32", [4], 0, 16)}, F32x4 + bytes(4)),
                       ["4 bytes after the last tensor 'a'"]),
    "data_without_tensors": (st({"__metadata__": {"format": "pt"}}, bytes(8)), ["lists no tensors", "8 bytes of data"]),
}


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.glob("*.safetensors"):
        old.unlink()
    expected = {}
    for name, (content, phrases) in CASES.items():
        fname = f"{name}.safetensors"
        (OUT / fname).write_bytes(content)
        expected[fname] = phrases
    (OUT / "expected_errors.json").write_text(json.dumps(expected, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {len(CASES)} broken files to {OUT.relative_to(REPO)}")


if __name__ == "__main__":
    main()
