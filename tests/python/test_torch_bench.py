"""flashport.bench sd: the UNet attention calls it replays (checked against figures counted by hand
from the architectures), a tiny CLI run on the CPU (table, JSON, SVG), and the naive-memory guard
(a point over the budget is reported, never allocated)."""
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

import torch_support  # noqa: F401  (the import guard)

import torch
from flashport import bench

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.join(HERE, "..", "..", "python")


def shapes_of(model, px):
    return {(s["kind"], s["q_len"], s["kv_len"], s["heads"], s["head_dim"]): s["count"]
            for s in bench.attention_calls(model, px)}


def test_sd15_calls_at_512():
    # latent 64: levels 64x64, 32x32, 16x16 with 2 down + 3 up transformer blocks each (1 layer),
    # 8 heads of 40, 80, 160; the mid block at 8x8, 8 heads of 160. 16 blocks, 32 calls.
    assert shapes_of("sd15", 512) == {
        ("self", 4096, 4096, 8, 40): 5, ("cross", 4096, 77, 8, 40): 5,
        ("self", 1024, 1024, 8, 80): 5, ("cross", 1024, 77, 8, 80): 5,
        ("self", 256, 256, 8, 160): 5, ("cross", 256, 77, 8, 160): 5,
        ("self", 64, 64, 8, 160): 1, ("cross", 64, 77, 8, 160): 1,
    }


def test_sdxl_calls_at_512_and_1024():
    # latent 64: no attention at 64x64; 32x32: (2 + 3) blocks x 2 layers, 10 heads of 64; 16x16:
    # (2 + 3) x 10 layers + the mid block's 10, 20 heads of 64. 70 blocks, 140 calls.
    assert shapes_of("sdxl", 512) == {
        ("self", 1024, 1024, 10, 64): 10, ("cross", 1024, 77, 10, 64): 10,
        ("self", 256, 256, 20, 64): 60, ("cross", 256, 77, 20, 64): 60,
    }
    at_1024 = shapes_of("sdxl", 1024)
    assert at_1024[("self", 4096, 4096, 10, 64)] == 10 and at_1024[("self", 1024, 1024, 20, 64)] == 60
    assert sum(at_1024.values()) == 140


def test_token_counts_scale_with_the_image():
    for px in (512, 768, 1024, 1536, 2048):
        latent = px // 8
        top = max(s["q_len"] for s in bench.attention_calls("sd15", px))
        assert top == latent * latent
        assert sum(s["count"] for s in bench.attention_calls("sd15", px)) == 32
    with pytest.raises(ValueError, match="multiple of 64"):
        bench.attention_calls("sd15", 100)


def run_cli(tmp_path, *extra):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([PYTHON_DIR, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-m", "flashport.bench", "sd", "--device", "cpu", "--out", str(tmp_path),
                           "--repeats", "1", "--warmup", "0", "--min-time", "0", *extra],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(tmp_path / "sd_cpu_f32.json") as f:
        return proc.stdout, json.load(f)


def test_cli_tiny_run(tmp_path):
    out, data = run_cli(tmp_path, "--model", "all", "--sizes", "128")
    assert "SD 1.5, 128 px" in out and "SDXL, 128 px" in out and "flashport" in out
    points = {(p["model"], p["backend"]): p for p in data["points"]}
    assert len(points) == 2 * len(bench.BACKENDS)
    for model in ("sd15", "sdxl"):
        for b in ("naive", "flashport"):
            p = points[(model, b)]
            assert p["status"] == "ok", p
            assert p["ms_per_step"] > 0
            assert sum(s["count"] for s in p["shapes"]) == (32 if model == "sd15" else 140)
    for (model, b), p in points.items():
        if b.startswith("sdpa"):
            assert p["status"] in ("ok", "unavailable", "rejected"), p
            if not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
                assert p["status"] == "unavailable"
    if data["meta"]["memory_method"].startswith("RSS"):
        # SD 1.5 at 128 px: the 256-token self-attention's scores and probabilities,
        # 2 x (batch 2 x 8 heads x 256 x 256) fp32 = 8 MiB, are what naive's peak is made of.
        naive, ours = points[("sd15", "naive")]["peak_mib"], points[("sd15", "flashport")]["peak_mib"]
        assert naive >= 8 * 0.95, naive
        assert ours < naive / 4, (ours, naive)
    svg = ET.parse(tmp_path / "sd_cpu_f32_memory.svg").getroot()
    texts = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")]
    assert "naive" in texts and "flashport" in texts
    assert any("SD 1.5" in t for t in texts) and any("SDXL" in t for t in texts)


def test_cli_skips_a_point_over_the_budget(tmp_path):
    # SD 1.5 at 128 px needs 8 MiB (0.0078 GiB) for naive's matrices: over a 0.007 GiB budget.
    out, data = run_cli(tmp_path, "--model", "sd15", "--sizes", "128", "--backends", "naive,flashport",
                        "--max-naive-gib", "0.007")
    naive, ours = data["points"]
    assert naive["status"] == "skipped" and "would need 0.00781 GiB" in naive["reason"], naive
    assert naive["shapes"] == [] and naive["peak_mib"] is None
    assert ours["status"] == "ok"
    assert "skipped: would need" in out


def test_guard_allocates_nothing(monkeypatch):
    # SD 1.5 at 8192 px: 1M-token self-attention, 128 TiB of naive scores. Skipped before the inputs
    # (7.5 GiB) are made or the backend is called.
    monkeypatch.setattr(bench, "naive_attention", lambda *a: pytest.fail("naive ran over the budget"))
    monkeypatch.setattr(torch, "randn", lambda *a, **k: pytest.fail("inputs allocated for a skipped point"))
    args = bench.parse_args(["sd", "--device", "cpu", "--model", "sd15", "--sizes", "8192", "--backends", "naive"])
    [r] = bench.run_point("sd15", 8192, ["naive"], args, torch.float32, None)
    assert r["status"] == "skipped" and "would need 1.31e+05 GiB" in r["reason"], r


@pytest.mark.parametrize("error, status", [(RuntimeError("CUDA out of memory. Tried to allocate 40.00 GiB"), "OOM"),
                                           (RuntimeError("No available kernel. Aborting execution."), "rejected")])
def test_a_failing_backend_is_reported_and_the_run_goes_on(monkeypatch, error, status):
    def fail(*a):
        raise error
    monkeypatch.setattr(bench, "naive_attention", fail)
    args = bench.parse_args(["sd", "--device", "cpu", "--model", "sd15", "--sizes", "64", "--repeats", "1",
                             "--warmup", "0", "--min-time", "0"])
    naive, ours = bench.run_point("sd15", 64, ["naive", "flashport"], args, torch.float32, bench.CpuPeak())
    assert naive["status"] == status and str(error) in naive["reason"] and naive["ms_per_step"] is None
    assert ours["status"] == "ok" and len(ours["shapes"]) == 8
