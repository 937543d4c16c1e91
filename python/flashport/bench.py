"""flashport.bench: the Stable Diffusion attention workload, flashport beside naive torch and SDPA.

    python3 -m flashport.bench sd [--device cpu|cuda] [--model sd15|sdxl|all]
                                  [--sizes 512,768,1024,1536,2048] [--dtype f16|bf16|f32]
                                  [--backends naive,sdpa-math,sdpa-efficient,sdpa-flash,sdpa-cudnn,flashport]
                                  [--out DIR] [--max-naive-gib G] [--repeats N] [--threads N]

It replays the attention calls of one denoising step of the SD 1.5 and SDXL UNets (the shapes are
derived from the architectures below, for a batch of 2: classifier-free guidance runs the
conditional and unconditional halves as one batch, as the web UIs do) and, for each model, image
size and backend, reports:
  - ms per step: the sum over the step's distinct attention shapes of (calls per step) x (median
    time of one call); CUDA events on a GPU, time.perf_counter on the CPU;
  - peak MiB: the most memory one attention call of the step adds on top of what was allocated
    before it (its inputs), i.e. the attention alone. GPU: torch.cuda.max_memory_allocated after
    reset_peak_memory_stats, minus memory_allocated before the call (torch's caching allocator;
    workspaces a library takes outside it are not seen). CPU: the process's resident-set high-water
    mark (VmHWM in /proc/self/status), reset to the current RSS (write "5" to /proc/self/clear_refs)
    just before the call, minus the RSS then; glibc's mmap threshold is pinned to 1 MiB and
    malloc_trim(0) runs first, so large buffers come from fresh pages and go back when freed. This
    counts every page the call touches (torch's tensors and any scratch of the library's own),
    at page granularity; it needs Linux.
and writes the table, sd_<device>_<dtype>.json and a plot of peak memory against resolution,
sd_<device>_<dtype>_memory.svg (log memory axis), under --out.

Backends: naive is diffusers' classic AttnProcessor: heads folded into the batch (a copy), baddbmm
into the full [batch*heads, q_len, kv_len] score matrix, softmax (a second matrix of that size), bmm.
sdpa-* is torch.nn.functional.scaled_dot_product_attention restricted to one backend (through
torch.nn.attention.sdpa_kernel on torch >= 2.3, torch.backends.cuda.sdp_kernel on 2.0 - 2.2; cudnn
needs the former) on [batch, heads, seq, dim] views of the same [batch, seq, heads, dim] tensors, as
diffusers' AttnProcessor2_0 passes them. flashport is flashport.attention(layout="bshd").
A backend that torch lacks is reported "unavailable"; one that refuses a shape, "rejected" with the
message; one that runs out of memory, "OOM" (the memory is freed and the run goes on). Naive and
sdpa-math hold the score and probability matrices together: a point where those would exceed
--max-naive-gib (default on the CPU: a quarter of physical RAM; on a GPU: no limit, the allocator's
OOM is the answer) is reported "skipped: would need X GiB" without allocating anything.
"""
import argparse
import contextlib
import ctypes
import gc
import json
import math
import os
import platform
import statistics
import sys
import time

import torch

import flashport

# ---------------------------------------------------------------------------------------------
# The workload: which attention calls one UNet step makes.
#
# Both UNets are diffusers' UNet2DConditionModel (configs of runwayml/stable-diffusion-v1-5 and
# stabilityai/stable-diffusion-xl-base-1.0; the same numbers as the original LDM / SGM yaml files).
# The latent is px/8 a side. Each resolution level i (side latent / 2^i) has a down block and, on
# the way back, an up block at the same resolution; every down block but the last halves the side.
# A cross-attention down block holds layers_per_block = 2 Transformer2DModels (one after each
# resnet), its up block layers_per_block + 1 = 3; the mid block 1, at the deepest level. Each
# Transformer2DModel holds `transformer_layers_per_block` BasicTransformerBlocks, and each of those
# makes two attention calls: attn1, self-attention over the level's side^2 tokens, and attn2,
# cross-attention from those tokens to the 77 text tokens (the text states, 768 or 2048 wide, are
# projected to the level's width by to_k/to_v, so the attention itself sees kv_len 77 with the
# level's heads and head dim). Heads and head dim:
#
# SD 1.5: block_out_channels (320, 640, 1280, 1280); down CrossAttn x3 + DownBlock2D (no attention
#   at level 3); up UpBlock2D (level 3) + CrossAttn x3 (levels 2, 1, 0); mid at level 3;
#   attention_head_dim 8 (in diffusers' naming this is the number of heads): 8 heads, head dim
#   channels / 8 = 40, 80, 160; mid 160. transformer_layers_per_block 1; cross-attention dim 768.
#   Per step: (2 down + 3 up) x 1 layer at levels 0-2 = 5 blocks each, + 1 mid = 16 blocks, 32 calls.
#   At 512 px (latent 64):   level 0  64x64 = 4096 tokens, 8 x 40:  5 self 4096x4096, 5 cross 4096x77
#                            level 1  32x32 = 1024 tokens, 8 x 80:  5 self 1024x1024, 5 cross 1024x77
#                            level 2  16x16 =  256 tokens, 8 x 160: 5 self  256x256,  5 cross  256x77
#                            mid       8x8  =   64 tokens, 8 x 160: 1 self   64x64,   1 cross   64x77
# SDXL: block_out_channels (320, 640, 1280); down DownBlock2D (no attention at level 0) +
#   CrossAttn x2; up CrossAttn x2 (levels 2, 1) + UpBlock2D; mid at level 2; attention_head_dim
#   (5, 10, 20) heads of 64 (num_head_channels 64); transformer_layers_per_block (1, 2, 10), the up
#   blocks reversed so each level keeps its depth, mid 10; cross-attention dim 2048.
#   Per step: level 1 (2 + 3) x 2 = 10 blocks, level 2 (2 + 3) x 10 = 50, mid 10: 70 blocks, 140 calls.
#   At 512 px (latent 64):   level 1  32x32 = 1024 tokens, 10 x 64: 10 self 1024x1024, 10 cross 1024x77
#                            level 2  16x16 =  256 tokens, 20 x 64: 60 self  256x256,  60 cross  256x77
#                            (the mid block is at level 2: its 10 blocks share level 2's shapes)
#   At 1024 px (latent 128), SDXL's native size: 10 self 4096x4096 (10 heads), 60 self 1024x1024 (20).
# Batch 2 throughout (classifier-free guidance).
# ---------------------------------------------------------------------------------------------

BATCH = 2
TEXT_TOKENS = 77


class Level:
    """One resolution level: its width, its heads (0: no attention there) and transformer depth."""

    def __init__(self, channels, heads, layers):
        self.channels, self.heads, self.layers = channels, heads, layers

    @property
    def head_dim(self):
        return self.channels // self.heads


MODELS = {
    "sd15": dict(title="SD 1.5", cross_dim=768, down_per_block=2, up_per_block=3,
                 levels=[Level(320, 8, 1), Level(640, 8, 1), Level(1280, 8, 1), Level(1280, 0, 0)],
                 mid=Level(1280, 8, 1)),
    "sdxl": dict(title="SDXL", cross_dim=2048, down_per_block=2, up_per_block=3,
                 levels=[Level(320, 0, 0), Level(640, 10, 2), Level(1280, 20, 10)],
                 mid=Level(1280, 20, 10)),
}


def attention_calls(model, px):
    """The distinct attention shapes of one step of `model` at px x px, in the order the first call
    of each is made down the UNet: a list of dicts with kind ("self"/"cross"), q_len, kv_len, heads,
    head_dim, count (calls per step) and where (the blocks that make them)."""
    spec = MODELS[model]
    levels = spec["levels"]
    step = 8 * 2 ** (len(levels) - 1)
    if px <= 0 or px % step:
        raise ValueError(f"{model}: the image size must be a positive multiple of {step} px "
                         f"(latent px/8, halved {len(levels) - 1} times), got {px}")
    latent = px // 8
    shapes = {}

    def add(level, side, blocks, where):
        for kind, kv in (("self", side * side), ("cross", TEXT_TOKENS)):
            key = (kind, side * side, kv, level.heads, level.head_dim)
            entry = shapes.setdefault(key, dict(kind=kind, q_len=side * side, kv_len=kv, heads=level.heads,
                                                head_dim=level.head_dim, count=0, where=[]))
            entry["count"] += blocks
            entry["where"].append(where)

    for i, level in enumerate(levels):
        if level.heads:
            add(level, latent >> i, (spec["down_per_block"] + spec["up_per_block"]) * level.layers,
                f"level {i} ({spec['down_per_block']} down + {spec['up_per_block']} up) x {level.layers}")
    add(spec["mid"], latent >> (len(levels) - 1), spec["mid"].layers, f"mid x {spec['mid'].layers}")
    return list(shapes.values())


# ---------------------------------------------------------------------------------------------
# Backends
# ---------------------------------------------------------------------------------------------

BACKENDS = ["naive", "sdpa-math", "sdpa-efficient", "sdpa-flash", "sdpa-cudnn", "flashport"]
MATERIALISING = {"naive", "sdpa-math"}  # hold [batch*heads, q, kv] scores and probabilities at once
_SDPA_ENUM = {"sdpa-math": "MATH", "sdpa-efficient": "EFFICIENT_ATTENTION", "sdpa-flash": "FLASH_ATTENTION",
              "sdpa-cudnn": "CUDNN_ATTENTION"}
_SDPA_OLD = {"sdpa-math": dict(enable_math=True, enable_flash=False, enable_mem_efficient=False),
             "sdpa-efficient": dict(enable_math=False, enable_flash=False, enable_mem_efficient=True),
             "sdpa-flash": dict(enable_math=False, enable_flash=True, enable_mem_efficient=False)}


def naive_attention(q, k, v):
    """diffusers' AttnProcessor: [b, s, h, d] -> heads into the batch, baddbmm, softmax, bmm."""
    b, s, h, d = q.shape
    kv = k.shape[1]
    qb = q.permute(0, 2, 1, 3).reshape(b * h, s, d)
    kb = k.permute(0, 2, 1, 3).reshape(b * h, kv, d)
    vb = v.permute(0, 2, 1, 3).reshape(b * h, kv, d)
    scores = torch.baddbmm(torch.empty(b * h, s, kv, dtype=q.dtype, device=q.device), qb, kb.transpose(1, 2),
                           beta=0, alpha=1.0 / math.sqrt(d))
    probs = scores.softmax(dim=-1)
    del scores
    return torch.bmm(probs, vb)


def sdpa_unavailable(backend, device):
    """None if `backend` can be asked for on this torch, else why not."""
    F = torch.nn.functional
    if not hasattr(F, "scaled_dot_product_attention"):
        return f"torch {torch.__version__} has no scaled_dot_product_attention (torch >= 2.0)"
    try:
        from torch.nn.attention import SDPBackend  # noqa: F401  (torch >= 2.3)
        if not hasattr(SDPBackend, _SDPA_ENUM[backend]):
            return f"torch {torch.__version__} has no SDPBackend.{_SDPA_ENUM[backend]}"
        return None
    except ImportError:
        pass
    if backend not in _SDPA_OLD:
        return f"torch {torch.__version__}: {backend} needs torch.nn.attention.sdpa_kernel (torch >= 2.3)"
    if device != "cuda":
        return f"torch {torch.__version__}: torch.backends.cuda.sdp_kernel selects GPU backends only"
    return None


def sdpa_context(backend):
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        return sdpa_kernel([getattr(SDPBackend, _SDPA_ENUM[backend])])
    except ImportError:
        return torch.backends.cuda.sdp_kernel(**_SDPA_OLD[backend])


def make_call(backend):
    if backend == "naive":
        return naive_attention
    if backend == "flashport":
        return lambda q, k, v: flashport.attention(q, k, v)

    def sdpa(q, k, v):
        with sdpa_context(backend):
            return torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                                    v.transpose(1, 2))
    return sdpa


def is_oom(e):
    oom = getattr(torch.cuda, "OutOfMemoryError", None)
    if oom is not None and isinstance(e, oom):
        return True
    text = str(e)
    return "out of memory" in text or "can't allocate memory" in text or "Cannot allocate memory" in text


def first_line(e):
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


# ---------------------------------------------------------------------------------------------
# Measurement
# ---------------------------------------------------------------------------------------------

class CpuPeak:
    """Resident-set growth during a call (see the module's doc). usable is False off Linux or where
    /proc/self/clear_refs cannot be written; peak() then gives None."""

    def __init__(self):
        self.usable = False
        self.libc = None
        try:
            self.libc = ctypes.CDLL("libc.so.6")
            self.libc.mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD: fixed, so no dynamic raise past it
        except OSError:
            pass
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self.usable = self._status("VmHWM") is not None
        except OSError:
            pass

    @staticmethod
    def _status(key):
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
        return None

    def measure(self, fn):
        """(result, bytes) of fn()."""
        if not self.usable:
            return fn(), None
        gc.collect()
        if self.libc is not None:
            self.libc.malloc_trim(0)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        base = self._status("VmRSS")
        out = fn()
        return out, max(0, self._status("VmHWM") - base)


def gpu_measure(fn):
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    out = fn()
    torch.cuda.synchronize()
    return out, torch.cuda.max_memory_allocated() - base


def time_call(fn, device, repeats, warmup, min_time=0.2):
    """Median ms of fn() over at least `repeats` runs (more while under min_time s in all, up to 50)."""
    for _ in range(warmup):
        fn()
    times = []
    if device == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    spent = 0.0
    while len(times) < repeats or (spent < min_time and len(times) < 50):
        if device == "cuda":
            start.record()
            fn()
            end.record()
            end.synchronize()
            ms = start.elapsed_time(end)
        else:
            t0 = time.perf_counter()
            fn()
            ms = (time.perf_counter() - t0) * 1e3
        times.append(ms)
        spent += ms / 1e3
    return statistics.median(times)


def naive_bytes(shape, elem):
    """Scores and probabilities of one materialising call, both [BATCH*heads, q_len, kv_len]."""
    return 2 * BATCH * shape["heads"] * shape["q_len"] * shape["kv_len"] * elem


def free_memory(device):
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


def run_point(model, px, backends, args, dtype, cpu_peak):
    """Every backend over one model and size: a list of result dicts, one per backend."""
    shapes = attention_calls(model, px)
    elem = torch.tensor([], dtype=dtype).element_size()
    results = {}
    for b in backends:
        r = dict(model=model, px=px, backend=b, status="ok", reason="", ms_per_step=None, peak_mib=None, shapes=[])
        if b.startswith("sdpa"):
            why = sdpa_unavailable(b, args.device)
            if why:
                r.update(status="unavailable", reason=why)
        if r["status"] == "ok" and b in MATERIALISING and args.max_naive_gib is not None:
            worst = max(shapes, key=lambda s: naive_bytes(s, elem))
            need = naive_bytes(worst, elem) / 2**30
            if need > args.max_naive_gib:
                r.update(status="skipped", reason=(
                    f"skipped: would need {need:.3g} GiB for the scores and probabilities of the "
                    f"{worst['q_len']}x{worst['kv_len']} {worst['kind']}-attention, over the "
                    f"{args.max_naive_gib:.3g} GiB budget (--max-naive-gib)"))
        results[b] = r
    active = [b for b in backends if results[b]["status"] == "ok"]
    if not active:  # nothing to run: no inputs either
        return [results[b] for b in backends]
    step_ms = {b: 0.0 for b in active}
    peak = {b: 0 for b in active}
    measure = gpu_measure if args.device == "cuda" else cpu_peak.measure
    for shape in shapes:
        active = [b for b in active if results[b]["status"] == "ok"]
        if not active:
            break
        gen = torch.Generator(device=args.device).manual_seed(shape["q_len"] * 1000 + shape["kv_len"])
        mk = lambda n: torch.randn(BATCH, n, shape["heads"], shape["head_dim"], generator=gen, device=args.device,
                                   dtype=torch.float32).to(dtype)
        try:
            q, k, v = mk(shape["q_len"]), mk(shape["kv_len"]), mk(shape["kv_len"])
        except RuntimeError as e:
            if not is_oom(e):
                raise
            for b in active:
                results[b].update(status="OOM", reason="the inputs do not fit: " + first_line(e))
            q = k = v = None
        if q is None:  # freed here, not in the except block, whose traceback still holds the frames' tensors
            free_memory(args.device)
            break
        for b in active:
            fn = make_call(b)
            r = results[b]
            try:
                out, used = measure(lambda: fn(q, k, v))
                del out
                ms = time_call(lambda: fn(q, k, v), args.device, args.repeats, args.warmup, args.min_time)
            except (RuntimeError, ValueError) as e:
                r.update(status="OOM" if is_oom(e) else "rejected", reason=first_line(e))
            if r["status"] != "ok":
                free_memory(args.device)  # after the except block: its traceback kept the failed call's tensors
                continue
            step_ms[b] += shape["count"] * ms
            peak[b] = None if used is None or peak[b] is None else max(peak[b], used)
            r["shapes"].append(dict(shape, where="; ".join(shape["where"]), median_ms=ms,
                                    peak_mib=None if used is None else used / 2**20))
        del q, k, v
        free_memory(args.device)
    for b in step_ms:
        if results[b]["status"] == "ok":
            results[b]["ms_per_step"] = step_ms[b]
            results[b]["peak_mib"] = None if peak[b] is None else peak[b] / 2**20
    return [results[b] for b in backends]


# ---------------------------------------------------------------------------------------------
# Output: table, JSON, SVG
# ---------------------------------------------------------------------------------------------

def fmt_ratio(x, ref):
    return f"{x / ref:.2f}x" if x is not None and ref else "-"


def table(points, models, sizes, dtype_name, device):
    lines = []
    by = {(p["model"], p["px"], p["backend"]): p for p in points}
    for m in models:
        for px in sizes:
            shapes = attention_calls(m, px)
            calls = sum(s["count"] for s in shapes)
            lines.append(f"\n{MODELS[m]['title']}, {px} px (latent {px // 8}x{px // 8}, {calls} attention calls "
                         f"in {len(shapes)} shapes, batch {BATCH}, {dtype_name}, {device})")
            lines.append(f"  {'backend':<15}{'ms/step':>12}{'peak MiB':>12}{'time/flashport':>16}{'mem/flashport':>15}")
            ref = by.get((m, px, "flashport"))
            ref_ms = ref["ms_per_step"] if ref else None
            ref_mib = ref["peak_mib"] if ref else None
            for p in points:
                if p["model"] != m or p["px"] != px:
                    continue
                if p["status"] != "ok":
                    lines.append(f"  {p['backend']:<15}{p['status']}: {p['reason']}" if p["status"] != "skipped"
                                 else f"  {p['backend']:<15}{p['reason']}")
                    continue
                mib = "-" if p["peak_mib"] is None else f"{p['peak_mib']:.1f}"
                lines.append(f"  {p['backend']:<15}{p['ms_per_step']:>12.2f}{mib:>12}"
                             f"{fmt_ratio(p['ms_per_step'], ref_ms):>16}{fmt_ratio(p['peak_mib'], ref_mib):>15}")
    return "\n".join(lines)


PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


def _esc(s):
    return (str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;"))


def _marker(i, x, y, colour):
    style = f'fill="{colour}" stroke="white" stroke-width="0.8"'
    shape = i % 4
    if shape == 0:
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.6" {style}/>'
    if shape == 1:
        return f'<rect x="{x - 3.3:.1f}" y="{y - 3.3:.1f}" width="6.6" height="6.6" {style}/>'
    pts = ([(x, y - 4.6), (x + 4.6, y), (x, y + 4.6), (x - 4.6, y)] if shape == 2
           else [(x, y - 4.4), (x + 4.2, y + 3.2), (x - 4.2, y + 3.2)])
    return f'<polygon points="{" ".join(f"{a:.1f},{b:.1f}" for a, b in pts)}" {style}/>'


def _mib_label(v):
    return f"{v / 1000:g}k" if v >= 1000 else f"{v:g}"


def svg_plot(points, models, sizes, backends, title):
    """Peak attention memory against image size: one panel per model, one line per backend, log
    memory axis (plain SVG in the style of apps/flashport/plot.cpp). A point that did not run leaves a
    gap, and its status (OOM, skipped, rejected) is written at the panel's top."""
    pw, ph, top_m, bottom_m, left_m, right_m = 520.0, 380.0, 34.0, 58.0, 78.0, 20.0
    names = [b for b in backends if any(p["backend"] == b and p["status"] in ("ok", "OOM", "skipped") for p in points)]
    width = pw * len(models)
    rows = [[]]
    row_w = 0.0
    item_w = lambda n: 30 + 0.6 * 13 * len(n) + 20
    for n in names:
        if rows[-1] and row_w + item_w(n) > width - 40:
            rows.append([])
            row_w = 0.0
        rows[-1].append(n)
        row_w += item_w(n)
    header = 36 + 8 + 20 * len(rows)
    height = header + ph
    title_font = min(17.0, (width - 20) / (0.68 * len(title)))
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.1f}" height="{height:.1f}" '
         f'viewBox="0 0 {width:.1f} {height:.1f}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">',
         '<rect width="100%" height="100%" fill="white"/>',
         f'<text x="{width / 2:.1f}" y="28" text-anchor="middle" font-size="{title_font:.1f}" '
         f'font-weight="bold">{_esc(title)}</text>']
    for r, row in enumerate(rows):
        x = (width - sum(item_w(n) for n in row)) / 2
        y = 36 + 14 + 20 * r
        for n in row:
            c = PALETTE[BACKENDS.index(n) % len(PALETTE)]
            o.append(f'<line x1="{x:.1f}" y1="{y:.1f}" x2="{x + 24:.1f}" y2="{y:.1f}" stroke="{c}" stroke-width="2"/>')
            o.append(_marker(BACKENDS.index(n), x + 12, y, c))
            o.append(f'<text x="{x + 30:.1f}" y="{y + 4.5:.1f}" text-anchor="start" font-size="13">{_esc(n)}</text>')
            x += item_w(n)
    for pi, m in enumerate(models):
        ox, oy = pw * pi, header
        left, right, ptop, bottom = ox + left_m, ox + pw - right_m, oy + top_m, oy + ph - bottom_m
        mine = [p for p in points if p["model"] == m]
        ys = [p["peak_mib"] for p in mine if p["status"] == "ok" and p["peak_mib"] and p["peak_mib"] > 0]
        lo, hi = (math.log10(min(ys)), math.log10(max(ys))) if ys else (0.0, 1.0)
        if hi - lo < 1e-9:
            lo, hi = lo - 0.5, hi + 0.5
        pad = 0.05 * (hi - lo)
        lo, hi = lo - pad, hi + pad
        xs = sorted(set(sizes))
        xlo, xhi = (xs[0], xs[-1]) if len(xs) > 1 else (xs[0] - 1, xs[0] + 1)
        xpad = 0.06 * (xhi - xlo)
        xlo, xhi = xlo - xpad, xhi + xpad
        px_ = lambda v: left + (v - xlo) / (xhi - xlo) * (right - left)
        py_ = lambda v: bottom - (math.log10(v) - lo) / (hi - lo) * (bottom - ptop)
        o.append(f'<text x="{(left + right) / 2:.1f}" y="{oy + 22:.1f}" text-anchor="middle" font-size="15" '
                 f'font-weight="bold">{_esc(MODELS[m]["title"])}: peak attention memory per step</text>')
        yt = [m_ * 10.0 ** d for d in range(math.floor(lo), math.ceil(hi) + 1) for m_ in (1, 2, 5)
              if lo <= math.log10(m_ * 10.0 ** d) <= hi]
        if len(yt) < 3:
            yt = [m_ * 10.0 ** d for d in range(math.floor(lo), math.ceil(hi) + 1) for m_ in range(1, 10)
                  if lo <= math.log10(m_ * 10.0 ** d) <= hi]
        if len(yt) > 9:
            yt = [t for t in yt if abs(math.log10(t) - round(math.log10(t))) < 1e-9]
        o.append('<g stroke="#e3e3e3" stroke-width="1">')
        o += [f'<line x1="{px_(t):.1f}" y1="{ptop:.1f}" x2="{px_(t):.1f}" y2="{bottom:.1f}"/>' for t in xs]
        o += [f'<line x1="{left:.1f}" y1="{py_(t):.1f}" x2="{right:.1f}" y2="{py_(t):.1f}"/>' for t in yt]
        o.append('</g>')
        o.append(f'<rect x="{left:.1f}" y="{ptop:.1f}" width="{right - left:.1f}" height="{bottom - ptop:.1f}" '
                 f'fill="none" stroke="#444"/>')
        o += [f'<text x="{px_(t):.1f}" y="{bottom + 17:.1f}" text-anchor="middle" font-size="12" fill="#333">{t}</text>'
              for t in xs]
        o += [f'<text x="{left - 6:.1f}" y="{py_(t) + 4:.1f}" text-anchor="end" font-size="12" fill="#333">'
              f'{_esc(_mib_label(t))}</text>' for t in yt]
        o.append(f'<text x="{(left + right) / 2:.1f}" y="{bottom + 42:.1f}" text-anchor="middle" font-size="13">'
                 f'image size (px a side; batch {BATCH})</text>')
        o.append(f'<text x="0" y="0" text-anchor="middle" font-size="13" transform="translate({ox + 18:.1f},'
                 f'{(ptop + bottom) / 2:.1f}) rotate(-90)">peak MiB of one attention call (log)</text>')
        if not ys:
            o.append(f'<text x="{(left + right) / 2:.1f}" y="{(ptop + bottom) / 2:.1f}" text-anchor="middle" '
                     f'font-size="14" fill="#888">no data</text>')
        missing = {}  # px -> annotations written there
        for n in names:
            c = PALETTE[BACKENDS.index(n) % len(PALETTE)]
            series = sorted((p for p in mine if p["backend"] == n), key=lambda p: p["px"])
            runs, run = [], []
            for p in series:
                if p["status"] == "ok" and p["peak_mib"] and p["peak_mib"] > 0:
                    run.append((px_(p["px"]), py_(p["peak_mib"])))
                    continue
                if run:
                    runs.append(run)
                    run = []
                if p["status"] in ("OOM", "skipped"):
                    row = missing.get(p["px"], 0)
                    missing[p["px"]] = row + 1
                    x = px_(p["px"])
                    anchor = "start" if x - left < 60 else "end" if right - x < 60 else "middle"
                    o.append(f'<text x="{x + {"start": 4, "end": -4, "middle": 0}[anchor]:.1f}" '
                             f'y="{ptop + 14 + 12 * row:.1f}" text-anchor="{anchor}" font-size="10" '
                             f'fill="{c}">{_esc(n)}: {p["status"]}</text>')
            if run:
                runs.append(run)
            for run in runs:
                if len(run) > 1:
                    o.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" stroke-linejoin="round" points="'
                             + " ".join(f"{x:.1f},{y:.1f}" for x, y in run) + '"/>')
                o += [_marker(BACKENDS.index(n), x, y, c) for x, y in run]
    o.append("</svg>")
    return "\n".join(o) + "\n"


# ---------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------

# port-check: ignore hw-bf16-torch -- bf16 is one --dtype choice beside f16; the user picks what the chip has
DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python3 -m flashport.bench", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="workload", required=True)
    sd = sub.add_parser("sd", help="the Stable Diffusion UNets' attention, one denoising step",
                        description=__doc__.split("\n\n", 1)[1],
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    sd.add_argument("--device", choices=["cpu", "cuda"], default=None,
                    help="default: cuda where torch sees a GPU, else cpu")
    sd.add_argument("--model", choices=["sd15", "sdxl", "all"], default="all")
    sd.add_argument("--sizes", default=None,
                    help="image sizes in px, comma-separated; default 512,768,1024,1536,2048 on a GPU, 512 on the CPU")
    sd.add_argument("--dtype", choices=list(DTYPES), default=None, help="default f16 on a GPU, f32 on the CPU")
    sd.add_argument("--backends", default=",".join(BACKENDS))
    sd.add_argument("--out", default="bench-sd", help="directory for the JSON and SVG (default ./bench-sd)")
    sd.add_argument("--max-naive-gib", type=float, default=None,
                    help="skip naive / sdpa-math points whose scores and probabilities exceed this; "
                         "default a quarter of physical RAM on the CPU, no limit on a GPU")
    sd.add_argument("--repeats", type=int, default=None, help="timed runs per shape (default 10 GPU, 3 CPU)")
    sd.add_argument("--warmup", type=int, default=None, help="untimed runs per shape (default 3 GPU, 1 CPU)")
    sd.add_argument("--min-time", type=float, default=0.2,
                    help="keep timing a shape (up to 50 runs) until this many seconds are spent (default 0.2)")
    sd.add_argument("--threads", type=int, default=None, help="CPU threads (torch.set_num_threads; the "
                    "extension's OpenMP shares torch's runtime)")
    args = ap.parse_args(argv)
    if args.device is None:
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    gpu = args.device == "cuda"
    if gpu and not torch.cuda.is_available():
        ap.error("--device cuda: torch sees no GPU")
    args.sizes = [int(s) for s in (args.sizes or ("512,768,1024,1536,2048" if gpu else "512")).split(",") if s]
    args.dtype = args.dtype or ("f16" if gpu else "f32")
    args.backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    for b in args.backends:
        if b not in BACKENDS:
            ap.error(f"unknown backend {b!r}: choose from {', '.join(BACKENDS)}")
    if args.max_naive_gib is None and not gpu:
        args.max_naive_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 4 / 2**30
    args.repeats = args.repeats or (10 if gpu else 3)
    args.warmup = args.warmup if args.warmup is not None else (3 if gpu else 1)
    args.models = ["sd15", "sdxl"] if args.model == "all" else [args.model]
    for m in args.models:
        for px in args.sizes:
            try:
                attention_calls(m, px)
            except ValueError as e:
                ap.error(str(e))
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    dtype = DTYPES[args.dtype]
    cpu_peak = CpuPeak() if args.device == "cpu" else None
    device_name = (torch.cuda.get_device_name() if args.device == "cuda"
                   else platform.processor() or platform.machine())
    memory_method = ("torch.cuda.max_memory_allocated minus memory_allocated before the call" if args.device == "cuda"
                     else "RSS high-water mark (VmHWM, reset through /proc/self/clear_refs) minus RSS before the call"
                     if cpu_peak.usable else "unavailable here (needs Linux /proc/self/clear_refs)")
    print(f"flashport.bench sd: {flashport.build_info()}; torch {torch.__version__}; {args.device} ({device_name}"
          f"{', %d threads' % torch.get_num_threads() if args.device == 'cpu' else ''}); {args.dtype}; batch {BATCH}")
    print(f"peak memory: {memory_method}")
    if args.max_naive_gib is not None:
        print(f"naive / sdpa-math budget: {args.max_naive_gib:.1f} GiB")
    # One tiny call per backend first, so thread pools and lazy library state are not charged to a point.
    warm = torch.randn(BATCH, 16, 1, 64, device=args.device).to(dtype)
    for b in args.backends:
        if not (b.startswith("sdpa") and sdpa_unavailable(b, args.device)):
            with contextlib.suppress(RuntimeError, ValueError):
                make_call(b)(warm, warm, warm)
    points = []
    for m in args.models:
        for px in args.sizes:
            t0 = time.perf_counter()
            got = run_point(m, px, args.backends, args, dtype, cpu_peak)
            points += got
            print(f"  {MODELS[m]['title']} {px} px: {len(got)} backends in {time.perf_counter() - t0:.1f} s",
                  file=sys.stderr, flush=True)
    print(table(points, args.models, args.sizes, args.dtype, args.device))
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, f"sd_{args.device}_{args.dtype}")
    meta = dict(workload="sd", device=args.device, device_name=device_name, dtype=args.dtype, batch=BATCH,
                torch=torch.__version__, flashport=flashport.build_info(),
                threads=torch.get_num_threads() if args.device == "cpu" else None,
                memory_method=memory_method, max_naive_gib=args.max_naive_gib, repeats=args.repeats,
                warmup=args.warmup, min_time=args.min_time,
                time_method="CUDA events" if args.device == "cuda" else "time.perf_counter",
                ms_per_step="sum over distinct shapes of calls per step x median ms per call",
                peak_mib="max over the step's calls of the memory one call adds above its inputs")
    shapes = {m: {str(px): attention_calls(m, px) for px in args.sizes} for m in args.models}
    with open(stem + ".json", "w") as f:
        json.dump(dict(meta=meta, shapes=shapes, points=points), f, indent=1)
    title = (f"Stable Diffusion attention, one step, batch {BATCH}, {args.dtype}, {device_name}")
    with open(stem + "_memory.svg", "w") as f:
        f.write(svg_plot(points, args.models, args.sizes, args.backends, title))
    print(f"\nwrote {stem}.json and {stem}_memory.svg")
    return 0


if __name__ == "__main__":
    sys.exit(main())
