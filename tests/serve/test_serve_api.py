"""`flashport serve` against the embedded model: every endpoint, the error cases, scoring (echo with
prompt logprobs, batched prompts: lm-evaluation-harness's requests), the API key, queue-full 503, a disconnect freeing KV blocks, SIGTERM. Stdlib only; each test starts its own
server on a free loopback port.  ctest --test-dir build/cpu -R serve_
"""
import json
import signal
import socket
import subprocess
import threading
import time

from serve_harness import BIN, MODEL, Server, main, stream

CHAT = "/v1/chat/completions"
COMP = "/v1/completions"


def expect_error(server, path, body, status, fragment, param=None, headers=None):
    s, h, data = server.request("POST", path, body, headers)
    assert s == status, (s, data)
    err = json.loads(data)["error"]
    assert set(err) == {"message", "type", "param", "code"}, err
    assert fragment.lower() in err["message"].lower(), (fragment, err)
    if param is not None:
        assert err["param"] == param, err
    return err


def test_endpoints():
    with Server() as srv:
        s, _, data = srv.request("GET", "/health")
        assert s == 200 and json.loads(data)["status"] == "ok"
        s, _, data = srv.request("GET", "/v1/models")
        models = json.loads(data)
        assert s == 200 and models["object"] == "list" and models["data"][0]["id"] == "tiny-kjv"

        s, r = srv.post_json(COMP, {"model": "tiny-kjv", "prompt": "In the beginning", "max_tokens": 8,
                                    "temperature": 0})
        assert s == 200, r
        assert r["object"] == "text_completion" and r["id"].startswith("cmpl-") and r["model"] == "tiny-kjv"
        assert isinstance(r["created"], int)
        assert r["usage"] == {"prompt_tokens": 4, "completion_tokens": 8, "total_tokens": 12}, r["usage"]
        assert r["choices"][0]["finish_reason"] == "length" and r["choices"][0]["text"]
        greedy = r["choices"][0]["text"]

        # The same greedy text streamed, with usage at the end.
        text, finish, usage, _ = stream(srv, COMP, {"prompt": "In the beginning", "max_tokens": 8, "temperature": 0,
                                                    "stream": True, "stream_options": {"include_usage": True}})
        assert text == greedy and finish == "length" and usage["completion_tokens"] == 8, (text, greedy)
        # A prompt given as token ids.
        s, tok = srv.post_json("/tokenize", {"prompt": "In the beginning"})
        assert s == 200 and tok["count"] == 4
        s, r = srv.post_json(COMP, {"prompt": tok["tokens"], "max_tokens": 8, "temperature": 0})
        assert r["choices"][0]["text"] == greedy
        s, d = srv.post_json("/detokenize", {"tokens": tok["tokens"]})
        assert s == 200 and d["prompt"] == "In the beginning", d

        # A stop string cuts the text before it and ends with "stop".
        stop = greedy.strip().split()[1]
        s, r = srv.post_json(COMP, {"prompt": "In the beginning", "max_tokens": 8, "temperature": 0, "stop": [stop]})
        assert r["choices"][0]["finish_reason"] == "stop" and stop not in r["choices"][0]["text"], (stop, r)

        # Chat: string content and text parts; sampling fields; the same seed gives the same text.
        body = {"messages": [{"role": "system", "content": "KJV"},
                             {"role": "user", "content": [{"type": "text", "text": "And God said"}]}],
                "max_completion_tokens": 12, "temperature": 0.9, "top_p": 0.9, "top_k": 20, "min_p": 0.05,
                "seed": 7, "n": 1}
        s1, r1 = srv.post_json(CHAT, body)
        s2, r2 = srv.post_json(CHAT, body)
        assert s1 == s2 == 200, (r1, r2)
        assert r1["object"] == "chat.completion" and r1["choices"][0]["message"]["role"] == "assistant"
        assert r1["choices"][0]["message"]["content"] == r2["choices"][0]["message"]["content"]
        assert r1["choices"][0]["finish_reason"] in ("stop", "length")

        text, finish, usage, chunks = stream(srv, CHAT, {**body, "stream": True,
                                                         "stream_options": {"include_usage": True}})
        assert text == r1["choices"][0]["message"]["content"] and usage == r1["usage"], (text, r1)

        # Logprobs: chat's content list, the completions' legacy form.
        s, r = srv.post_json(CHAT, {"messages": "Hi" and [{"role": "user", "content": "Hi"}], "max_tokens": 3,
                                    "logprobs": True, "top_logprobs": 2, "temperature": 0})
        lp = r["choices"][0]["logprobs"]["content"]
        assert len(lp) == 3 and all(len(t["top_logprobs"]) == 2 and t["logprob"] <= 0 for t in lp), lp
        s, r = srv.post_json(COMP, {"prompt": "Hi", "max_tokens": 3, "logprobs": 1, "temperature": 0})
        lp = r["choices"][0]["logprobs"]
        assert len(lp["tokens"]) == 3 and len(lp["token_logprobs"]) == 3, lp

        m = srv.metrics()
        assert m['flashport_requests_total{status="200"}'] >= 10, m
        assert m["flashport_generated_tokens_total"] > 0 and m["flashport_prompt_tokens_total"] > 0
        assert m["flashport_time_to_first_token_seconds_count"] > 0
        assert m["flashport_inter_token_latency_seconds_count"] > 0
        assert m["flashport_kv_blocks_free"] > 0 and m["flashport_kv_blocks_used"] == 0


def test_errors():
    with Server("--max-body", "0.0625") as srv:  # 64 KiB
        expect_error(srv, COMP, b'{"prompt": "x",', 400, "invalid JSON")
        expect_error(srv, COMP, b"[" * 5000, 400, "nest")  # nesting past the JSON reader's limit
        expect_error(srv, COMP, b"[1, 2]", 400, "must be a JSON object")
        expect_error(srv, COMP, b'{"prompt": "\xff\xfe"}', 400, "utf-8")
        expect_error(srv, COMP, b'{"prompt": "x", "prompt": "y"}', 400, "duplicate key")
        expect_error(srv, COMP, {"prompt": "x", "temperature": "hot"}, 400, "must be a number", "temperature")
        expect_error(srv, COMP, {"prompt": 5}, 400, "must be a string", "prompt")
        expect_error(srv, COMP, {"prompt": "x", "max_tokens": -1}, 400, "max_tokens", "max_tokens")
        expect_error(srv, COMP, {"prompt": "x", "max_tokens": 10**30}, 400, "max_tokens", "max_tokens")
        expect_error(srv, COMP, {"prompt": "x", "max_tokens": 1.5}, 400, "integer", "max_tokens")
        expect_error(srv, COMP, {"prompt": "x", "max_tokens": 256}, 400, "context length", "max_tokens")
        expect_error(srv, COMP, {"prompt": [1] * 300}, 400, "context length", "prompt")
        expect_error(srv, COMP, {"prompt": [99999]}, 400, "outside the vocabulary", "prompt")
        expect_error(srv, COMP, {"prompt": ""}, 400, "empty", "prompt")
        expect_error(srv, COMP, {"prompt": "x", "n": 0}, 400, "n", "n")
        expect_error(srv, COMP, {"prompt": "x", "frobnicate": 1}, 400, "Unrecognized request argument", "frobnicate")
        expect_error(srv, COMP, {"prompt": "x", "stop": [1]}, 400, "stop", "stop")
        expect_error(srv, COMP, {"prompt": "x", "top_p": 2}, 400, "top_p", "top_p")
        expect_error(srv, COMP, {"prompt": "x", "stream_options": {"include_usage": True}}, 400, "stream")
        err = expect_error(srv, COMP, {"prompt": "x", "model": "gpt-4"}, 404, "does not exist", "model")
        assert err["code"] == "model_not_found"
        expect_error(srv, CHAT, {"messages": []}, 400, "at least one", "messages")
        expect_error(srv, CHAT, {"messages": [{"role": "wizard", "content": "x"}]}, 400, "role")
        expect_error(srv, CHAT, {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400, "text")
        expect_error(srv, CHAT, {"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2}, 400, "logprobs")
        expect_error(srv, COMP, b"x" * 100000, 413, "limit")
        s, _, data = srv.request("GET", "/no/such/route")
        assert s == 404 and "error" in json.loads(data)
        s, _, data = srv.request("POST", "/tokenize", {"prompt": 1})
        assert s == 400
        s, _, data = srv.request("POST", "/detokenize", {"tokens": [-1]})
        assert s == 400
        # Still serving.
        s, r = srv.post_json(COMP, {"prompt": "x", "max_tokens": 2})
        assert s == 200 and r["usage"]["completion_tokens"] >= 1, r
        assert srv.metrics()['flashport_requests_total{status="400"}'] >= 20


# What lm-evaluation-harness's local-completions model sends: prompts as a batch of token-id lists,
# and for loglikelihood echo + logprobs 1 + max_tokens 1, reading token_logprobs[ctxlen:-1].
SCORED_TEXT = ("In the beginning God created the heaven and the earth. And the earth was without form, "
               "and void; and darkness was upon the face of the deep.")


def test_scoring():
    # 16-token steps: the prompt's rows come back over several prefill chunks.
    with Server("--max-step-tokens", "16", "--parallel", "2", "--max-queue", "4") as srv:
        s, tok = srv.post_json("/tokenize", {"prompt": SCORED_TEXT})
        ids = tok["tokens"]
        assert s == 200 and len(ids) > 32, tok
        out = subprocess.run([BIN, "perplexity", "--model", MODEL, "--file", "/dev/stdin", "--json"],
                             input=SCORED_TEXT, capture_output=True, text=True, check=True)
        want = json.loads(out.stdout)["target_logprobs"]  # positions 1..n-1, teacher-forced, one pass
        assert len(want) == len(ids) - 1

        s, r = srv.post_json(COMP, {"prompt": [ids], "max_tokens": 1, "logprobs": 1, "echo": True,
                                    "temperature": 0, "seed": 1234})
        assert s == 200, r
        c = r["choices"][0]
        lp = c["logprobs"]
        assert len(lp["tokens"]) == len(ids) + 1 and len(lp["token_logprobs"]) == len(ids) + 1, lp
        assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None, lp
        for k, (got, ref) in enumerate(zip(lp["token_logprobs"][1:len(ids)], want)):
            assert abs(got - ref) < 1e-3, (k + 1, got, ref)  # fp32 both; chunked vs whole prefill
        for top in lp["top_logprobs"][1:]:
            assert len(top) == 1 and all(v <= 0 for v in top.values()), top
        # Greedy: the generated token is the best one, and the text is the prompt's then the reply's.
        assert lp["token_logprobs"][-1] == max(lp["top_logprobs"][-1].values()), lp
        assert c["text"].startswith(SCORED_TEXT) and c["text"] == "".join(lp["tokens"]), c["text"]
        assert lp["text_offset"][:2] == [0, len(lp["tokens"][0])], lp["text_offset"]
        assert r["usage"] == {"prompt_tokens": len(ids), "completion_tokens": 1, "total_tokens": len(ids) + 1}

        # Scoring only (max_tokens 0 with echo), and echo without logprobs.
        s, r = srv.post_json(COMP, {"prompt": ids, "max_tokens": 0, "logprobs": 0, "echo": True})
        c = r["choices"][0]
        assert s == 200 and c["text"] == SCORED_TEXT and c["finish_reason"] == "length", r
        assert r["usage"]["completion_tokens"] == 0 and len(c["logprobs"]["tokens"]) == len(ids), r
        assert all(t == {} for t in c["logprobs"]["top_logprobs"][1:]), c["logprobs"]["top_logprobs"]
        s, r = srv.post_json(COMP, {"prompt": "And God said", "max_tokens": 0, "echo": True})
        assert s == 200 and r["choices"][0]["text"] == "And God said" and r["choices"][0]["logprobs"] is None, r
        s, greedy = srv.post_json(COMP, {"prompt": "And God said", "max_tokens": 4, "temperature": 0})
        s, r = srv.post_json(COMP, {"prompt": "And God said", "max_tokens": 4, "temperature": 0, "echo": True})
        assert r["choices"][0]["text"] == "And God said" + greedy["choices"][0]["text"], (r, greedy)
        body = {"prompt": "And God said", "max_tokens": 4, "temperature": 0, "echo": True, "logprobs": 0}
        text, finish, _, _ = stream(srv, COMP, {**body, "stream": True})
        assert text == r["choices"][0]["text"] and finish == "length", text
        # The stream's logprobs, chunk after chunk, are the whole reply's, text_offset counting on.
        s, whole = srv.post_json(COMP, body)
        s, _, raw = srv.request("POST", COMP, {**body, "stream": True})
        events = [json.loads(line[6:]) for line in raw.decode().split("\n")
                  if line.startswith("data: {")]
        parts = [e["choices"][0]["logprobs"] for e in events if e["choices"] and e["choices"][0]["logprobs"]]
        streamed = {k: sum((p[k] for p in parts), []) for k in ("tokens", "text_offset", "token_logprobs")}
        want_lp = whole["choices"][0]["logprobs"]
        assert streamed == {k: want_lp[k] for k in streamed}, (streamed, want_lp)

        # A batch of prompts (more than --parallel): one choice each, in order, each as if alone.
        prompts = ["In the", "And God said", "The LORD is", "Blessed are"]
        alone = [srv.post_json(COMP, {"prompt": p, "max_tokens": 5, "temperature": 0})[1] for p in prompts]
        s, r = srv.post_json(COMP, {"prompt": prompts, "max_tokens": 5, "temperature": 0})
        assert s == 200 and [c["index"] for c in r["choices"]] == [0, 1, 2, 3], r
        assert [c["text"] for c in r["choices"]] == [a["choices"][0]["text"] for a in alone], (r, alone)
        assert r["usage"]["completion_tokens"] == sum(a["usage"]["completion_tokens"] for a in alone)
        assert r["usage"]["prompt_tokens"] == sum(a["usage"]["prompt_tokens"] for a in alone)
        s, tok2 = srv.post_json("/tokenize", {"prompt": "The LORD is"})
        s, r2 = srv.post_json(COMP, {"prompt": [ids[:5], tok2["tokens"]], "max_tokens": 3, "temperature": 0,
                                     "echo": True, "logprobs": 2})
        assert s == 200 and len(r2["choices"]) == 2, r2
        assert r2["choices"][1]["text"].startswith("The LORD is"), r2
        for got, ref in zip(r2["choices"][0]["logprobs"]["token_logprobs"][1:5], lp["token_logprobs"][1:5]):
            assert abs(got - ref) < 1e-3, (got, ref)  # batched with another prompt: other GEMM shapes

        # The remote tokenizer lm-evaluation-harness can use instead of downloading one: /tokenizer_info,
        # and /tokenize reading special-token text as a completion prompt is read (chat content is not).
        s, info = srv.post_json("/tokenize", {"prompt": "<|endoftext|>", "add_special_tokens": False})
        assert s == 200 and info["tokens"] == [2045], info
        s, _, data = srv.request("GET", "/tokenizer_info")
        info = json.loads(data)
        assert s == 200 and info["eos_token"] == "<|endoftext|>" and info["bos_token"] is None, info
        assert info["model_max_length"] == 256 and info["chat_template"] is None, info
        s, r = srv.post_json(COMP, {"prompt": "And God said<|endoftext|>", "max_tokens": 0, "echo": True,
                                    "logprobs": 0})
        assert s == 200 and r["choices"][0]["logprobs"]["tokens"][-1] == "<|endoftext|>", r
        s, r = srv.post_json(CHAT, {"messages": [{"role": "user", "content": "<|endoftext|>"}], "max_tokens": 1})
        assert s == 200 and r["usage"]["prompt_tokens"] > 2, r  # the text, not the control token
        expect_error(srv, "/tokenize", {"prompt": "a", "add_special_tokens": 1}, 400, "boolean")

        # n choices a prompt: choice j is sampled from seed + j, as a request with that seed alone; a
        # prompt's tokens count once in usage. Choice i · n + j is prompt i's j-th.
        body = {"prompt": "And God said", "max_tokens": 6, "temperature": 0.9, "top_k": 50}
        s, r = srv.post_json(COMP, {**body, "n": 3, "seed": 7})
        assert s == 200 and [c["index"] for c in r["choices"]] == [0, 1, 2], r
        alone = [srv.post_json(COMP, {**body, "seed": 7 + j})[1] for j in range(3)]
        assert [c["text"] for c in r["choices"]] == [a["choices"][0]["text"] for a in alone], (r, alone)
        assert r["usage"]["prompt_tokens"] == alone[0]["usage"]["prompt_tokens"], r["usage"]
        assert r["usage"]["completion_tokens"] == sum(a["usage"]["completion_tokens"] for a in alone)
        s, r = srv.post_json(CHAT, {"messages": [{"role": "user", "content": "And God said"}], "max_tokens": 4,
                                    "temperature": 0, "n": 2})
        assert s == 200 and len(r["choices"]) == 2, r
        assert r["choices"][0]["message"] == r["choices"][1]["message"], r  # greedy: the same text twice
        s, r = srv.post_json(COMP, {"prompt": ["In the", "And God said"], "max_tokens": 3, "temperature": 0, "n": 2})
        texts = [c["text"] for c in r["choices"]]
        assert s == 200 and texts[0] == texts[1] and texts[2] == texts[3] and texts[0] != texts[2], r

        # logit_bias: -100 bans greedy's first token, +100 forces a token; presence and frequency
        # penalties: each greedy pick is the best of the top 5 after its penalty for what came before.
        # (repetition_penalty 1: the folder's generation_config asks for 1.1, which would shift them too)
        base = {"prompt": "And God said", "max_tokens": 4, "temperature": 0, "ignore_eos": True,
                "repetition_penalty": 1}
        s, r0 = srv.post_json(COMP, {**base, "logprobs": 0})
        t0 = srv.post_json("/tokenize", {"prompt": r0["choices"][0]["logprobs"]["tokens"][0]})[1]["tokens"]
        s, r = srv.post_json(COMP, {**base, "logprobs": 0, "logit_bias": {str(t0[0]): -100}})
        assert s == 200 and r["choices"][0]["logprobs"]["tokens"][0] != r0["choices"][0]["logprobs"]["tokens"][0], r
        the = srv.post_json("/tokenize", {"prompt": " the"})[1]["tokens"]
        s, r = srv.post_json(COMP, {**base, "logit_bias": {str(the[0]): 100}})
        assert s == 200 and r["choices"][0]["text"] == " the" * 4, r
        s, r = srv.post_json(COMP, {**base, "max_tokens": 24, "logprobs": 5, "presence_penalty": 0.5,
                                    "frequency_penalty": 1.0})
        lp = r["choices"][0]["logprobs"]
        seen = {}
        for tok, chosen, top in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"]):
            score = lambda t, v: v - (0.5 + 1.0 * seen[t] if t in seen else 0)  # noqa: E731
            assert all(score(tok, chosen) >= score(t, v) - 1e-4 for t, v in top.items()), (tok, top, seen)
            seen[tok] = seen.get(tok, 0) + 1
        assert max(seen.values()) < 24, seen
        expect_error(srv, COMP, {**base, "logit_bias": {"x": 1}}, 400, "token id", "logit_bias")
        expect_error(srv, COMP, {**base, "logit_bias": {"99999": 1}}, 400, "token id", "logit_bias")
        expect_error(srv, COMP, {**base, "logit_bias": {"5": 101}}, 400, "[-100, 100]", "logit_bias")
        expect_error(srv, COMP, {**base, "logit_bias": {str(i): 1 for i in range(301)}}, 400, "at most 300")
        expect_error(srv, COMP, {**base, "presence_penalty": 3}, 400, "presence_penalty", "presence_penalty")

        expect_error(srv, COMP, {"prompt": ["a", [1]]}, 400, "only strings or only arrays", "prompt")
        expect_error(srv, COMP, {"prompt": [[1], [1.5]]}, 400, "integers", "prompt")
        expect_error(srv, COMP, {"prompt": [[1], []]}, 400, "prompt[1] is empty", "prompt")
        expect_error(srv, COMP, {"prompt": ["a", "b"], "stream": True}, 400, "one prompt", "stream")
        expect_error(srv, COMP, {"prompt": "a", "max_tokens": 0}, 400, "max_tokens", "max_tokens")
        expect_error(srv, COMP, {"prompt": ["a"] * 7}, 400, "at most", "prompt")  # --parallel 2 + --max-queue 4
        expect_error(srv, COMP, {"prompt": ["a"] * 65}, 400, "at most 64", "prompt")
        expect_error(srv, COMP, {"prompt": ["a"] * 8, "n": 9}, 400, "at most 64", "n")
        expect_error(srv, COMP, {"prompt": "a", "n": 7}, 400, "at most", "n")  # --parallel 2 + --max-queue 4
        expect_error(srv, CHAT, {"messages": [{"role": "user", "content": "x"}], "n": 2, "stream": True}, 400,
                     "one choice", "stream")
        expect_error(srv, COMP, {"prompt": "a", "echo": 1}, 400, "boolean", "echo")
        expect_error(srv, CHAT, {"messages": [{"role": "user", "content": "x"}], "echo": True}, 400,
                     "Unrecognized", "echo")
        m = srv.metrics()
        assert m["flashport_kv_blocks_used"] == 0, m


def test_tools():
    """Tool calling through a copy of the embedded model given Qwen3's chat template (its tokenizer has
    <|im_start|> and <|im_end|>). The demo model never writes a call: this checks the request side (tools
    and tool turns accepted and rendered) and that a reply without calls is unchanged, whole and
    streamed. The prompts' exact form and the reply parser are test_tool_calls's."""
    import os
    import shutil
    import tempfile
    root = os.path.dirname(os.path.abspath(__file__))
    template = json.load(open(os.path.join(root, "..", "data", "tokenizer", "qwen3", "tokenizer_config.json")))
    with tempfile.TemporaryDirectory() as d:
        folder = os.path.join(d, "kjv-chat")
        shutil.copytree(MODEL, folder)
        cfg_path = os.path.join(folder, "tokenizer_config.json")
        cfg = json.load(open(cfg_path))
        cfg["chat_template"] = template["chat_template"]
        json.dump(cfg, open(cfg_path, "w"))
        model_cfg_path = os.path.join(folder, "config.json")  # room for the tools' system turn (~300 tokens)
        model_cfg = json.load(open(model_cfg_path))
        model_cfg["max_position_embeddings"] = 1024
        json.dump(model_cfg, open(model_cfg_path, "w"))
        with Server(model=folder) as srv:
            weather = {"type": "function", "function": {"name": "get_weather", "parameters": {
                "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
            msgs = [{"role": "user", "content": "And God said"}]
            base = {"model": "kjv-chat", "max_tokens": 8, "temperature": 0}
            s, plain = srv.post_json(CHAT, {**base, "messages": msgs})
            s, r = srv.post_json(CHAT, {**base, "messages": msgs, "tools": [weather]})
            assert s == 200, r
            m = r["choices"][0]["message"]
            assert m["role"] == "assistant" and "tool_calls" not in m and isinstance(m["content"], str), r
            assert r["usage"]["prompt_tokens"] > plain["usage"]["prompt_tokens"] + 40, (r["usage"], plain["usage"])
            text, finish, _, _ = stream(srv, CHAT, {**base, "messages": msgs, "tools": [weather], "stream": True})
            assert text == m["content"] and finish == r["choices"][0]["finish_reason"], (text, m)
            s, none = srv.post_json(CHAT, {**base, "messages": msgs, "tools": [weather], "tool_choice": "none"})
            assert none["usage"]["prompt_tokens"] == plain["usage"]["prompt_tokens"], none
            # A conversation that called a tool and got its result.
            history = msgs + [
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Ur\"}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "hot"}]
            s, r = srv.post_json(CHAT, {**base, "messages": history, "tools": [weather]})
            assert s == 200 and r["choices"][0]["message"]["role"] == "assistant", r
            expect_error(srv, CHAT, {**base, "messages": msgs, "tools": [weather], "tool_choice": "required"}, 400,
                         "tool_choice", "tool_choice")
        # The embedded model has no chat template at all: tools are refused, saying why.
        with Server() as srv:
            expect_error(srv, CHAT, {"messages": [{"role": "user", "content": "x"}], "tools": [
                {"type": "function", "function": {"name": "f"}}]}, 400, "no chat template", "tools")


def test_json_mode():
    """JSON mode (response_format json_object): each token continues one JSON object, and the reply ends,
    with "stop", when the object closes. The demo model knows no JSON, so logit_bias steers it where a test
    needs a closed object; unsteered, its reply must still open one. The recogniser and the token choice
    have their own tests (test_json_constraint)."""
    with Server() as srv:
        ids = {}
        for t in ["{", "}", "\"", ":"]:
            s, tok = srv.post_json("/tokenize", {"prompt": t})
            assert s == 200 and len(tok["tokens"]) == 1, (t, tok)
            ids[t] = tok["tokens"][0]
        fmt = {"response_format": {"type": "json_object"}}
        msgs = [{"role": "user", "content": "And God said"}]

        def reply(path, body):
            s, r = srv.post_json(path, {**body, **fmt})
            assert s == 200, r
            return r, [c["message"]["content"] if path == CHAT else c["text"] for c in r["choices"]]

        # '{' and '}' the best valid tokens: "{}", two tokens, on both endpoints, greedy and sampled (n = 2).
        braces = {str(ids["{"]): 100, str(ids["}"]): 100}
        for path, body in ((CHAT, {"messages": msgs}), (COMP, {"prompt": "In the beginning"})):
            r, texts = reply(path, {**body, "logit_bias": braces, "max_tokens": 50, "temperature": 0})
            assert texts == ["{}"] and r["choices"][0]["finish_reason"] == "stop", r
            assert r["usage"]["completion_tokens"] == 2, r
            r, texts = reply(path, {**body, "logit_bias": braces, "max_tokens": 50, "temperature": 1, "seed": 4, "n": 2})
            assert texts == ["{}", "{}"] and all(c["finish_reason"] == "stop" for c in r["choices"]), r
        # '"' first, then the other marks: a key, a value, closed ('{"":""}'); each pick among the valid tokens.
        steer = {str(ids[t]): 100 if t == '"' else 50 for t in ids}
        r, texts = reply(CHAT, {"messages": msgs, "logit_bias": steer, "max_tokens": 50, "temperature": 0})
        assert isinstance(json.loads(texts[0]), dict) and r["choices"][0]["finish_reason"] == "stop", r
        text, finish, _, _ = stream(srv, CHAT, {"messages": msgs, "logit_bias": steer, "max_tokens": 50,
                                                "temperature": 0, "stream": True, **fmt})
        assert (text, finish) == (texts[0], "stop"), (text, texts)
        # Unsteered: at most 32 bytes of whitespace in a row, so 40 tokens reach the object's '{'.
        r, texts = reply(CHAT, {"messages": msgs, "max_tokens": 40, "temperature": 0})
        assert texts[0].lstrip(" \t\r\n").startswith("{"), texts
        assert r["choices"][0]["finish_reason"] == "length" or isinstance(json.loads(texts[0]), dict), r
        # "text" is the default; a schema and unknown types are refused, saying why.
        s, plain = srv.post_json(CHAT, {"messages": msgs, "max_tokens": 8, "temperature": 0})
        s, text_fmt = srv.post_json(CHAT, {"messages": msgs, "max_tokens": 8, "temperature": 0,
                                           "response_format": {"type": "text"}})
        assert s == 200 and text_fmt["choices"] == plain["choices"], (text_fmt, plain)
        schema = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}
        expect_error(srv, CHAT, {"messages": msgs, "response_format": schema}, 400, "json_schema", "response_format.type")
        expect_error(srv, CHAT, {"messages": msgs, "response_format": {"type": "xml"}}, 400, "xml", "response_format.type")
        expect_error(srv, CHAT, {"messages": msgs, "response_format": "json"}, 400, "an object", "response_format")
        expect_error(srv, COMP, {"prompt": "x", "response_format": {}}, 400, "needs a 'type'", "response_format")


def test_api_key():
    with Server("--api-key", "s3cret") as srv:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"},
                        {"Authorization": "Bearer s3cret2"}):
            for method, path in (("GET", "/v1/models"), ("POST", COMP), ("POST", "/tokenize")):
                s, _, data = srv.request(method, path, {"prompt": "x"} if method == "POST" else None, headers)
                assert s == 401, (headers, path, s)
                assert json.loads(data)["error"]["code"] == "invalid_api_key"
        ok = {"Authorization": "Bearer s3cret"}
        s, _, _ = srv.request("GET", "/v1/models", None, ok)
        assert s == 200
        s, r = srv.post_json(COMP, {"prompt": "x", "max_tokens": 2}, ok)
        assert s == 200, r
        assert srv.request("GET", "/health")[0] == 200  # probes need no key
        assert srv.request("GET", "/metrics")[0] == 200


def long_stream_socket(srv, max_tokens=250):
    """A raw socket with a streaming request that runs to max_tokens (EOS ignored)."""
    body = json.dumps({"prompt": "In the beginning", "max_tokens": max_tokens, "ignore_eos": True,
                       "stream": True}).encode()
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
    return s


def test_queue_full():
    # One running slot, one queue place: a third request while both are taken is refused.
    with Server("--parallel", "1", "--max-queue", "1") as srv:
        for attempt in range(5):
            a = long_stream_socket(srv)
            a.recv(100)  # running
            b = long_stream_socket(srv)
            deadline = time.time() + 2
            while srv.metrics()["flashport_queue_length"] < 1 and time.time() < deadline:
                time.sleep(0.005)
            s, h, data = srv.request("POST", COMP, {"prompt": "x", "max_tokens": 2})
            a.close()
            b.close()
            if s == 503:
                assert h.get("retry-after") == "1", h
                assert json.loads(data)["error"]["code"] == "queue_full"
                break
        else:
            raise AssertionError("never saw a 503 with a full queue")
        srv.wait_idle()


def test_kv_pool():
    # A 64-token pool: a request whose worst case exceeds it can never run (400); two that each need
    # most of it run one after the other (the second waits in the queue), both complete.
    with Server("--ctx", "64", "--parallel", "4") as srv:
        assert srv.metrics()["flashport_kv_blocks_free"] == 4
        err = expect_error(srv, COMP, {"prompt": "In the beginning", "max_tokens": 100}, 400, "pool", "max_tokens")
        assert err["code"] == "context_length_exceeded"
        results = []

        def one():
            results.append(stream(srv, COMP, {"prompt": "In the beginning", "max_tokens": 40, "ignore_eos": True,
                                              "stream": True, "stream_options": {"include_usage": True}}))

        threads = [threading.Thread(target=one) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert len(results) == 3 and all(r[2]["completion_tokens"] == 40 for r in results), results
        srv.wait_idle()


def test_no_queue():
    # --max-queue 0: requests that find a free slot run; none wait.
    with Server("--parallel", "2", "--max-queue", "0") as srv:
        s, r = srv.post_json(COMP, {"prompt": "x", "max_tokens": 2})
        assert s == 200, r
        a = long_stream_socket(srv)
        b = long_stream_socket(srv)
        a.recv(100)
        b.recv(100)
        s, h, data = srv.request("POST", COMP, {"prompt": "x", "max_tokens": 2})
        a.close()
        b.close()
        assert s in (503, 200), s  # 200 only if a stream ended first
        srv.wait_idle()


def test_disconnect_frees_kv():
    with Server("--parallel", "2") as srv:
        base = srv.wait_idle()
        socks = [long_stream_socket(srv) for _ in range(2)]
        for s in socks:
            assert s.recv(100).startswith(b"HTTP/1.1 200")
        m = srv.metrics()
        for s in socks:
            s.close()
        after = srv.wait_idle(timeout=10)
        generated = after["flashport_generated_tokens_total"] - base["flashport_generated_tokens_total"]
        # Cancelled: far fewer than the 2 x 250 tokens the requests asked for.
        assert generated < 400, generated
        assert after["flashport_kv_blocks_free"] == base["flashport_kv_blocks_free"]


def test_disconnect_nonstream():
    # One slot: a long stream runs and three more wait; a non-streaming request waits behind them, and
    # its client leaves. The server notices from the socket (no write to fail) within 250 ms, counts
    # it as 499, and never runs it: the tokens generated are the streams' alone, and every KV block
    # comes back. The streams ahead (800 tokens) outlast the check on a fast machine too.
    with Server("--parallel", "1") as srv:
        base = srv.wait_idle()
        ahead = [long_stream_socket(srv, max_tokens=200) for _ in range(4)]
        assert ahead[0].recv(100).startswith(b"HTTP/1.1 200")
        deadline = time.time() + 20
        while srv.metrics()["flashport_queue_length"] < 3 and time.time() < deadline:
            time.sleep(0.005)
        body = json.dumps({"prompt": "In the beginning", "max_tokens": 200, "ignore_eos": True}).encode()
        b = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        b.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        while srv.metrics()["flashport_queue_length"] < 4 and time.time() < deadline:
            time.sleep(0.005)
        assert srv.metrics()["flashport_queue_length"] == 4
        b.close()
        while srv.metrics().get('flashport_requests_total{status="499"}', 0) < 1 and time.time() < deadline:
            time.sleep(0.02)
        assert srv.metrics().get('flashport_requests_total{status="499"}', 0) == 1, srv.metrics()
        for a in ahead:
            while a.recv(65536):  # each stream runs to its end
                pass
            a.close()
        after = srv.wait_idle(timeout=10)
        generated = after["flashport_generated_tokens_total"] - base["flashport_generated_tokens_total"]
        assert generated == 800, generated  # the streams' 4 x 200; the departed request never ran
        assert after["flashport_kv_blocks_free"] == base["flashport_kv_blocks_free"]


def test_health_while_loading():
    # The socket is bound before the model loads (~0.4 s for tiny-kjv with its warm-up), so a probe
    # right after "listening" sees 503; a few launches allow for a machine fast enough to win the race.
    import http.client
    import re
    import subprocess
    from serve_harness import BIN, MODEL
    for _ in range(5):
        proc = subprocess.Popen([BIN, "serve", "--model", MODEL, "--port", "0"], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
        try:
            port = int(re.search(r":(\d+) ", proc.stdout.readline()).group(1))
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            c.request("GET", "/health")
            r = c.getresponse()
            body = json.loads(r.read())
            if r.status == 503:
                assert body == {"status": "loading"}, body
                c.request("POST", COMP, body=b'{"prompt": "x"}')
                r = c.getresponse()
                err = json.loads(r.read())["error"]
                assert r.status in (503, 200), r.status  # 200 when loading ended in between
                if r.status == 503:
                    assert err["code"] == "model_loading", err
                assert "ready" in proc.stdout.readline()
                c.request("GET", "/health")
                r = c.getresponse()
                assert r.status == 200 and json.loads(r.read()) == {"status": "ok"}
                return
            assert r.status == 200 and body == {"status": "ok"}, (r.status, body)
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
    raise AssertionError("never saw /health answer 503 while loading")


def test_sigterm():
    # Four streams, two running and two queued (--parallel 2), when SIGTERM comes: the running ones
    # finish (the drain), the queued ones end with a "server shutting down" event; every stream ends
    # with [DONE] and the server exits 0.
    srv = Server("--parallel", "2")
    with srv:
        results = []

        def client():
            try:
                results.append(stream(srv, COMP, {"prompt": "In", "max_tokens": 200, "ignore_eos": True,
                                                  "stream": True}, allow_shutdown=True))
            except Exception as e:  # the stream must end cleanly: record anything else
                results.append(e)

        threads = [threading.Thread(target=client) for _ in range(4)]
        for t in threads:
            t.start()
        deadline = time.time() + 20
        while True:
            m = srv.metrics()
            if m["flashport_running_sequences"] + m["flashport_queue_length"] == 4 or time.time() > deadline:
                break
            time.sleep(0.01)
        srv.proc.send_signal(signal.SIGTERM)
        rc = srv.proc.wait(timeout=30)
        for t in threads:
            t.join(timeout=30)
        assert rc == 0, (rc, srv.stderr)
        assert len(results) == 4 and all(isinstance(r, tuple) for r in results), results
        assert all(r[1] in ("length", "shutdown") for r in results), [r[1] for r in results]


def test_memory_plot():
    # --memory-plot: the timeline is written when the server stops, with the load and serve phases
    # and a request's allocations in between.
    import os
    import re
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "plots", "serve.svg")
        srv = Server("--memory-plot", path)
        with srv:
            status, _, body = srv.request("POST", COMP, {"prompt": "In the beginning", "max_tokens": 8})
            assert status == 200, (status, body)
            srv.proc.send_signal(signal.SIGTERM)
            assert srv.proc.wait(timeout=30) == 0
        svg = open(path).read()
        assert svg.startswith("<svg"), svg[:100]
        assert "flashport serve: tiny-kjv on cpu" in svg, svg[:600]
        assert re.findall(r"<title>([^<]*)</title>", svg) == ["load", "serve"], re.findall(r"<title>[^<]*", svg)
        assert "tracked by flashport" in svg


if __name__ == "__main__":
    main({"endpoints": test_endpoints, "errors": test_errors, "scoring": test_scoring, "tools": test_tools, "json_mode": test_json_mode,
          "api_key": test_api_key,
          "queue_full": test_queue_full, "no_queue": test_no_queue, "kv_pool": test_kv_pool, "disconnect_frees_kv": test_disconnect_frees_kv, "disconnect_nonstream": test_disconnect_nonstream, "sigterm": test_sigterm,
          "health_while_loading": test_health_while_loading, "memory_plot": test_memory_plot})
