#!/usr/bin/env python3
"""bench/netns_report.py RAW — per-size medians of bench/netns_allreduce.sh's raw output.

Each "## round N: NAME" section is one run of one library configuration:
collx and Open MPI print "bytes us busbw variant" lines, gloo-bench prints
collx-perf's columns (out-of-place time and busbw). Prints a markdown table of
median us per configuration and size, then busbw (GB/s), then the ratio of
collx's best configuration to the best peer's, and the targets of the
network issue (busbw >= the best peer from 1 MiB, 8-byte latency <= it).
Given bench/netns_ab.sh's output (two collx builds, no peer), the ratio of
the first build's median time to the second's instead.
"""
import re
import statistics
import sys
from collections import defaultdict

times = defaultdict(lambda: defaultdict(list))  # config -> bytes -> [us]
config = None
for line in open(sys.argv[1]):
    m = re.match(r"^## round \d+: (.*)$", line)
    if m:
        config = m.group(1).strip()
        continue
    if config is None or line.startswith("#"):
        continue
    f = line.split()
    if len(f) >= 4 and f[0].isdigit() and not config.startswith("Gloo"):
        times[config][int(f[0])].append(float(f[1]))
    elif len(f) >= 9 and f[0].isdigit() and config.startswith("Gloo"):
        times[config][int(f[0])].append(float(f[5]))

configs = list(times)
sizes = sorted({s for c in configs for s in times[c]})
med = {c: {s: statistics.median(times[c][s]) for s in times[c]} for c in configs}
short = {c: c.replace("collx socket transport ", "collx ").replace("btl tcp,self ", "tcp ") for c in configs}


def busbw(s, us):  # all_reduce, 2 ranks: 2 (P - 1) / P = 1
    return s / us / 1e3


def human(s):
    for unit, k in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if s >= k:
            return f"{s // k} {unit}"
    return f"{s} B"


print("Median time (us):\n")
print("| size | " + " | ".join(short[c] for c in configs) + " |")
print("|---:|" + "---:|" * len(configs))
for s in sizes:
    print(f"| {human(s)} | " + " | ".join(f"{med[c][s]:.1f}" if s in med[c] else "" for c in configs) + " |")
collx = [c for c in configs if c.startswith("collx")]
peers = [c for c in configs if not c.startswith("collx")]
if not peers:  # an A/B of two collx builds (bench/netns_ab.sh): the first over the second
    a, b = collx[0], collx[-1]
    print(f"\n{short[a]} / {short[b]} (median time ratio; > 1: {short[b]} faster):\n")
    print("| size | ratio |")
    print("|---:|---:|")
    for s in sizes:
        if s in med[a] and s in med[b]:
            print(f"| {human(s)} | {med[a][s] / med[b][s]:.2f} |")
    sys.exit(0)
print("\nBusbw (GB/s) of collx's best and the best peer, and their ratio:\n")
print("| size | collx best | GB/s | best peer | GB/s | collx/peer |")
print("|---:|---|---:|---|---:|---:|")
ok_bw, ok_lat = True, True
for s in sizes:
    cb = min(collx, key=lambda c: med[c].get(s, float("inf")))
    pb = min(peers, key=lambda c: med[c].get(s, float("inf")))
    r = med[pb][s] / med[cb][s]
    if s >= 1 << 20 and r < 1:
        ok_bw = False
    if s == 8 and r < 1:
        ok_lat = False
    print(f"| {human(s)} | {short[cb]} | {busbw(s, med[cb][s]):.3f} | {short[pb]} | {busbw(s, med[pb][s]):.3f} | {r:.2f} |")
print(f"\n- busbw >= the best peer at every size >= 1 MiB: {'MET' if ok_bw else 'NOT MET'}")
print(f"- latency at 8 B <= the best peer's: {'MET' if ok_lat else 'NOT MET'}")
