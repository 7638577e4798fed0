#!/usr/bin/env python3
"""bench/ab_report.py RAW > table.md — medians over the rounds of an A/B raw
output made of "### round R COLL VARIANT" blocks of collx-perf (or mpi-bench)
rows (bench/thread_pricing_ab.sh): per collective, out of place and in place,
each variant's median time (µs) per size and its ratio to the first variant
seen, and the variants each ran. Exits 1 when a run reported wrong elements."""
import re
import statistics
import sys
from collections import defaultdict

def parse(path):
    """times[(coll, variant, size, 'out'|'in')] -> [µs], the variant lines each
    block printed, the variant names in order of appearance, the line
    latencies, and the count of rows that reported wrong elements."""
    times = defaultdict(list)
    ran = defaultdict(set)
    names, latencies = [], []
    wrong = 0
    coll = variant = None
    for line in open(path):
        m = re.match(r"## round \d+ line latency ([\d.]+)", line)
        if m:
            latencies.append(float(m.group(1)))
            continue
        m = re.match(r"### round \d+ (\S+) (\S+)", line)
        if m:
            coll, variant = m.groups()
            if variant not in names:
                names.append(variant)
            continue
        m = re.match(r"# variant: (.*)", line)
        if m and coll:
            ran[(coll, variant)].add(m.group(1).strip())
            continue
        f = line.split()
        if coll and len(f) >= 13 and f[0].isdigit():
            size = int(f[0])
            times[(coll, variant, size, "out")].append(float(f[5]))
            wrong += f[8] != "0"
            if f[12] != "N/A":  # in place was run
                times[(coll, variant, size, "in")].append(float(f[9]))
                wrong += f[12] != "0"
    return times, ran, names, latencies, wrong


def median_of(times, k):
    v = times.get(k)
    return statistics.median(v) if v else None


def fmt(x):
    return "" if x is None else (f"{x:.1f}" if x < 1000 else f"{x:.0f}")


def main():
    times, ran, names, latencies, wrong = parse(sys.argv[1])
    base = names[0]
    print(f"Line latency before each round: {', '.join(f'{x:.0f}' for x in latencies)} ns.\n")
    for c in dict.fromkeys(k[0] for k in times):
        for place in ("out", "in"):
            sizes = sorted({k[2] for k in times if k[0] == c and k[3] == place})
            if not sizes:
                continue
            print(f"### {c}, {'out of place' if place == 'out' else 'in place'} (median µs over the rounds)\n")
            others = names[1:]
            print("| size | " + " | ".join(names) + " | " + " | ".join(f"{n} / {base}" for n in others) + " |")
            print("|---:" * (1 + len(names) + len(others)) + "|")
            for s in sizes:
                t = {n: median_of(times, (c, n, s, place)) for n in names}
                label = f"{s >> 20} MiB" if s >= 1 << 20 else f"{s >> 10} KiB"
                r = ["" if t[n] is None or t[base] is None else f"{t[n] / t[base]:.2f}" for n in others]
                print(f"| {label} | " + " | ".join(fmt(t[n]) for n in names) + " | " + " | ".join(r) + " |")
            print()
        for n in names:
            if (c, n) in ran:
                print(f"{c}, {n}: {'; '.join(sorted(ran[(c, n)]))}.  ")
        print()
    print(f"Wrong elements reported: {wrong}.")
    sys.exit(1 if wrong else 0)


if __name__ == "__main__":
    main()
