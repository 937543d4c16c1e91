#!/usr/bin/env python3
"""Where the time of a profiled run goes, per kernel name: reads the CSV of
`ncu --metrics gpu__time_duration.sum --print-summary per-kernel --csv` and prints the kernels by
total time (count, total ms, share, mean us). scripts/gpu/h200.sh engine-profile runs it on a short
decode. ncu serialises kernels, so the totals are GPU time without launch gaps or overlap."""
import csv
import sys


def rows(path):
    """(kernel name, invocations, mean duration in ns) per kernel, from ncu's per-kernel summary."""
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu prefixes its own log lines with ==PROF==
    out = []
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        unit = r.get("Metric Unit", "nsecond")
        scale = {"nsecond": 1.0, "usecond": 1e3, "msecond": 1e6, "second": 1e9}.get(unit, 1.0)
        value = r.get("Average") or r.get("Metric Value") or "0"
        out.append((r.get("Kernel Name", "?"), int(r.get("Invocations", "1") or 1),
                    float(value.replace(",", "")) * scale))
    return out


def main():
    data = rows(sys.argv[1])
    total = sum(n * ns for _, n, ns in data)
    if not total:
        print("ncu_summary: no kernel durations in", sys.argv[1])
        return 1
    print("%8s %10s %7s %10s  %s" % ("count", "total ms", "share", "mean us", "kernel"))
    for name, n, ns in sorted(data, key=lambda r: -r[1] * r[2]):
        print("%8d %10.3f %6.1f%% %10.2f  %s" % (n, n * ns / 1e6, 100 * n * ns / total, ns / 1e3, name[:100]))
    print("%8s %10.3f" % ("all", total / 1e6))
    return 0


if __name__ == "__main__":
    sys.exit(main())
