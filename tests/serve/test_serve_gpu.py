"""`flashport serve --device gpu` against the embedded model: tokens chosen on the GPU.

On a GPU engine the server draws sampled tokens where the model runs (Engine::set_sampling, steps
with StepOutput::SAMPLED), as `generate` does, so for one request alone:
- sampled: a seed gives the same completion twice, and the same tokens as `generate` with that seed
  (both use the sample op, whose uniform number comes from the seed and the token's position);
- greedy with a repetition penalty: the same tokens as `generate`;
- a request with logprobs still gets them (its steps bring the logits to the host);
- sampled requests running together each finish with a well-formed completion.

Exit 77 (ctest's skip) with a "skipped:" line when the binary has no GPU backend or no GPU is
visible (CI's CPU machine); scripts/gpu/h200.sh serve-check runs it on the H200. Stdlib only.
"""
import json
import os
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_harness import BIN, MODEL, Server, main  # noqa: E402

COMP = "/v1/completions"
PROMPT = "In the beginning God created"
SAMPLED = {"temperature": 0.8, "top_k": 20, "top_p": 0.9, "min_p": 0.02, "repetition_penalty": 1.05}


def gpu_available():
    # doctor exits 1 when any of its checks fails (a small /dev/shm, say): only gpu.visible matters here.
    r = subprocess.run([BIN, "doctor", "--json"], capture_output=True, text=True, timeout=60)
    try:
        gpu = [c for c in json.loads(r.stdout)["checks"] if c["id"] == "gpu.visible"]
    except (ValueError, KeyError):
        gpu = []
    if not gpu:
        return False, "flashport doctor failed: " + (r.stderr.strip()[-200:] or "no gpu.visible check")
    if gpu[0]["status"] != "ok":
        return False, "no GPU for this build (%s: %s)" % (BIN, gpu[0]["found"])
    return True, ""


def generate_ids(settings, seed, max_tokens):
    args = [BIN, "generate", "--model", MODEL, "--device", "gpu", "--prompt", PROMPT, "--max-tokens", str(max_tokens),
            "--ignore-eos", "--json", "--seed", str(seed)]
    for k, v in settings.items():
        args += ["--" + k.replace("_", "-"), str(v)]
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)["generated_ids"]


def completion(srv, settings, seed, max_tokens, **extra):
    body = {"prompt": PROMPT, "max_tokens": max_tokens, "ignore_eos": True, "seed": seed, **settings, **extra}
    s, r = srv.post_json(COMP, body)
    assert s == 200, r
    return r


def detokenize(srv, ids):
    s, _, data = srv.request("POST", "/detokenize", {"tokens": ids})
    assert s == 200, data
    return json.loads(data)["prompt"]


def test_sampled_matches_generate():
    with Server("--device", "gpu") as srv:
        for settings in (SAMPLED, {"temperature": 0, "repetition_penalty": 1.3}):
            r1 = completion(srv, settings, 11, 24)
            r2 = completion(srv, settings, 11, 24)
            text = r1["choices"][0]["text"]
            assert text == r2["choices"][0]["text"], (r1, r2)
            ids = generate_ids(settings, 11, 24)
            assert detokenize(srv, ids) == text, (settings, ids, text)


def test_logprobs_and_concurrent():
    with Server("--device", "gpu", "--parallel", "4") as srv:
        r = completion(srv, SAMPLED, 3, 8, logprobs=2)
        lp = r["choices"][0]["logprobs"]
        assert len(lp["tokens"]) == 8 and all(len(t) >= 1 for t in lp["top_logprobs"]), lp
        out, errors = {}, []

        def run(i):
            try:
                out[i] = completion(srv, SAMPLED if i % 2 else {"temperature": 0}, 100 + i, 16)
            except Exception as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors
        for i in range(4):
            assert out[i]["usage"]["completion_tokens"] == 16, out[i]


if __name__ == "__main__":
    ok, why = gpu_available()
    if not ok:
        print("skipped: " + why)
        sys.exit(77)
    main({"sampled_matches_generate": test_sampled_matches_generate,
          "logprobs_and_concurrent": test_logprobs_and_concurrent})
