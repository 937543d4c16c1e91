#!/usr/bin/env python3
"""tools/check_gpu_ifdef.py passes on this tree and flags a conditional planted outside src/ops."""
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "check_gpu_ifdef.py"


def run(root):
    return subprocess.run([sys.executable, str(TOOL), str(root)], capture_output=True, text=True)


def main():
    tree = run(ROOT)
    assert tree.returncode == 0, f"this tree has FLASHPORT_GPU conditionals outside src/ops:\n{tree.stdout}"
    with tempfile.TemporaryDirectory() as tmp:
        t = pathlib.Path(tmp)
        for rel, text in {
            "src/ops/norm.cpp": "#ifdef FLASHPORT_GPU\n#endif\n",            # allowed: a dispatch point
            "src/engine/model.cpp": "int a;\n#if defined(FLASHPORT_GPU)\n#endif\n",  # flagged
            "bench/x.cu": "  #  ifndef FLASHPORT_GPU\n#endif\n",              # flagged
            "include/flashport/y.h": "// #ifdef FLASHPORT_GPU in a comment is text\n",
        }.items():
            (t / rel).parent.mkdir(parents=True, exist_ok=True)
            (t / rel).write_text(text)
        got = run(t)
        assert got.returncode == 1, got
        flagged = sorted(line.split(":")[0] for line in got.stdout.splitlines())
        assert flagged == ["bench/x.cu", "src/engine/model.cpp"], flagged
        assert "src/engine/model.cpp:2:" in got.stdout, got.stdout
    print("check_gpu_ifdef: ok")


if __name__ == "__main__":
    main()
