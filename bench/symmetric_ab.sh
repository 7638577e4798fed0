#!/usr/bin/env bash
# bench/symmetric_ab.sh [ROUNDS] [COLLS] > raw.txt — process ranks reading
# peers' buffers by cross-memory attach against symmetric memory
# (COLLX_PERF_SYMMETRIC=1: communicator::alloc_symmetric), Open MPI (vader,
# CMA) beside them; 2 process ranks, fp32, 256 KiB..64 MiB, out of place and
# in place. In each round, per collective: collx automatic, collx automatic
# with symmetric buffers, nvls forced (single copy at every size) both ways,
# Open MPI; each run checks one call (#wrong), and the core-to-core line
# latency is printed before each round (bench/results/slow_mode.md). Run from
# the repository root after building collx-perf, mpi-bench and line-latency.
set -uo pipefail
rounds=${1:-3}
colls=${2:-"all_reduce all_gather broadcast all_to_all"}
b=build/cpu
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 MALLOC_MMAP_THRESHOLD_=2000000000 MALLOC_TRIM_THRESHOLD_=4000000000
args="-b 256K -e 64M -f 4 -n 20 -w 5 -c 1"
echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD) load: $(cut -d' ' -f1-3 /proc/loadavg)"
failed=0
for r in $(seq "$rounds"); do
  echo "## round $r line latency $($b/bench/line-latency) ns"
  for c in $colls; do
    for v in auto auto-sym nvls nvls-sym ompi; do
      echo "### round $r $c $v"
      case $v in
        auto) $b/tools/collx-perf $c $args --procs -p 2 ;;
        auto-sym) COLLX_PERF_SYMMETRIC=1 $b/tools/collx-perf $c $args --procs -p 2 ;;
        nvls) COLLX_SINGLE_COPY_MIN=0 $b/tools/collx-perf $c $args --algo nvls --procs -p 2 ;;
        nvls-sym) COLLX_PERF_SYMMETRIC=1 COLLX_SINGLE_COPY_MIN=0 $b/tools/collx-perf $c $args --algo nvls --procs -p 2 ;;
        ompi) mpirun.openmpi -np 2 --bind-to core --mca btl self,vader --mca btl_vader_single_copy_mechanism cma $b/bench/mpi-bench $c $args ;;
      esac 2>&1 | grep -E "^ +[0-9]|# variant:" || failed=1
    done
  done
done
exit $failed
