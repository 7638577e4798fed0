#!/bin/bash
# bench/small_ab.sh OLD_COLLX_PERF NEW_COLLX_PERF [ROUNDS] > raw.txt
# broadcast, all_reduce and reduce, 8 B..4 KiB, 2 process ranks: two collx-perf
# builds and Open MPI (vader, CMA), alternating in each round; results checked.
# Run from the repository root (Open MPI runs build/cpu/bench/mpi-bench).
set -uo pipefail
old=$1 new=$2 rounds=${3:-3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 MALLOC_MMAP_THRESHOLD_=2000000000 MALLOC_TRIM_THRESHOLD_=4000000000
echo "# $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq $rounds); do
  for c in broadcast all_reduce reduce; do
    for v in old new ompi; do
      echo "## round $r $c $v"
      case $v in
        old) $old $c -b 8 -e 4K -f 8 -n 20000 -w 500 -c 1 --procs -p 2 ;;
        new) $new $c -b 8 -e 4K -f 8 -n 20000 -w 500 -c 1 --procs -p 2 ;;
        ompi) mpirun.openmpi -np 2 --bind-to core --mca btl self,vader --mca btl_vader_single_copy_mechanism cma build/cpu/bench/mpi-bench $c -b 8 -e 4K -f 8 -n 20000 -w 500 -c 1 ;;
      esac 2>&1 | grep -E "^ +[0-9]|variant"
    done
  done
done
