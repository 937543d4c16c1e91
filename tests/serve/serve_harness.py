"""Starts `flashport serve` on a free loopback port and talks to it (stdlib only).

The tests under tests/serve share this: a Server context manager that launches the binary with
--port 0, reads the port from its first line and waits for "ready"; small HTTP helpers; an SSE
reader that checks every stream's shape; and /metrics parsing.
"""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

BIN = os.environ.get("FLASHPORT_BIN", "build/cpu/bin/flashport")
MODEL = os.environ.get("FP_TINY_KJV_DIR", "models/tiny-kjv")


class Server:
    def __init__(self, *args, model=None):
        self.args = list(args)
        self.model = model or MODEL
        self.proc = None
        self.port = None
        self.lines = []

    def __enter__(self):
        cmd = [BIN, "serve", "--model", self.model, "--port", "0", *self.args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 60
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("server exited early: " + self.proc.stderr.read())
            self.lines.append(line)
            m = re.search(r"listening on http://[\d.]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
            if "ready" in line:
                break
        assert self.port, self.lines
        # Drain the pipes so a chatty server never blocks on a full pipe.
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()
        self.stderr = []
        threading.Thread(target=lambda: self.stderr.append(self.proc.stderr.read()), daemon=True).start()
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("server did not stop within 30 s of SIGTERM")
        # A graceful shutdown exits 0; a crash, a sanitizer report or a leak (ASan builds) does not.
        if exc[0] is None and self.proc.returncode != 0:
            time.sleep(0.2)  # let the stderr reader finish
            raise AssertionError("server exited with %d: %s" % (self.proc.returncode, "".join(self.stderr)[-2000:]))
        return False

    def conn(self, timeout=60):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, timeout=60):
        """(status, headers dict, body bytes). A dict body is sent as JSON, bytes as they are."""
        c = self.conn(timeout)
        h = dict(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        elif isinstance(body, str):
            body = body.encode()
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data

    def post_json(self, path, body, headers=None):
        status, h, data = self.request("POST", path, body, headers)
        return status, json.loads(data) if data else None

    def metrics(self):
        status, _, data = self.request("GET", "/metrics")
        assert status == 200
        out = {}
        for line in data.decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def rss_mib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
        raise AssertionError("no VmRSS for the server")

    def histogram_quantile(self, name, q):
        """The upper bound of the bucket holding quantile q of histogram `name` (as Prometheus's
        histogram_quantile would bound it)."""
        _, _, data = self.request("GET", "/metrics")
        buckets = []
        for line in data.decode().splitlines():
            m = re.match(name + r'_bucket\{le="([^"]+)"\} (\S+)$', line)
            if m:
                buckets.append((float(m.group(1)), float(m.group(2))))
        total = buckets[-1][1]
        for bound, count in buckets:
            if total and count >= q * total:
                return bound
        return float("inf")

    def wait_idle(self, timeout=10):
        """Waits until nothing runs or waits and every KV block is free; returns the metrics."""
        deadline = time.time() + timeout
        while True:
            m = self.metrics()
            if m["flashport_running_sequences"] == 0 and m["flashport_queue_length"] == 0 and \
                    m["flashport_kv_blocks_used"] == 0:
                return m
            if time.time() > deadline:
                raise AssertionError("server not idle: %r" % m)
            time.sleep(0.05)


def sse_events(resp):
    """Yields (arrival time, block) for each SSE block of a response as it arrives (a block ends at a
    blank line; comments included)."""
    buf = b""
    while True:
        piece = resp.read1(65536) if hasattr(resp, "read1") else resp.read(65536)
        if not piece:
            break
        now = time.perf_counter()
        buf += piece
        while b"\n\n" in buf:
            block, buf = buf.split(b"\n\n", 1)
            yield now, block.decode()
    if buf.strip():
        yield time.perf_counter(), buf.decode()


def read_sse(resp, chat=True, allow_shutdown=False):
    """Reads a whole SSE response; checks its shape; returns (text, finish_reason, usage, chunks).
    allow_shutdown: a "server shutting down" error event (a queued request at SIGTERM) is accepted
    in place of the reply; finish_reason is then "shutdown"."""
    text, finish, usage, chunks, done = "", None, None, 0, False
    for _, block in sse_events(resp):
        block = block.strip("\n")
        if not block or block.startswith(":"):
            continue
        assert block.startswith("data: "), "malformed SSE block: %r" % block
        payload = block[len("data: "):]
        assert not done, "data after [DONE]"
        if payload == "[DONE]":
            done = True
            continue
        obj = json.loads(payload)
        if allow_shutdown and obj.get("error", {}).get("message") == "server shutting down":
            finish = "shutdown"
            continue
        assert "error" not in obj, obj
        chunks += 1
        if obj.get("usage"):
            usage = obj["usage"]
            assert obj["choices"] == []
            continue
        choice = obj["choices"][0]
        if chat:
            assert obj["object"] == "chat.completion.chunk"
            text += choice["delta"].get("content", "") or ""
        else:
            assert obj["object"] == "text_completion"
            text += choice["text"]
        if choice["finish_reason"]:
            finish = choice["finish_reason"]
    assert done, "stream did not end with [DONE]"
    return text, finish, usage, chunks


def stream(server, path, body, headers=None, timeout=60, allow_shutdown=False):
    c = server.conn(timeout)
    c.request("POST", path, body=json.dumps(body).encode(),
              headers={"Content-Type": "application/json", **(headers or {})})
    r = c.getresponse()
    assert r.status == 200, (r.status, r.read())
    assert r.getheader("Content-Type").startswith("text/event-stream")
    out = read_sse(r, chat=path.endswith("chat/completions"), allow_shutdown=allow_shutdown)
    c.close()
    return out


def main(tests):
    """Runs the named test functions (all when no name is given), printing one line each."""
    names = sys.argv[1:] or list(tests)
    failed = 0
    for name in names:
        start = time.time()
        try:
            tests[name]()
            print("PASS %s (%.1f s)" % (name, time.time() - start), flush=True)
        except Exception as e:  # one failure should not hide the others
            failed += 1
            import traceback
            traceback.print_exc()
            print("FAIL %s: %s" % (name, e), flush=True)
    sys.exit(1 if failed else 0)
