"""Padding masks as per-row key spans, shared by the framework plug-ins.

flashport takes no mask tensor: causality and windows are arguments, and padding is handled by
narrowing each row's keys to the span its mask keeps. A key-validity mask [batch, kv_len] (True: the key
is real) whose True entries form one contiguous span [start, end) per row (left padding, right
padding, or none) becomes a list of (start, end); anything else raises ValueError.
"""
import torch


def spans_from_valid(valid):
    """valid: bool [batch, kv_len] (any device). Returns [(start, end)] per row, read on the host (one
    synchronisation); a row without keys gives (0, 0). Raises ValueError for holes inside a row."""
    valid = valid.to(device="cpu", dtype=torch.bool)
    kv_len = valid.shape[1]
    n = valid.sum(1)
    start = torch.where(n > 0, valid.to(torch.uint8).argmax(1), torch.zeros_like(n))
    pos = torch.arange(kv_len)[None, :]
    span = (pos >= start[:, None]) & (pos < (start + n)[:, None])
    if not torch.equal(span, valid):
        bad = (span != valid).any(1).nonzero()[0, 0].item()
        raise ValueError(f"flashport: row {bad} of the padding mask keeps keys that are not one contiguous span "
                         f"(left or right padding); flashport handles padding only by narrowing each row's keys")
    return [(s, s + c) for s, c in zip(start.tolist(), n.tolist())]


def is_full(spans, kv_len):
    return all(s == 0 and e == kv_len for s, e in spans)
