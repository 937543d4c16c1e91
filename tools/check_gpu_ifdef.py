#!/usr/bin/env python3
"""Keeps `#ifdef FLASHPORT_GPU` at the dispatch points.

A CPU-only build and a GPU build differ in one place: where an op hands a GPU view to its kernel
(src/ops/, the op layer). Everywhere else the code is the same in both builds, so a conditional
on FLASHPORT_GPU elsewhere in the product (src/, include/, apps/, bench/) is flagged. Tests may test
the build they run in (a GPU view's error differs by build), so tests/ is not checked.

Usage: check_gpu_ifdef.py ROOT   (the repository root)
Prints file:line for each conditional it rejects; exits 1 if there is any.
"""
import pathlib
import re
import sys

CONDITIONAL = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif)\b.*\bFLASHPORT_GPU\b")
CHECKED = ("src", "include", "apps", "bench")
SUFFIXES = {".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh"}


def allowed(rel):
    """The op layer: src/ops/<op>.cpp and its shared checks (op_checks.h: check_device)."""
    return rel.parts[:2] == ("src", "ops")


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    root = pathlib.Path(argv[1])
    bad = []
    for top in CHECKED:
        for path in sorted((root / top).rglob("*")):
            if path.suffix not in SUFFIXES or not path.is_file():
                continue
            rel = path.relative_to(root)
            if allowed(rel):
                continue
            for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if CONDITIONAL.match(line):
                    bad.append(f"{rel}:{n}: FLASHPORT_GPU conditional outside the op layer's dispatch (src/ops/)")
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
