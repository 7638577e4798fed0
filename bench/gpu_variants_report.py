#!/usr/bin/env python3
"""The automatic choice against every explicit variant, from one gpu-check run.

  bench/gpu_variants_report.py DIR

DIR holds scripts/gpu-check.sh's perf-ar-p2-sweep-<algo>-<proto>.log (one
explicit variant each) and perf-ar-p2-sweep-auto.log (the automatic choice,
whose "# variant:" footer names what it ran per size). Prints a markdown
table: per size, each variant's out-of-place time, the fastest, what the
automatic choice ran and took, and its time over the fastest; then at how
many sizes it was within 10 % of the fastest (the tuner issue's bar).
Exits 1 when the auto log or every variant log is missing.
"""
import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perf_table import table_rows  # noqa: E402  (collx-perf's table reader)

SPAN = re.compile(r"([a-z_0-9]+/[a-z_0-9]+)(?: \((\d+)-(\d+) B\))?")


def times(path):
    """size -> out-of-place microseconds."""
    return {size: float(fields[5]) for size, fields in table_rows(path).items()}


def picks(path):
    """[(variant, first, last)] from the '# variant:' footer; [] if none."""
    with open(path) as f:
        for line in f:
            if line.startswith("# variant:"):
                spans = []
                for m in SPAN.finditer(line[len("# variant:"):]):
                    first = int(m.group(2)) if m.group(2) else 0
                    last = int(m.group(3)) if m.group(3) else 1 << 62
                    spans.append((m.group(1), first, last))
                return spans
    return []


def pick_at(spans, size):
    for v, lo, hi in spans:
        if lo <= size <= hi:
            return v
    return "?"


def main(argv):
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    d = argv[1]
    variants = {}
    for p in sorted(glob.glob(os.path.join(d, "perf-ar-p2-sweep-*.log"))):
        name = os.path.basename(p)[len("perf-ar-p2-sweep-"):-len(".log")]
        if name == "auto":
            continue
        algo, _, proto = name.partition("-")
        variants[algo + "/" + proto] = times(p)
    auto_path = os.path.join(d, "perf-ar-p2-sweep-auto.log")
    if not variants or not os.path.exists(auto_path):
        sys.stderr.write("gpu_variants_report: no variant logs or no auto log in %s\n" % d)
        return 1
    auto = times(auto_path)
    spans = picks(auto_path)
    names = sorted(variants)
    print("| size (B) | " + " | ".join(names) + " | fastest | auto ran | auto (us) | auto / fastest |")
    print("|---:|" + "---:|" * len(names) + "---|---|---:|---:|")
    within = total = 0
    for size in sorted(auto):
        row = [variants[n].get(size) for n in names]
        known = [(t, n) for t, n in zip(row, names) if t is not None]
        if not known:
            continue
        best_t, best_n = min(known)
        ratio = auto[size] / best_t if best_t > 0 else float("inf")
        total += 1
        within += ratio <= 1.10
        cells = ["%.2f" % t if t is not None else "" for t in row]
        print("| %d | %s | %s | %s | %.2f | %.2f |" % (size, " | ".join(cells), best_n, pick_at(spans, size),
                                                      auto[size], ratio))
    print()
    print("auto within 10 %% of the fastest measured variant at %d of %d sizes (bar: 80 %%: %s)" %
          (within, total, "MET" if total and within >= 0.8 * total else "NOT MET"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
