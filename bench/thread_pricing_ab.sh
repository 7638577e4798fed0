#!/usr/bin/env bash
# bench/thread_pricing_ab.sh OLD NEW [ROUNDS] [COLLS] > raw.txt — two collx-perf
# builds on 2 thread ranks, automatic choice, fp32, 256 KiB..64 MiB, out of
# place and in place, alternating in each round (OLD first in odd rounds, NEW
# first in even ones); each run checks one call (#wrong) and prints the
# variants it ran. The core-to-core line latency is printed before each round
# (bench/results/slow_mode.md). bench/ab_report.py RAW makes the tables.
set -uo pipefail
old=$1 new=$2 rounds=${3:-3}
colls=${4:-"all_reduce all_gather reduce_scatter broadcast all_to_all"}
args="-b 256K -e 64M -f 4 -n 20 -w 5 -c 1 --threads -p 2"
export COLLX_TUNE_FILE=${COLLX_TUNE_FILE:-builtin}
echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD) load: $(cut -d' ' -f1-3 /proc/loadavg) COLLX_TUNE_FILE=$COLLX_TUNE_FILE"
echo "# old: $old new: $new"
failed=0
for r in $(seq "$rounds"); do
  echo "## round $r line latency $(build/cpu/bench/line-latency) ns"
  order="old new"
  ((r % 2 == 0)) && order="new old"
  for c in $colls; do
    for v in $order; do
      bin=$old
      [[ $v == new ]] && bin=$new
      echo "### round $r $c $v"
      $bin "$c" $args 2>&1 | grep -E "^ +[0-9]|# variant:" || failed=1
    done
  done
done
exit $failed
