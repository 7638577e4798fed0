#!/usr/bin/env python3
"""Instructions per call outside waits, per function, from callgrind.

  bench/call_instructions.py PERF [ARGS...]   runs PERF (a collx-perf binary)
      under callgrind twice, with -n N and -n N/2 timed iterations of an 8-byte
      all_reduce on 2 thread ranks, and prints (run1 - run2) / (calls in the
      difference) per function: the per-call cost with start-up cancelled out.
  bench/call_instructions.py --files BIG.out SMALL.out CALLS   the same from
      two callgrind outputs already made.

Waits (spinning, yielding, sleeping, reading the clock) are left out of the
total: how many instructions a wait runs depends on the peer's timing, not on
the per-call work, which is what this measures. Unlike a time, the count is
the same on a loaded machine.
"""
import os
import re
import subprocess
import sys
import tempfile

WAIT = re.compile(r"wait|sched_yield|nanosleep|futex|clock_gettime|doorbell")


def load(path):
    out = subprocess.run(["callgrind_annotate", "--threshold=100", path],
                         capture_output=True, text=True, check=True).stdout
    rows = {}
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+) \([\s\d.]+%\)\s+(.*)", line)
        if m and "PROGRAM TOTALS" not in line:
            rows[m.group(2)] = rows.get(m.group(2), 0) + int(m.group(1).replace(",", ""))
    return rows


def report(big, small, calls, top=25):
    a, b = load(big), load(small)
    per = {k: (a.get(k, 0) - b.get(k, 0)) / calls for k in set(a) | set(b)}
    work = {k: v for k, v in per.items() if not WAIT.search(k)}
    print(f"instructions per call outside waits: {sum(work.values()):.0f}")
    print(f"instructions per call in waits:      {sum(v for k, v in per.items() if WAIT.search(k)):.0f}"
          " (depends on timing)")
    print("per function (outside waits), largest first:")
    for k, v in sorted(work.items(), key=lambda kv: -abs(kv[1]))[:top]:
        name = re.sub(r"^\?\?\?:", "", k)
        name = re.sub(r" \[[^\]]*\]$", "", name)
        while re.search(r"<[^<>]*>", name):  # template arguments hide the member's name
            name = re.sub(r"<[^<>]*>", "", name)
        print(f"  {v:8.1f}  {name[:150]}")


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--files":
        report(sys.argv[2], sys.argv[3], float(sys.argv[4]))
        return
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    perf, n = sys.argv[1], 20000
    with tempfile.TemporaryDirectory() as d:
        outs = []
        for iters in (n, n // 2):
            out = os.path.join(d, f"cg.{iters}")
            subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", perf, "all_reduce",
                            "-b", "8", "-e", "8", "-n", str(iters), "-w", "100", "-c", "0", "-p", "2"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            outs.append(out)
        # collx-perf times out-of-place and in-place: 2 calls per iteration, 2 ranks.
        report(outs[0], outs[1], (n - n // 2) * 2 * 2)


if __name__ == "__main__":
    main()
