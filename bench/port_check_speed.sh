#!/usr/bin/env bash
# port-check's speed in MB/s of source on one core: writes a corpus of about SIZE_MB (default 200) from
# the project's own C++/CUDA/Python sources, each copy with a few findings appended so the report path
# runs too, then times one `flashport port-check` over it, pinned to one core. The machine's load is
# printed beside the figure, since a busy machine lowers it.
# Usage: bench/port_check_speed.sh [FLASHPORT_BINARY] [SIZE_MB]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/build/cpu/bin/flashport}
size_mb=${2:-200}
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT

bytes=$(python3 - "$root" "$corpus" "$size_mb" <<'PY'
import pathlib, sys
root, corpus, size = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), int(sys.argv[3]) * 1_000_000
tail = {".py": "import flash_attn\nif torch.version.cuda: pass\n"}
sources = sorted(p for d in ("src", "python") for p in (root / d).rglob("*")
                 if p.suffix in (".cpp", ".h", ".cu", ".cuh", ".py"))
texts = [(p.relative_to(root).as_posix().replace("/", "_"),
          p.read_bytes() + tail.get(p.suffix, "#define WARP_SIZE 32\nint lane = threadIdx.x & 31;\n").encode())
         for p in sources]
total, copy = 0, 0
while total < size:
    d = corpus / f"copy{copy}"
    d.mkdir()
    for name, text in texts:
        (d / name).write_bytes(text)
        total += len(text)
    copy += 1
print(total)
PY
)

# CPU seconds (user + system) of the scan, beside wall time: on a shared machine the wall figure
# counts other processes' turns on the core.
python3 - "$bin" "$corpus" "$bytes" <<'PY'
import resource, subprocess, sys, time
binary, corpus, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
start = time.monotonic()
with open(f"{corpus}/report.txt", "wb") as out:
    subprocess.run(["taskset", "-c", "0", binary, "port-check", corpus], stdout=out)
wall = time.monotonic() - start
use = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = use.ru_utime + use.ru_stime
print(f"{size/1e6:.1f} MB: {cpu:.2f} CPU s ({use.ru_utime:.2f} user, {use.ru_stime:.2f} sys) = {size/1e6/cpu:.1f} MB/s "
      f"per core; wall {wall:.2f} s = {size/1e6/wall:.1f} MB/s")
PY
tail -1 "$corpus/report.txt"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
