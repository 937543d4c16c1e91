#!/usr/bin/env python3
"""Flags warp-size uses that can differ between HIP's host and device passes.

WARP_SIZE (common.cuh) is 64 in a gfx9 device pass and 32 in HIP's host pass, where launchers run. A
constant built from it at namespace scope, or any use in host code, can make the launch geometry
disagree with the kernel (a block launched with 128 threads that its kernel believes holds 256).
So WARP_SIZE may appear only inside the bodies of __device__ / __global__ functions, FP_WARP_SIZE
only in common.cuh, and the run-time `warpSize` only in vendor/ headers.

Usage: check_warp_size.py PATH...   (files, or folders searched for *.cu / *.cuh)
Prints file:line: reason for each use it rejects; exits 1 if there is any.
"""
import pathlib
import re
import sys

TOKEN = re.compile(r"\b(WARP_SIZE|FP_WARP_SIZE|warpSize)\b")
DEVICE_QUALIFIER = re.compile(r"\b(__device__|__global__)\b")
# The definition itself: `constexpr int WARP_SIZE = FP_WARP_SIZE;` in common.cuh.
DEFINITION = re.compile(r"constexpr\s+int\s+WARP_SIZE\s*=\s*FP_WARP_SIZE\s*;")


def blank(text):
    """Comments and string/char literals replaced by spaces (newlines kept, so offsets and lines hold)."""
    out, i, n = [], 0, len(text)
    while i < n:
        two = text[i:i + 2]
        if two == "//":
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif two == "/*":
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif text[i] in "\"'":
            j, quote = i + 1, text[i]
            while j < n and text[j] != quote and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
        else:
            out.append(text[i])
            i += 1
            continue
        out.append(re.sub(r"[^\n]", " ", text[i:j]))
        i = j
    return "".join(out)


def device_spans(code):
    """[start, end) offsets of the bodies of __device__ / __global__ functions (lambdas inside included).

    A brace opens a device body when the text since the previous ';', '{' or '}' (its declaration)
    carries a device qualifier; braces inside a device body stay device. Preprocessor lines are not
    part of any declaration.
    """
    spans, stack = [], []  # stack: (is_device, start)
    header_start = 0
    lines = code.split("\n")
    directive = [False] * len(code)
    pos = 0
    for line in lines:
        if line.lstrip().startswith("#"):
            for k in range(pos, pos + len(line)):
                directive[k] = True
        pos += len(line) + 1
    for i, c in enumerate(code):
        if directive[i] or c not in "{};":
            continue
        if c == "{":
            inside = bool(stack) and stack[-1][0]
            header = "".join(ch for k, ch in enumerate(code[header_start:i], header_start) if not directive[k])
            stack.append((inside or bool(DEVICE_QUALIFIER.search(header)), i))
        elif c == "}" and stack:
            is_device, start = stack.pop()
            if is_device and not (stack and stack[-1][0]):
                spans.append((start, i + 1))
        header_start = i + 1
    return spans


def check(path):
    text = path.read_text(encoding="utf-8")
    code = blank(text)
    spans = device_spans(code)
    in_vendor = "vendor" in path.parts
    problems = []
    for m in TOKEN.finditer(code):
        line_no = code.count("\n", 0, m.start()) + 1
        line = code.split("\n")[line_no - 1]
        name = m.group(1)
        if name == "warpSize":
            if not in_vendor:
                problems.append((line_no, "the run-time warpSize: use WARP_SIZE inside device code (common.cuh)"))
        elif name == "FP_WARP_SIZE":
            if path.name != "common.cuh":
                problems.append((line_no, "FP_WARP_SIZE outside common.cuh: use WARP_SIZE inside device code"))
        elif path.name == "common.cuh" and DEFINITION.search(line):
            continue
        elif not any(a <= m.start() < b for a, b in spans):
            problems.append((line_no, "WARP_SIZE outside a __device__/__global__ body: it is 32 in HIP's host "
                                      "pass and 64 on gfx9 devices, so launch geometry must not depend on it"))
    return [f"{path}:{line}: {why}" for line, why in problems]


def main(argv):
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    files = []
    for arg in argv:
        p = pathlib.Path(arg)
        files += sorted(q for ext in ("*.cu", "*.cuh") for q in p.rglob(ext)) if p.is_dir() else [p]
    problems = [line for f in files for line in check(f)]
    for line in problems:
        print(line)
    print(f"check_warp_size: {len(files)} files, {len(problems)} problem(s)", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
