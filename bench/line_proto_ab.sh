#!/bin/bash
# A/B of two collx-perf builds on the line protocols (LL, LL128) and the
# automatic choice: 8 B..32 KiB, 2 process ranks, median per call, results
# checked once per size; the cache-line latency between the two CPUs
# (build/cpu/bench/line-latency) is printed before every run, since it moves
# small-call times several-fold on this machine.
#   bench/line_proto_ab.sh OLD_COLLX_PERF NEW_COLLX_PERF [ROUNDS] > raw.txt
#   bench/line_proto_ab_report.py raw.txt
set -u
if [ $# -lt 2 ]; then
  sed -n '2,7p' "$0" >&2
  exit 2
fi
old=$1 new=$2 rounds=${3:-3}
lat=build/cpu/bench/line-latency
echo "# $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
  for spec in "all_reduce direct ll" "all_reduce direct ll128" "broadcast tree ll" "all_gather direct ll" \
    "all_reduce auto auto" "all_gather auto auto"; do
    set -- $spec
    for v in old new; do
      bin=$old
      [ $v = new ] && bin=$new
      echo "## round $r $1 $2/$3 $v line_latency_ns=$($lat | tail -1)"
      "$bin" "$1" --procs -p 2 -b 8 -e 32K -f 4 -n 3000 -w 300 -c 1 -t median --algo "$2" --proto "$3" 2>&1 |
        grep -E "^ +[0-9]|variant|Out of"
    done
  done
done
