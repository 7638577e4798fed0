#!/bin/bash
# bench/small_ab.sh COLLX_PERF... [ROUNDS] > raw.txt
# broadcast, all_reduce and reduce (or the collectives in $COLLS), 8 B..4 KiB,
# 2 process ranks: two or more
# collx-perf builds and Open MPI (vader, CMA), alternating in each round;
# results checked. With two builds they are labelled old and new, else by
# their file names. Run from the repository root (Open MPI runs
# build/cpu/bench/mpi-bench). Exits 1 when a run fails or reports wrong
# elements (every run checks one call, -c 1).
set -uo pipefail
if [ $# -lt 2 ]; then
  sed -n '2,9p' "$0" >&2
  exit 2
fi
rounds=3
if [[ ${!#} =~ ^[0-9]+$ ]]; then
  rounds=${!#}
  set -- "${@:1:$#-1}"
fi
builds=("$@")
labels=()
if [ ${#builds[@]} -eq 2 ]; then labels=(old new); else for b in "${builds[@]}"; do labels+=("$(basename "$b")"); done; fi
out=$(mktemp)
trap 'rm -f "$out" "$out.run"' EXIT
failed=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 MALLOC_MMAP_THRESHOLD_=2000000000 MALLOC_TRIM_THRESHOLD_=4000000000
echo "# $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq $rounds); do
  for c in ${COLLS:-broadcast all_reduce reduce}; do
    for i in $(seq 0 ${#builds[@]}); do
      v=${labels[$i]:-ompi}
      echo "## round $r $c $v"
      if [ "$i" -lt ${#builds[@]} ]; then
        "${builds[$i]}" $c -b 8 -e 4K -f 8 -n 20000 -w 500 -c 1 --procs -p 2
      else
        mpirun.openmpi -np 2 --bind-to core --mca btl self,vader --mca btl_vader_single_copy_mechanism cma build/cpu/bench/mpi-bench $c -b 8 -e 4K -f 8 -n 20000 -w 500 -c 1
      fi > "$out.run" 2>&1 || { echo "small_ab.sh: round $r $c $v failed" >&2; failed=1; }
      grep -E "^ +[0-9]|variant" "$out.run" | tee -a "$out"
    done
  done
done
# Columns 9 and 13: #wrong out of place and in place (N/A where not run).
awk '/^ +[0-9]/ && ($9 != "0" || ($13 != "0" && $13 != "N/A")) {bad++} END {exit bad > 0}' "$out" || {
  echo "small_ab.sh: a run reported wrong elements" >&2
  exit 1
}
exit $failed
