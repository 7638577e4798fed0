#!/usr/bin/env python3
"""state_ratio.py A.raw.json B.raw.json [C.raw.json D.raw.json ...]: how the
times of one collx-probe report compare with another's, size by size.

For each pair (A, B) of `collx-probe --json` reports, prints the two runs'
median core-to-core cache-line latency and, per rank count and size, the
median over every (collective, variant) both reports measured of B's time
over A's. A ratio that depends on the size says the runs differ in latency
(what a profile's α and barrier terms carry), a flat one that they differ
in everything alike."""
import json
import statistics
import sys


def load(path):
    d = json.load(open(path))
    times = {}
    for c in d["compare"]:
        for v in c["variants"]:
            for b, us, *_ in v["points"]:
                times[(c["collective"], c["nranks"], v["variant"], b)] = us
    return times, d["measure"]["line_latency_ns"]["median"]


def main(paths):
    if len(paths) < 2 or len(paths) % 2:
        sys.exit(__doc__)
    for a, b in zip(paths[::2], paths[1::2]):
        (ta, la), (tb, lb) = load(a), load(b)
        print(f"{b} / {a}: line latency median {lb:.0f} / {la:.0f} ns")
        for P in sorted({k[1] for k in ta}):
            cells = []
            for size in sorted({k[3] for k in ta if k[1] == P}):
                r = [tb[k] / ta[k] for k in ta if k in tb and k[1] == P and k[3] == size and ta[k] > 0]
                if r and size > 0:
                    cells.append(f"{int(size)}: {statistics.median(r):.2f}")
            print(f"  P={P}  " + ", ".join(cells))


if __name__ == "__main__":
    main(sys.argv[1:])
