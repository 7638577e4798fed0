#!/usr/bin/env bash
# bench/run_algorithms.sh — all_reduce and all_gather per algorithm, Simple
# protocol, fp32, process ranks; and the cost model's ranking against them.
#
#   bench/run_algorithms.sh [--nranks "2 4"] [--maxbytes 8M] [--iters 10] [--repeats 5] [--out FILE]
#
# For each P and each algorithm that implements the collective, runs
# `collx-perf <coll> --procs -p P --algo A --proto simple -b 2 -e MAX -f 4`
# REPEATS times (algorithm order rotated each repeat) and keeps the best
# out-of-place time per size: on a shared machine the least disturbed run is
# the closest to the algorithm's own cost. The first size, 0 elements, takes
# the start-up cost of a run and is not reported. The model is calibrated by runs
# of its own, not fitted to the sweep:
#   α  collx-perf all_gather --algo ring -p 2 --procs at 8 B, run at the start
#      of every repeat with the sweep's -n/-w (a 0-byte size first takes the
#      start-up cost of a run), best of REPEATS, divided by ring's step count
#      there (1);
#   β  `collx-model calibrate`: seconds per byte of a one-thread memcpy (8 MiB);
#   γ  the same run: seconds per output byte of fp32 c[i] = a[i] + b[i] (8 MiB);
# and evaluates `collx-model <coll> -p P --alpha α --beta β --gamma γ` at the
# measured sizes. FILE (default bench/results/algorithms.md) gets the
# calibration, per P and collective the measured times with the fastest, and
# per size the measured fastest, the model's argmin, whether they agree, the
# Kendall τ_b of the two orders and the measured time of the model's pick
# over the fastest. Binaries: the `cpu` preset's build tree (COLLX_PERF,
# COLLX_MODEL override).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
prog=run_algorithms.sh
. bench/lib.sh

nranks="2 4"
maxbytes=8M
iters=10
repeats=5
out=bench/results/algorithms.md
collx_perf=${COLLX_PERF:-build/cpu/tools/collx-perf}
collx_model=${COLLX_MODEL:-build/cpu/tools/collx-model}
bench_parse_args "nranks maxbytes iters repeats out" "$@"
for b in "$collx_perf" "$collx_model"; do
  [ -x "$b" ] || { echo "$prog: $b is not built" >&2; exit 1; }
done

declare -A algos=([all_reduce]="ring tree rhd rabenseifner nvls direct" [all_gather]="ring rhd bruck nvls direct")
bench_start
run() {  # run FILE collx-perf-args...
  local f=$1
  shift
  bench_run "$f" "collx-perf $*" "$collx_perf" "$@"
}
for rep in $(seq 1 "$repeats"); do
  echo "==> [$rep/$repeats] alpha: P=2 all_gather ring 8 B" >&2
  run "$tmp/alpha.$rep" all_gather -b 4 -e 8 -f 2 -d float -c 1 -n "$iters" -w 3 --procs -p 2 --algo ring --proto simple
  for p in $nranks; do
    for c in all_reduce all_gather; do
      list=(${algos[$c]})
      n=${#list[@]}
      for k in $(seq 0 $((n - 1))); do
        a=${list[$(((rep + k) % n))]}
        echo "==> [$rep/$repeats] P=$p $c $a" >&2
        run "$tmp/$p.$c.$a.$rep" "$c" -b 2 -e "$maxbytes" -f 4 -d float -o sum -c 1 -n "$iters" -w 3 \
          --procs -p "$p" --algo "$a" --proto simple
      done
    done
  done
done
end=$(bench_now)

echo "==> calibration: beta, gamma" >&2
"$collx_model" calibrate --bytes 8M --reps 20 >"$tmp/calibrate.txt"
load_end=$(cut -d' ' -f1 /proc/loadavg)
alpha_steps=$("$collx_model" all_gather -p 2 --alpha 1 --sizes 8 --algo ring --terms |
  sed -n 's/.* ring .*steps \([0-9.]*\) .*/\1/p')

mkdir -p "$(dirname "$out")"
TMPDIR_RUNS="$tmp" NRANKS="$nranks" START="$start" END="$end" LOAD="$load" LOAD_END="$load_end" ITERS="$iters" REPEATS="$repeats" \
COMMIT="$(bench_commit)" COLLX_MODEL_BIN="$collx_model" \
ALPHA_STEPS="$alpha_steps" MODEL="$(bench_cpu_model)" \
AR="${algos[all_reduce]}" AG="${algos[all_gather]}" python3 - "$out" <<'PY'
import os, statistics, subprocess, sys
sys.path.insert(0, "bench")
from perf_table import table_rows
env = os.environ
tmp, out, reps = env["TMPDIR_RUNS"], sys.argv[1], int(env["REPEATS"])
colls = {"all_reduce": env["AR"].split(), "all_gather": env["AG"].split()}

def parse(path):
    return {s: (float(p[5]), p[8]) for s, p in table_rows(path).items()}

def human(b):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div:
            return f"{b / div:g} {unit}"
    return f"{b} B"

def tau_b(x, y):
    """Kendall's tau-b of two score lists (ties allowed); None if undefined."""
    conc = disc = tx = ty = 0
    n = len(x)
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = x[i] - x[j], y[i] - y[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                tx += 1
            elif dy == 0:
                ty += 1
            elif (dx > 0) == (dy > 0):
                conc += 1
            else:
                disc += 1
    den = ((conc + disc + tx) * (conc + disc + ty)) ** 0.5
    return (conc - disc) / den if den else None

# Calibration: α from ring all_gather at P = 2, 8 B (best of the repeats); β, γ from collx-model calibrate.
alpha_runs = [parse(f"{tmp}/alpha.{r}.txt")[8][0] for r in range(1, reps + 1)]
alpha_us = min(alpha_runs) / float(env["ALPHA_STEPS"])
cal = dict(l.split() for l in open(f"{tmp}/calibrate.txt") if not l.startswith("#"))
beta, gamma = float(cal["beta"]), float(cal["gamma"])
cal_note = [l[2:].strip() for l in open(f"{tmp}/calibrate.txt") if l.startswith("# ")]

def model(c, p, sizes, algos):
    cmd = [env["COLLX_MODEL_BIN"], c, "-p", str(p), "--proto", "simple", "--alpha", f"{alpha_us * 1e-6:.6g}",
           "--beta", f"{beta:.6g}", "--gamma", f"{gamma:.6g}", "--sizes", ",".join(map(str, sizes)),
           "--algo", ",".join(algos)]
    res = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()
    head = next(l for l in res if l.startswith("#") and "argmin" in l).lstrip("#").split()
    rows = {}
    for l in res:
        if l.startswith("#"):
            continue
        f = l.split()
        # The model's columns come first, one per algorithm; the tuner's follow.
        names = [h for h in head[1:-2] if h in algos]
        rows[int(f[0])] = ({a: float(f[1 + i]) for i, a in enumerate(names)}, f[-2].split("="))
    return rows, " ".join(cmd[:3] + ["..."])

md = ["# all_reduce and all_gather per algorithm (Simple protocol, fp32), and the cost model's ranking", "",
      f"Generated by `bench/run_algorithms.sh` from {env['START']} to {env['END']} at commit {env['COMMIT']}; "
      f"{env['MODEL']}, {os.cpu_count()} CPUs shared with other jobs (load average {env['LOAD']} at the start, "
      f"{env['LOAD_END']} after the calibration: other builds and tests competed for the CPUs throughout). "
      f"Process ranks, -n {env['ITERS']} -w 3, best of {reps} runs per algorithm (order rotated), "
      "out-of-place time in µs. Each run starts with a 0-element size that takes its start-up cost "
      "(not shown; all_gather's 8 B at 4 processes is 0 elements too). 4 processes on 2 CPUs are oversubscribed: a step there waits for "
      "the OS to schedule the peer, so those absolute times measure the scheduler more than "
      "the algorithm, and differences under ~20 % are noise at any P.", "",
      "Analysis: [algorithms_notes.md](algorithms_notes.md).", "",
      "## Calibration of the model (independent of the sweep below)", "",
      "Predicted time = α · steps + β · bytes sent + γ · bytes reduced, with the terms of each "
      "algorithm's constexpr `cost()` (`collx-model`).", "",
      f"- α = {alpha_us:.3f} µs: `collx-perf all_gather --algo ring --proto simple --procs -p 2 -b 4 -e 8 -f 2 "
      f"-n {env['ITERS']} -w 3` at the start of every repeat, out-of-place time at 8 B (best of {reps}: "
      + ", ".join(f"{a:.2f}" for a in alpha_runs) + f" µs) divided by ring's {env['ALPHA_STEPS']} step "
      "there; the 0-byte size first takes the start-up cost of a run.",
      f"- β = {beta * 1e12:.2f} ps/B, γ = {gamma * 1e12:.2f} ps/B: `collx-model calibrate --bytes 8M "
      f"--reps 20` ({'; '.join(cal_note[1:])}; one thread, best of 20).", ""]
wrong, summary = [], []
for p in env["NRANKS"].split():
    for c, algos in colls.items():
        runs = {a: [parse(f"{tmp}/{p}.{c}.{a}.{r}.txt") for r in range(1, reps + 1)] for a in algos}
        wrong += [f"P={p} {c} {a} size {s}" for a, rr in runs.items() for r in rr
                  for s, v in r.items() if v[1] not in ("0", "N/A")]
        sizes = sorted(s for s in runs[algos[0]][0] if s > 0)  # 0 elements: start-up, nothing moves
        t = {s: {a: min(r[s][0] for r in runs[a]) for a in algos} for s in sizes}
        pred, _ = model(c, p, sizes, algos)
        md += [f"## {c}, {p} processes", "",
               "Measured (µs):", "",
               "| size | " + " | ".join(algos) + " | fastest |",
               "|---:|" + "---:|" * len(algos) + ":---|"]
        for s in sizes:
            md.append(f"| {human(s)} | " + " | ".join(f"{t[s][a]:.2f}" for a in algos)
                      + f" | {min(t[s], key=t[s].get)} |")
        md += ["", "Model against measurement (model µs per algorithm in the same order; "
               "'=' joins algorithms the model cannot tell apart; top-1: the measured fastest is "
               "among the model's argmin; τ_b: Kendall rank correlation of the two orders, 1 = same; "
               "pick/best: measured time of the model's first argmin over the measured fastest):", "",
               "| size | model µs | measured fastest | model argmin | top-1 | τ_b | pick/best |",
               "|---:|:---|:---|:---|:---:|---:|---:|"]
        agree, ranked, ratios, taus = 0, 0, [], []
        for s in sizes:
            ranked += 1
            m, argmin = pred[s]
            best = min(t[s], key=t[s].get)
            ok = best in argmin
            agree += ok
            tau = tau_b([m[a] for a in algos], [t[s][a] for a in algos])
            ratios.append(t[s][argmin[0]] / t[s][best])
            if tau is not None:
                taus.append(tau)
            md.append(f"| {human(s)} | " + " / ".join(f"{m[a]:.2f}" for a in algos) + f" | {best} | "
                      + "=".join(argmin) + f" | {'yes' if ok else 'no'} | "
                      + (f"{tau:+.2f}" if tau is not None else "–") + f" | {t[s][argmin[0]] / t[s][best]:.2f} |")
        summary.append(f"| {c} | {p} | {agree} / {ranked} | {statistics.median(taus):+.2f} | "
                       f"{statistics.median(ratios):.2f} | {max(ratios):.2f} |")
        md.append("")
md += ["## Summary", "",
       "| collective | processes | top-1 agrees | median τ_b | median pick/best | worst pick/best |",
       "|:---|---:|---:|---:|---:|---:|"] + summary + [""]
md += [f"Wrong results: {', '.join(wrong) if wrong else 'none'}.", ""]
open(out, "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
