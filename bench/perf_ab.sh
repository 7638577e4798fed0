#!/bin/bash
# A/B of two collx-perf builds (OLD, NEW): all_reduce 256 KiB..64 MiB, rhd and
# ring with Simple, process ranks, alternating ROUNDS times in one run.
#   bench/perf_ab.sh OLD_COLLX_PERF NEW_COLLX_PERF [ROUNDS [P]] > raw.txt
old=$1 new=$2 rounds=${3:-4} P=${4:-2}
echo "# $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg), P=$P"
for r in $(seq $rounds); do
  for v in old new; do
    bin=$old; [ $v = new ] && bin=$new
    for a in rhd ring; do
      echo "## round $r $v $a"
      COLLX_CONTENTION=off $bin all_reduce -b 256K -e 64M -f 4 -n 20 -w 3 --procs -p $P --algo $a --proto simple 2>&1 | grep -E "^ +[0-9]"
    done
  done
done
