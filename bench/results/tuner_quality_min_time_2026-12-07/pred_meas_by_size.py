#!/usr/bin/env python3
"""Median predicted / measured time per rank count and size, over every call of
the given runs, under each run's profile refitted in sample:
    for r in N1 N2 O1 O2; do collx-probe-replay run_$r.raw.json --worst 1000 |
      sed -n '/worst/,$p' | grep measured | sed "s|^|$r |"; done > worst_all.txt
    python3 pred_meas_by_size.py worst_all.txt
Runs are grouped by the first letter of their name."""
import collections, re, statistics, sys

d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"(\S+)\s+\S+\s+P=(\d+)\s+(\d+) B \S+\s+measured\s+([\d.]+) us, predicted\s+([\d.]+)", line)
    if m:
        run, P, b, meas, pred = m.groups()
        d[(run[0], int(P), int(b))].append(float(pred) / float(meas))
groups = sorted({k[0] for k in d})
print("P  bytes      " + "   ".join(f"{g}: median [q25, q75] calls" for g in groups))
for P in sorted({k[1] for k in d}):
    for b in sorted({k[2] for k in d if k[1] == P}):
        cells = []
        for g in groups:
            v = d[(g, P, b)]
            q = statistics.quantiles(v, n=4)
            cells.append(f"{statistics.median(v):.2f} [{q[0]:.2f}, {q[2]:.2f}] {len(v)}")
        print(f"{P}  {b:<10} " + "   ".join(cells))
