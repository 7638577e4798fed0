#!/usr/bin/env bash
# bench/env_ab.sh ROUNDS "COLLS" "ARGS" LABEL=SPEC... > raw.txt — collx-perf runs
# that differ in environment or flags, side by side: in each round, per
# collective, every LABEL in turn (the order rotated by one each round). SPEC is
# "VAR=VALUE ... [-- collx-perf flags]"; ARGS are the flags every run shares.
# Each run checks one call per size (#wrong) and prints the variants it ran; the
# core-to-core line latency is printed before each round
# (bench/results/slow_mode.md). bench/ab_report.py RAW makes the tables (ratios
# against the first LABEL). Run from the repository root after building
# collx-perf and line-latency (build/cpu).
#   bench/env_ab.sh 3 "all_reduce broadcast" "-b 4K -e 512K --threads -p 2" \
#     auto= "nvls=COLLX_SINGLE_COPY_MIN=0 -- --algo nvls"
set -uo pipefail
rounds=$1 colls=$2 args=$3
shift 3
labels=("$@")
b=build/cpu
echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD) load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# args: $args"
for l in "${labels[@]}"; do echo "# ${l%%=*}: ${l#*=}"; done
failed=0
n=${#labels[@]}
for r in $(seq "$rounds"); do
  echo "## round $r line latency $($b/bench/line-latency) ns"
  for c in $colls; do
    for ((i = 0; i < n; ++i)); do
      l=${labels[$(((i + r - 1) % n))]}
      label=${l%%=*} spec=${l#*=}
      envs=${spec%%--*} flags=
      [[ $spec == *--* ]] && flags=${spec#*--}
      echo "### round $r $c $label"
      # shellcheck disable=SC2086  # words on purpose
      env $envs $b/tools/collx-perf "$c" $args $flags 2>&1 | grep -E "^ +[0-9]|# variant:" || failed=1
    done
  done
done
exit $failed
