#!/usr/bin/env python3
"""bench/symmetric_ab_report.py RAW > table.md — medians over the rounds of
bench/symmetric_ab.sh's raw output: per collective and size, the time (µs) of
each entry out of place and in place, and the ratios that matter (symmetric
against cross-memory attach, collx against Open MPI). Exits 1 when a run
reported wrong elements."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ab_report import fmt, median_of, parse  # noqa: E402

times, variants_seen, _, latencies, wrong = parse(sys.argv[1])


def med(k):
    return median_of(times, k)


def ratio(a, b):
    return "" if a is None or b is None else f"{a / b:.2f}"

names = ["auto", "auto-sym", "nvls", "nvls-sym", "ompi"]
print(f"Line latency before each round: {', '.join(f'{x:.0f}' for x in latencies)} ns.\n")
for c in dict.fromkeys(k[0] for k in times):
    for place in ("out", "in"):
        sizes = sorted({k[2] for k in times if k[0] == c and k[3] == place})
        if not sizes:
            continue
        print(f"### {c}, {'out of place' if place == 'out' else 'in place'} (median µs over the rounds)\n")
        print("| size | collx | collx, symmetric | nvls | nvls, symmetric | Open MPI | nvls sym / nvls | auto sym / auto | auto sym / Open MPI |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for s in sizes:
            t = {n: med((c, n, s, place)) for n in names}
            label = f"{s >> 20} MiB" if s >= 1 << 20 else f"{s >> 10} KiB"
            print(f"| {label} | " + " | ".join(fmt(t[n]) for n in names) + " | "
                  f"{ratio(t['nvls-sym'], t['nvls'])} | {ratio(t['auto-sym'], t['auto'])} | {ratio(t['auto-sym'], t['ompi'])} |")
        print()
    for n in ("auto", "auto-sym"):
        if (c, n) in variants_seen:
            print(f"{c}, {n}: variants {'; '.join(sorted(variants_seen[(c, n)]))}.  ")
    print()
print(f"Wrong elements reported: {wrong}.")
sys.exit(1 if wrong else 0)
