#!/usr/bin/env python3
"""The engine benchmark's parts that run without PyTorch or a GPU (bench/gpu/engine_peers.py runs on the
device machine only):
  - engine_peers.py compiles, and --help works without torch;
  - engine_report: the figures, checks and table from made-up numbers, and from a run with failed steps;
  - engine_ours: our CLI's generate / bench engine / perplexity on a tiny fixture on the CPU (the command
    lines and the JSON keys the benchmark reads), and a CLI failure as a clear RuntimeError.

    FLASHPORT_BIN=build/cpu/bin/flashport FP_MODELS_DIR=tests/data/models python3 tests/python/test_engine_bench.py
Without FLASHPORT_BIN the CLI tests skip.
"""
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench" / "gpu"
sys.path.insert(0, str(BENCH))
import engine_ours  # noqa: E402
import engine_report  # noqa: E402

BIN = os.environ.get("FLASHPORT_BIN")
MODELS = Path(os.environ.get("FP_MODELS_DIR", REPO / "tests" / "data" / "models"))


def fake_report(ours_top1=None):
    """A complete report as engine_peers.py writes it, with round numbers."""
    fp32 = list(range(100))
    eager = fp32[:97] + [-1, -1, -1]                       # 97% agreement
    ours = ours_top1 if ours_top1 is not None else fp32[:96] + [-1] * 4  # 96%
    return {
        "model_name": "random qwen2.5-7b-instruct", "gpu": "NVIDIA H200", "torch": "2.11", "transformers": "5.17",
        "prompt_len": 512, "new_tokens": 128, "reps": 3,
        "shapes": {"num_hidden_layers": 28, "hidden_size": 3584, "num_attention_heads": 28, "num_key_value_heads": 4,
                   "vocab_size": 152064, "weight_bytes": 15e9},
        "steps": {
            "copy": {"gb_per_s": 4200.0, "limit_tok_s": engine_report.bandwidth_limit_tok_s(4200.0, 15e9)},
            "hf_eager": {"decode_tok_s": 50.0, "ttft_ms": 60.0, "ttft_long_ms": 400.0, "peak_allocated_bytes": 16e9,
                         "generated_ids": [1, 2, 3, 4]},
            "hf_sdpa": {"decode_tok_s": 55.0, "ttft_ms": 50.0, "ttft_long_ms": 300.0, "peak_allocated_bytes": 15.5e9},
            "agreement": {"fp32_top1": fp32, "bf16_eager_top1": eager, "bf16_sdpa_top1": eager},
            "ours_generate": {"figures": {"decode_tok_s": 252.0, "ttft_ms": 30.0, "weight_bytes": 15e9,
                                          "kv_cache_bytes": 0.04e9, "driver_peak_delta_bytes": 15.3e9,
                                          "peak_memory_bytes": 15.1e9},
                              "generated_ids": [1, 2, 9, 4]},
            "ours_batched": {"report": {"weight_bytes": 15e9, "runs": [
                {"batch": 1, "ttft_ms": 25.0, "decode_tok_s": 250.0, "round_ms_median": 4.0,
                 "kv_cache_bytes": 0.04e9, "driver_peak_delta_bytes": 15.2e9},
                {"batch": 8, "ttft_ms": 150.0, "decode_tok_s": 1800.0, "round_ms_median": 4.4,
                 "kv_cache_bytes": 0.3e9, "driver_peak_delta_bytes": 15.5e9},
                {"batch": 32, "ttft_ms": 600.0, "decode_tok_s": 6000.0, "round_ms_median": 5.3, "step_ms_median": 4.1,
                 "kv_cache_bytes": 1.2e9, "driver_peak_delta_bytes": 17.0e9}]}},
            "ours_ttft_long": {"report": {"runs": [{"batch": 1, "ttft_ms": 200.0}]}},
            "ours_ttft_16k": {"report": {"runs": [{"batch": 1, "ttft_ms": 900.0}]}},
            "ours_long_context": {"report": {"prompt_len": 8192, "new_tokens": 64,
                                             "runs": [{"batch": 1, "decode_tok_s": 240.0}]}},
            "ours_nopdl": {"report": {"runs": [{"batch": 1, "decode_tok_s": 230.0}]}},
            "ours_sampled": {"figures": {"decode_tok_s": 247.0}},
            "ours_top1": {"top1_ids": ours},
        },
    }


class PeersScript(unittest.TestCase):
    def test_compiles(self):
        for name in ("engine_peers.py", "engine_ours.py", "engine_report.py"):
            compile((BENCH / name).read_text(), str(BENCH / name), "exec")  # py_compile's check, no .pyc written

    def test_help_without_torch(self):
        r = subprocess.run([sys.executable, str(BENCH / "engine_peers.py"), "--help"], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
        self.assertEqual(r.returncode, 0, r.stderr)
        for flag in ("--flashport", "--out", "--work", "--config", "--quick"):
            self.assertIn(flag, r.stdout)

    def test_default_and_quick_configs_exist(self):
        for name in ("qwen2.5-7b-instruct", "qwen2.5-0.5b-instruct"):
            self.assertTrue((REPO / "tests" / "data" / "models" / "configs" / name / "config.json").is_file(), name)


class Report(unittest.TestCase):
    def test_figures_and_checks(self):
        s = engine_report.summarize(fake_report())
        self.assertAlmostEqual(s["limit_tok_s"], 280.0)
        self.assertAlmostEqual(s["ratio_vs_eager"], 252.0 / 50.0)
        self.assertAlmostEqual(s["fraction_of_limit"]["ours"], 0.9)
        self.assertTrue(s["milestone_met"])
        self.assertTrue(s["goal_met"])
        self.assertEqual(s["ttft_ms"]["512"]["ours"], 25.0)  # bench engine's median, not generate's one run
        self.assertEqual(s["ttft_ms"]["4096"]["ours"], 200.0)
        self.assertAlmostEqual(s["memory"]["ours_bound_bytes"], 15e9 + 0.04e9 + 0.5e9)
        self.assertTrue(s["memory"]["ours_within_bound"])
        self.assertTrue(s["batched"]["8"]["within_bound"])
        self.assertFalse(s["batched"]["32"]["within_bound"])  # 17.0 > 15 + 1.2 + 0.5
        self.assertEqual(s["batched"]["32"]["decode_tok_s"], 6000.0)
        self.assertAlmostEqual(s["agreement"]["ours"], 0.96)
        self.assertAlmostEqual(s["agreement"]["eager"], 0.97)
        self.assertTrue(s["agreement"]["met"])  # within one point
        self.assertEqual(s["greedy_common_prefix_vs_eager"], 2)
        self.assertEqual(s["errors"], {})
        # Issue 16: a step's bound reads the weights and each sequence's K/V (57344 bytes a token for
        # these shapes) at the mean context of the decode, prompt + new / 2 = 576 tokens.
        self.assertEqual(engine_report.kv_bytes_per_token(fake_report()["shapes"]), 57344)
        self.assertAlmostEqual(s["batched"]["8"]["bound_tok_s"], 8 * 4200e9 / (15e9 + 8 * 57344 * 576))
        self.assertAlmostEqual(s["batched"]["8"]["fraction_of_bound"], 1800.0 / s["batched"]["8"]["bound_tok_s"])
        self.assertIsNone(s["batched"]["64"]["decode_tok_s"])  # not in the made-up runs
        self.assertAlmostEqual(s["long_context"]["bound_tok_s"], 4200e9 / (15e9 + 57344 * (8192 + 32)))
        self.assertTrue(s["long_context"]["met"])  # 240 >= 235
        self.assertEqual(s["ttft_ms"]["16384"]["ours"], 900.0)
        self.assertFalse(s["ttft_ms"]["512"]["target_met"])  # 25 and 30 ms against 12
        self.assertFalse(s["ttft_ms"]["4096"]["target_met"])  # 200 > 0.8 x 300
        self.assertAlmostEqual(s["sampled"]["vs_greedy"], 247.0 / 252.0)
        self.assertTrue(s["sampled"]["met"])
        self.assertEqual(s["switches"], {"all on": 250.0, "no dependent launches": 230.0, "no decode graph": None})

    def test_agreement_more_than_a_point_below_fails(self):
        s = engine_report.summarize(fake_report(ours_top1=list(range(95)) + [-1] * 5))
        self.assertFalse(s["agreement"]["met"])

    def test_table(self):
        r = fake_report()
        md = engine_report.markdown(r, engine_report.summarize(r))
        for text in ("| decode tok/s | 252.0 | 50.0 | 55.0 | 280.0 | 5.04× |", "| % of bandwidth limit | 90.0% |",
                     "| TTFT 512 (ms) | 25.0 | 60.0 | 50.0 | | 2.40× |", "| TTFT 4096 (ms) | 200.0 | 400.0 |",
                     "15.30 GB driver (bound 15.54 GB: met)", "| decode tok/s, 32 sequences | 6000.0 (5.30 ms a round, 4.10 in step(); "
                     "memory bound NOT met)", "| top-1 agreement with fp32 (100 positions) | 96.0% | 97.0% |",
                     "milestone (≥ 4× transformers eager): met", "NVIDIA H200", "| TTFT 16384 (ms) | 900.0 |",
                     "| decode tok/s at 8224 tokens of context | 240.0 | | | 271.5 |",
                     "no dependent launches 230.0 tok/s", "TTFT 4096 ≤ 0.8× sdpa's and ≤ 100 ms: NOT met"):
            self.assertIn(text, md)
        self.assertNotIn("Failed steps", md)

    def test_failed_steps_leave_the_rest(self):
        r = fake_report()
        r["steps"]["hf_eager"] = {"error": "RuntimeError: CUDA out of memory\nTraceback ..."}
        del r["steps"]["ours_top1"]
        s = engine_report.summarize(r)
        self.assertIsNone(s["ratio_vs_eager"])
        self.assertIsNone(s["milestone_met"])
        self.assertIsNone(s["agreement"]["met"])
        self.assertEqual(s["decode_tok_s"]["ours"], 252.0)
        md = engine_report.markdown(r, s)
        self.assertIn("| decode tok/s | 252.0 | n/a |", md)
        self.assertIn("milestone (≥ 4× transformers eager): n/a", md)
        self.assertIn("- hf_eager: Traceback ...", md)

    def test_brief_log_line(self):
        r = fake_report()["steps"]
        self.assertEqual(engine_report.brief({"gb_per_s": 4200.0, "step_s": 1.5}), "   gb_per_s 4200, step_s 1.5")
        self.assertIn("decode_tok_s 252", engine_report.brief(r["ours_generate"]))
        self.assertNotIn("generated_ids", engine_report.brief(r["ours_generate"]))
        self.assertEqual(engine_report.brief(r["ours_batched"]).count("\n"), 2)  # one line per batch size
        self.assertNotIn("Traceback", engine_report.brief({"error": "x\nTraceback", "step_s": 0.1}))

    def test_empty_report(self):
        s = engine_report.summarize({"steps": {}})
        self.assertIn("n/a", engine_report.markdown({"steps": {}}, s))


@unittest.skipUnless(BIN, "FLASHPORT_BIN is not set")
class OursOnTheCpu(unittest.TestCase):
    model = MODELS / "qwen3-tiny-bf16"
    ids = [(7 * i + 3) % 512 for i in range(24)]

    def test_generate(self):
        r = engine_ours.generate(BIN, self.model, self.ids, 8, device="cpu")
        self.assertEqual(len(r["generated_ids"]), 8)
        self.assertEqual(r["stop_reason"], "max_tokens")
        f = r["figures"]
        for key in ("decode_tok_s", "ttft_ms", "weight_bytes", "kv_cache_bytes", "driver_peak_delta_bytes",
                    "peak_memory_bytes"):
            self.assertIn(key, f)
        self.assertEqual(f["kv_cache_bytes"] > 0, True)
        self.assertIn("--prompt-ids 3,10,17", r["command"])

    def test_long_ids_are_shortened_in_the_command(self):
        self.assertEqual(engine_ours.shown(["x", ",".join(["12345"] * 100)]), "x <100 ids>")

    def test_bench_engine(self):
        r = engine_ours.bench_engine(BIN, self.model, [1, 2], 16, 4, 2, device="cpu")
        runs = r["report"]["runs"]
        self.assertEqual([run["batch"] for run in runs], [1, 2])
        for run in runs:
            self.assertGreater(run["decode_tok_s"], 0)
            self.assertGreater(run["ttft_ms"], 0)
            self.assertLessEqual(run["step_ms_median"], run["round_ms_median"])
            self.assertNotIn("seq0_prompt_ids", run)
        self.assertIn("--batch 1,2", r["command"])

    def test_top1(self):
        with tempfile.TemporaryDirectory() as work:
            r = engine_ours.top1(BIN, self.model, self.ids, work, device="cpu")
        self.assertEqual(len(r["top1_ids"]), len(self.ids) - 1)
        self.assertTrue(all(0 <= t < 512 for t in r["top1_ids"]))

    def test_a_cli_error_is_a_runtime_error_with_its_message(self):
        with self.assertRaises(RuntimeError) as e:
            engine_ours.bench_engine(BIN, "/nonexistent/model", [1], 4, 2, 1, device="cpu")
        self.assertIn("not a model folder", str(e.exception))

    def test_summary_from_real_cli_output(self):
        """engine_report reads what the CLI really prints (CPU figures; the transformers steps faked)."""
        r = fake_report()
        r["steps"]["ours_generate"] = engine_ours.generate(BIN, self.model, self.ids, 4, device="cpu")
        r["steps"]["ours_batched"] = engine_ours.bench_engine(BIN, self.model, [1, 8], 16, 3, 1, device="cpu")
        s = engine_report.summarize(r, batches=[8])
        self.assertGreater(s["decode_tok_s"]["ours"], 0)
        self.assertGreater(s["ttft_ms"]["512"]["ours"], 0)
        self.assertGreater(s["batched"]["8"]["decode_tok_s"], 0)
        self.assertTrue(s["memory"]["ours_within_bound"])  # the CPU has no driver figure: 0 <= bound
        engine_report.markdown(r, s)


if __name__ == "__main__":
    unittest.main(verbosity=2)
