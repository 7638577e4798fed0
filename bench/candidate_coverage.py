#!/usr/bin/env python3
"""bench/candidate_coverage.py REPORT.json...: for collx-probe --json reports,
at how many sizes the model's k best variants (by the predicted time saved
with each measured point) include one within 10 % of the fastest measured
variant, for k = 1 (the model's pick) to 10. The ceiling of a measured choice
that explores k candidates, judged in sample."""
import json
import sys

KS = (1, 2, 3, 4, 5, 6, 8, 10)
for path in sys.argv[1:]:
    d = json.load(open(path))
    sizes, hits = 0, {k: 0 for k in KS}
    for c in d["compare"]:
        points = {}
        for v in c["variants"]:
            for b, measured, predicted in v["points"]:
                points.setdefault(b, []).append((predicted, measured))
        for b, rows in points.items():
            fastest = min(m for _, m in rows)
            ranked = sorted(rows, key=lambda r: r[0])  # by predicted time, ties in report order
            sizes += 1
            for k in KS:
                hits[k] += any(m <= 1.1 * fastest for _, m in ranked[:k])
    print(f"{path}: {sizes} sizes; a variant within 10 % among the model's k best: " +
          ", ".join(f"k={k}: {hits[k]}" for k in KS))
