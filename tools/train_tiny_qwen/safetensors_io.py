"""A minimal safetensors writer and reader (Debian has no `safetensors` package).

The format (https://huggingface.co/docs/safetensors): an 8-byte little-endian header length N, then N
bytes of JSON mapping each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets
relative to the end of the header), plus an optional "__metadata__" of string values, then the raw
little-endian data. We pad the header with spaces to a multiple of 8 bytes, as the reference writer
does, so every tensor starts aligned (flashport memory-maps the file and reads the data in place).
"""
import json
import struct

import torch

_DTYPES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16"}
_FROM_NAME = {v: k for k, v in _DTYPES.items()}


def _raw_bytes(t):
    t = t.detach().contiguous().cpu()
    # numpy has no bfloat16: reinterpret 2-byte types as int16 to get at the bytes.
    if t.element_size() == 2:
        t = t.view(torch.int16)
    return t.numpy().tobytes()  # x86-64 and the arm64 we care about are little-endian


def save(tensors, path, metadata=None):
    """tensors: {name: torch.Tensor}. Written in name order, contiguous, no gaps."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name]
        if t.dtype not in _DTYPES:
            raise ValueError(f"{name}: dtype {t.dtype} is not one this writer supports")
        data = _raw_bytes(t)
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def load(path):
    """{name: torch.Tensor} (copies), for checking what was written."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = _FROM_NAME[info["dtype"]]
        buf = bytearray(raw[8 + n + begin:8 + n + end])
        t = torch.frombuffer(buf, dtype=torch.int16 if dtype != torch.float32 else torch.float32)
        out[name] = t.view(dtype).reshape(info["shape"]).clone()
    return out
