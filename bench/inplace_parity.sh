#!/usr/bin/env bash
# bench/inplace_parity.sh [ROUNDS] [PROCS] [BUILD] [mean|median] > raw.txt: in place against
# out of place for every collective that has an in-place form (all_reduce,
# all_gather, reduce_scatter, broadcast, reduce), fp32, 8 B–32 MiB (factor 4),
# process ranks. Each round runs every collective once, in two sweeps: 8 B–
# 32 KiB with 2000 timed calls per size and 128 KiB–32 MiB with 50, the
# first size of each sweep after a warm-up one (a sweep's first size was
# erratic in both forms); collx-perf times the out-of-place calls of a
# size, then the in-place ones, each size checked once (-c 1). `median`
# times each call alone and takes the median (-t median: robust to a rank
# descheduled by another, as when ranks outnumber the CPUs). Prints one line per round, collective and size
# ("round coll bytes us_out us_in wrong_out wrong_in"), the core-to-core line
# latency before each round (bench/inplace_parity_report.py renders the
# medians over the rounds). Exits 1 when a result was wrong.
#
#   cmake --build build/cpu --target collx-perf line-latency
#   bench/inplace_parity.sh 5 2 > bench/results/inplace_parity.raw.txt
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=${1:-5} procs=${2:-2} build=${3:-build/cpu} timing=${4:-mean}
perf=$build/tools/collx-perf ll=$build/bench/line-latency
for x in "$perf" "$ll"; do [[ -x $x ]] || { echo "inplace_parity.sh: $x is not built" >&2; exit 1; }; done
export MALLOC_MMAP_THRESHOLD_=2000000000 MALLOC_TRIM_THRESHOLD_=4000000000
echo "# $(date -u '+%Y-%m-%d %H:%M UTC') collx $(git rev-parse --short HEAD), $(nproc) CPUs, $procs process ranks"
echo "# $perf <coll> -t $timing -b 8 -e 32K -f 4 -n 2000 -w 200 -c 1 --procs -p $procs; then -b 32K -e 32M -f 4 -n 50 -w 10 (its 32 KiB not kept)"
echo "# round coll bytes us_out us_in wrong_out wrong_in"
bad=0
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
for ((r = 1; r <= rounds; ++r)); do
  echo "# round $r line latency (ns): $("$ll")"
  for c in all_reduce all_gather reduce_scatter broadcast reduce; do
    for sweep in "-b 8 -e 32K -f 4 -n 2000 -w 200" "-b 32K -e 32M -f 4 -n 50 -w 10"; do
      # shellcheck disable=SC2086  # the sweep's flags split on purpose
      out=$("$perf" "$c" $sweep -t "$timing" -c 1 --procs -p "$procs" 2>&1) || { echo "inplace_parity.sh: $c failed" >&2; bad=1; }
      # The large sweep's first size only warms it up (32 KiB is the small sweep's).
      awk -v r="$r" -v c="$c" -v skip="${sweep:3:3}" \
        '$1 ~ /^[0-9]+$/ && !(skip == "32K" && $1 == 32768) { print r, c, $1, $6, $10, $9, $13 }' <<<"$out"
      grep -m1 '^# variant:' <<<"$out" | sed "s/^# /# round $r $c /" || true
    done
  done
done | tee "$rows"
awk '$1 ~ /^[0-9]+$/ && ($6 != "0" || $7 != "0") { bad = 1 } END { exit bad }' "$rows" || {
  echo "inplace_parity.sh: a run reported wrong elements" >&2
  bad=1
}
exit $bad
