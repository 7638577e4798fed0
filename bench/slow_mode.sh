#!/usr/bin/env bash
# bench/slow_mode.sh [RUNS] [BUILD]: whole runs of collx-perf and Open MPI's
# mpi-bench, alternated, each between two measurements of the core-to-core
# cache-line latency (line-latency), to tell whether a slow run is collx's
# doing or the machine's. Per run: the line latency before and after (ns),
# then reduce_scatter fp32 on 2 process ranks at 4 KiB and 2 MiB (µs),
# ring/Simple for collx and Open MPI's default. Prints the raw table on
# stdout (bench/results/slow_mode.raw.txt keeps one) and a summary at the end.
#
#   cmake --build build/cpu --target collx-perf mpi-bench line-latency
#   bench/slow_mode.sh 20 > bench/results/slow_mode.raw.txt
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
runs=${1:-20} build=${2:-build/cpu}
ll=$build/bench/line-latency perf=$build/tools/collx-perf mpi=$build/bench/mpi-bench
for x in "$ll" "$perf"; do [[ -x $x ]] || { echo "slow_mode.sh: $x is not built" >&2; exit 1; }; done
have_mpi=0
if [[ -x $mpi ]] && command -v mpirun.openmpi >/dev/null; then have_mpi=1; fi
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
sweep=(-b 4K -e 2M -f 512 -n 100 -w 10 -c 0)
times() { grep -v '^#' | awk '$1 ~ /^[0-9]+$/ { printf "%s ", $6 }'; }
echo "# $(date -u '+%Y-%m-%d %H:%M UTC') $(git rev-parse --short HEAD) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs"
echo "# run lib line_ns_before line_ns_after us_4KiB us_2MiB"
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
for ((i = 1; i <= runs; ++i)); do
  for lib in collx ompi; do
    [[ $lib == ompi && $have_mpi == 0 ]] && continue
    a=$("$ll")
    if [[ $lib == collx ]]; then
      t=$("$perf" reduce_scatter -p 2 --procs --algo ring --proto simple "${sweep[@]}" 2>&1 | times)
    else
      t=$(mpirun.openmpi -np 2 --bind-to core --mca btl self,vader --mca btl_vader_single_copy_mechanism cma \
        "$mpi" reduce_scatter "${sweep[@]}" 2>&1 | times)
    fi
    b=$("$ll")
    echo "$i $lib $a $b $t" | tee -a "$rows"
  done
done
awk '
  # A run is "slow" when its 2 MiB time is over twice the median of its library.
  { lib[NR] = $2; lat[NR] = ($3 > $4 ? $3 : $4); t2[NR] = $6; n[$2]++; v[$2, n[$2]] = $6 }
  END {
    for (l in n) {
      m = n[l]; for (i = 1; i <= m; ++i) s[i] = v[l, i]
      for (i = 1; i <= m; ++i) for (j = i + 1; j <= m; ++j) if (s[j] < s[i]) { x = s[i]; s[i] = s[j]; s[j] = x }
      med[l] = s[int((m + 1) / 2)]
    }
    for (r = 1; r <= NR; ++r) {
      slow = t2[r] > 2 * med[lib[r]]; hi = lat[r] > 100
      c[lib[r], slow, hi]++
    }
    printf "# summary: runs by library, slow (2 MiB > 2x the median) or not, and max line latency > 100 ns or not\n"
    printf "# lib median_us_2MiB slow&hi slow&lo fast&hi fast&lo\n"
    for (l in n) printf "# %s %s %d %d %d %d\n", l, med[l], c[l,1,1], c[l,1,0], c[l,0,1], c[l,0,0]
  }' "$rows"
