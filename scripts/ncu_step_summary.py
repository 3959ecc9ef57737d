#!/usr/bin/env python3
"""Sums Nsight Compute's kernel times over the last decode step of a run.

Reads the CSV of `ncu --metrics gpu__time_duration.sum --csv odmoe-run ...`
(scripts/gpu_check.sh writes it), takes the kernels from the last embedding
lookup (GetRowsKernel: the start of a step) to the end, and prints one line per
kernel (name and template arguments: the weight type, the tile rows) with its
calls and microseconds, then the step's sum. Standard library only.

    python3 scripts/ncu_step_summary.py /tmp/gpu_check/ncu_q4km.csv
"""
import collections
import csv
import re
import sys

UNITS = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}


def short_name(kernel):
    """'void odmoe::cuda::(anon)::KMatVecKernel<(DType)12, 1>(...)' -> 'KMatVecKernel<12, 1>'."""
    m = re.search(r"(\w+)(<[^()]*(?:\([^)]*\)[^()<>]*)*>)?\(", kernel)
    if not m:
        return kernel[:80]
    args = m.group(2) or ""
    args = re.sub(r"\([^)]*\)", "", args)  # drop casts such as (odmoe::DType)
    return m.group(1) + args


def main(path):
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]
    rows = list(csv.DictReader(lines))
    times = []
    for r in rows:
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(r["Metric Value"].replace(",", ""))
        times.append((short_name(r["Kernel Name"]), value * UNITS.get(r["Metric Unit"], 1.0)))
    if not times:
        print("no kernel times in", path)
        return 1
    starts = [i for i, (name, _) in enumerate(times) if name.startswith("GetRowsKernel")]
    step = times[starts[-1]:] if starts else times
    calls = collections.Counter()
    total = collections.defaultdict(float)
    for name, us in step:
        calls[name] += 1
        total[name] += us
    print(f"last step: {len(step)} kernels, {sum(total.values()):.1f} us")
    for name in sorted(total, key=total.get, reverse=True):
        print(f"  {total[name]:8.1f} us  {calls[name]:3d} x  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
