"""What the PyTorch tests share: the import guard, the float64 reference and the tolerances.

Import guard: without torch (or without the built extension) every test module skips, saying why;
under ctest (FLASHPORT_TORCH_REQUIRED=1, set by tests/python/CMakeLists.txt where the extension was
built) a failed import is an error instead, so a broken build cannot pass as "skipped".
"""
import math
import os

import pytest

_required = os.environ.get("FLASHPORT_TORCH_REQUIRED") == "1"
try:
    import torch
    import flashport
except ImportError as e:
    if _required:
        raise
    pytest.skip(f"flashport's PyTorch tests need torch and the built extension (scripts/build.sh --torch): {e}",
                allow_module_level=True)

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}

# Max |out - ref| allowed, relative to max(1, max |ref|). The reference sees the same rounded inputs
# (in float64), so what remains is fp32 accumulation and the output's rounding: one half-ulp of the
# output dtype (2^-11 fp16, 2^-8 bf16) with a factor 4 for the accumulated softmax error, and a small
# floor for fp32.
TOL = {torch.float32: 2e-5, torch.float16: 4 * 2.0**-11, torch.bfloat16: 4 * 2.0**-8}
# The LSE is fp32 in every dtype: its error is the fp32 sum's, relative to |lse| + 1.
LSE_TOL = 1e-5


def visible(q_len, kv_len, causal, window_left, top_left=False):
    """[q_len, kv_len] bool: which keys each query sees (flashport's rule: bottom-right diagonal,
    left window; top_left moves the diagonal to i)."""
    i = torch.arange(q_len)[:, None]
    j = torch.arange(kv_len)[None, :]
    diag = i if top_left else i + (kv_len - q_len)
    seen = torch.ones(q_len, kv_len, dtype=torch.bool)
    if causal:
        seen &= j <= diag
    if window_left is not None and window_left >= 0:
        seen &= j >= diag - window_left
    return seen


def reference(q, k, v, causal=False, scale=None, window_left=-1, top_left=False):
    """Plain softmax attention in float64 for bshd tensors: (out [b, s, h, d] float64, lse [b, h, s])."""
    q, k, v = q.double(), k.double(), v.double()
    rep = q.shape[2] // k.shape[2]
    k, v = k.repeat_interleave(rep, 2), v.repeat_interleave(rep, 2)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) * scale
    s = s.masked_fill(~visible(q.shape[1], k.shape[1], causal, window_left, top_left), float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.exp(s - lse[..., None]).nan_to_num(0.0)  # rows that see nothing: zeros (and lse -inf)
    return torch.einsum("bhqk,bkhd->bqhd", p, v), lse


def assert_close_to(out, ref, dtype):
    assert out.dtype == dtype
    assert not torch.isnan(out).any(), "NaN in the output"
    err = (out.double() - ref).abs().max().item() if out.numel() else 0.0
    bound = TOL[dtype] * max(1.0, ref.abs().max().item() if ref.numel() else 0.0)
    assert err <= bound, f"max error {err:.3g} > {bound:.3g} ({dtype})"


def assert_lse_close(lse, ref_lse):
    assert lse.dtype == torch.float32
    finite = torch.isfinite(ref_lse)
    assert torch.equal(torch.isfinite(lse), finite), "lse: -inf rows differ"
    assert torch.equal(lse[~finite], ref_lse[~finite].float()), "lse: rows without keys must be -inf"
    err = ((lse.double() - ref_lse)[finite].abs() / (ref_lse[finite].abs() + 1)).max().item() if finite.any() else 0
    assert err <= LSE_TOL, f"lse relative error {err:.3g}"


def randn(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype)


# Devices a test can run on: the CPU, and CUDA where torch has it and the extension serves it (the H200
# stage runs the same files there).
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() and "CUDA" in flashport.build_info() else [])
