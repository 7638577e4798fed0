#!/usr/bin/env python3
"""bench/inplace_parity_report.py RAW [RAW...]: medians of bench/inplace_parity.sh's
rounds per collective and size, out of place against in place, as a Markdown table.
ratio = median in place / median out of place (< 1: in place faster). A size counts
as "in place slower" when the ratio exceeds 1.05 (the tolerance is printed)."""
import statistics
import sys
from collections import defaultdict

TOL = 1.05


def size_str(b):
    for unit, n in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n and b % n == 0:
            return f"{b // n} {unit}"
    return f"{b} B"


def main(paths):
    runs = defaultdict(lambda: ([], []))
    order = []
    for path in paths:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) != 7 or not parts[0].isdigit():
                    continue
                _, coll, size, t_out, t_in, _, _ = parts
                key = (coll, int(size))
                if key not in runs:
                    order.append(key)
                runs[key][0].append(float(t_out))
                runs[key][1].append(float(t_in))
    colls = []
    for c, _ in order:
        if c not in colls:
            colls.append(c)
    print(f"ratio = median in place / median out of place; slower = ratio > {TOL}\n")
    print("| collective | sizes | in place slower at | worst ratio (size) | best ratio (size) |")
    print("|---|---:|---|---|---|")
    for c in colls:
        # Sizes that move nothing (0 elements per rank) have no ratio.
        rows = [(s, statistics.median(a), statistics.median(b)) for (cc, s), (a, b) in runs.items()
                if cc == c and s > 0 and statistics.median(a) > 0]
        rows.sort()
        ratios = [(b / a, s) for s, a, b in rows]
        slower = [size_str(s) for r, s in ratios if r > TOL]
        worst = max(ratios)
        best = min(ratios)
        print(f"| {c} | {len(rows)} | {', '.join(slower) if slower else 'none'} | "
              f"{worst[0]:.2f} ({size_str(worst[1])}) | {best[0]:.2f} ({size_str(best[1])}) |")
    print()
    for c in colls:
        print(f"\n{c}, µs (median over rounds; n = rounds):\n")
        print("| size | out of place | in place | ratio | n |")
        print("|---:|---:|---:|---:|---:|")
        for (cc, s), (a, b) in sorted(runs.items(), key=lambda kv: kv[0][1]):
            if cc != c:
                continue
            ma, mb = statistics.median(a), statistics.median(b)
            ratio = f"{mb / ma:.2f}" if ma > 0 else "–"
            print(f"| {size_str(s)} | {ma:.2f} | {mb:.2f} | {ratio} | {len(a)} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
