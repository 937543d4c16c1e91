#!/usr/bin/env python3
"""Every __global__ kernel of src/backends/gpu that a CUDA build compiles is reached by a row of h200.sh's
sanitize stage.

The stage's rows name the kernels their tests launch (`h200.sh sanitize --list`); a kernel that no row
names would never run under compute-sanitizer. Fails listing the kernels missing from the table (and
names in the table that no longer exist).
"""
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
KERNEL = re.compile(r"__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(")
# Kernels no CUDA build compiles, so compute-sanitizer (NVIDIA's) can never run them, with where they
# are checked instead: tools/hip_symbols.py's AMD_ONLY list, the one the CUDA/HIP symbol check allows.
sys.path.insert(0, str(ROOT / "tools"))
from hip_symbols import AMD_ONLY as NOT_ON_NVIDIA  # noqa: E402


def main():
    gpu = ROOT / "src" / "backends" / "gpu"
    defined = set()
    for path in sorted(gpu.glob("*.cu")) + sorted(gpu.glob("*.cuh")):
        text = re.sub(r"//[^\n]*", "", path.read_text(encoding="utf-8"))
        defined |= set(KERNEL.findall(text))
    listed = subprocess.run(["bash", str(ROOT / "scripts" / "gpu" / "h200.sh"), "sanitize", "--list"],
                            capture_output=True, text=True, check=True,
                            env={"OUT": "/tmp/fp_sanitize_list", "PATH": "/usr/bin:/bin"}).stdout.split()
    missing, stale = sorted(defined - set(listed) - set(NOT_ON_NVIDIA)), sorted(set(listed) - defined)
    gone = sorted(set(NOT_ON_NVIDIA) - defined)
    assert not gone, f"NOT_ON_NVIDIA names kernels that do not exist: {gone}"
    assert len(defined) >= 10, f"found only {sorted(defined)}: has the kernel pattern changed?"
    assert not missing, f"kernels no sanitize row reaches (add them to SANITIZE_CASES in h200.sh): {missing}"
    assert not stale, f"SANITIZE_CASES names kernels that do not exist: {stale}"
    print(f"sanitize coverage: all {len(defined) - len(NOT_ON_NVIDIA)} kernels NVIDIA runs are in h200.sh's sanitize "
          f"table; {len(NOT_ON_NVIDIA)} run only on AMD")


if __name__ == "__main__":
    sys.exit(main())
