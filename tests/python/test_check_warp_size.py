#!/usr/bin/env python3
"""tools/check_warp_size.py: the GPU sources pass, and on a fixture it reports exactly the lines marked BAD."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "check_warp_size.py"


def run(*paths):
    p = subprocess.run([sys.executable, str(TOOL), *map(str, paths)], capture_output=True, text=True)
    return p.returncode, p.stdout


def main():
    code, out = run(ROOT / "src" / "backends" / "gpu")
    assert code == 0 and not out, f"the GPU sources use WARP_SIZE where HIP's host pass sees it:\n{out}"

    fixture = ROOT / "tests" / "data" / "lint" / "warp_size_uses.cu"
    want = {n for n, line in enumerate(fixture.read_text().splitlines(), 1) if "// BAD" in line}
    code, out = run(fixture)
    got = {int(line.split(":")[1]) for line in out.splitlines() if line}
    assert code == 1, f"exit status {code}, want 1"
    assert got == want, f"reported lines {sorted(got)}, want {sorted(want)}"
    print(f"check_warp_size: the GPU sources are clean; the fixture's {len(want)} bad uses are all found")


if __name__ == "__main__":
    main()
