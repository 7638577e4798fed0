#!/usr/bin/env bash
# bench/run_vs_peers.sh — collx vs Open MPI, MPICH, Gloo and the memcpy ceiling,
# one collective, P process ranks, in one run.
#
#   bench/run_vs_peers.sh [--coll C] [--procs P] [--minbytes S] [--maxbytes S]
#                         [--repeats N] [--iters N] [--warmup N]
#                         [--peers "ompi mpich gloo-ring gloo-hd copy"]
#                         [--name NAME] [--build DIR] [--timeout SECONDS]
#                         [--hog] [--collx-also "LABEL:VAR=VALUE ..."]
#                         [--timing mean|median] [--rewrite-input]
#
#   --coll      all_reduce (default), all_gather, reduce_scatter, broadcast,
#               reduce, all_to_all, all_to_allv, send_recv, barrier (Gloo:
#               all_reduce only; skipped otherwise)
#   --procs     ranks P (default 2); more than the CPUs runs oversubscribed
#   --minbytes / --maxbytes   the sweep, factor 2 (default 8 .. 64M)
#   --repeats   runs of every library (default 5); the tables are medians
#   --iters / --warmup        timed and warm-up iterations per size, the same
#               for every library (default 20 / 10: MPICH takes another path
#               for its first calls on a communicator, so warm past them)
#   --peers     which peers besides collx (default: all of them)
#   --name      results name (default <coll>_<P>proc_vs_peers)
#   --build     build tree (default build/cpu: cmake --preset cpu, then
#               cmake --build build/cpu --target collx-perf mpi-bench
#               mpich-bench gloo-bench copy-bench)
#   --timeout   limit per run in seconds (default 3600)
#   --hog       run everything under one busy loop per CPU (bench/hog.sh),
#               started before the first run and stopped after the last;
#               the results name gets _hog (a loaded machine: see
#               results/contention_notes.md)
#   --timing    every tool's time column: the mean of the timed calls
#               (default, nccl-tests'), or the median of each call timed
#               alone (robust to a rank descheduled by other tasks; with
#               --hog, use it for small sizes)
#   --rewrite-input  with --timing median: every tool stores to each line of
#               each rank's input before each timed call, outside the timed
#               region (fresh data: single-copy reads cannot reuse lines an
#               earlier call left in the reader's cache)
#   --collx-also  one more collx entry, with these environment variables
#               set, e.g. "contention off:COLLX_CONTENTION=off" (an A/B of
#               a setting in the same run)
#
# Runs collx-perf --procs, mpi-bench under Open MPI's mpirun (vader BTL with
# CMA single copy, --bind-to core when the ranks fit), mpich-bench under
# MPICH's mpiexec (-bind-to core when the ranks fit), gloo-bench (ring_chunked
# and halving_doubling, loopback TCP) and copy-bench, all on the same sizes,
# fp32 sum, results checked (-c 1). The runs are interleaved: every repeat
# runs each library once, the order rotated by one per repeat, so drift in
# the machine's load spreads over all of them. Writes
#   bench/results/NAME.md       machine, versions, commands, per-size medians
#                               of time and busbw, collx/best-peer ratios, the
#                               targets and whether they hold
#   bench/results/NAME.svg      busbw vs size (log-log), one line per library
#   bench/results/NAME.raw.txt  every run's output
# Exit status: 0 ok, 1 a run failed or reported wrong results, 2 bad usage.
#
# Launchers: OPENMPI_MPIRUN (default mpirun.openmpi) and MPICH_MPIEXEC
# (default mpiexec.mpich): never the plain mpirun/mpiexec, which Debian's
# alternatives may point to either library. PEER_ENV (default: glibc malloc
# thresholds that keep large blocks in the heap; empty for none) is set for
# every run; COLLX_COMMIT names the commit the binaries were built from.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
prog=run_vs_peers.sh

coll=all_reduce
procs=2
minbytes=8
maxbytes=64M
repeats=5
iters=20
warmup=10
peers="ompi mpich gloo-ring gloo-hd copy"
name=""
build=build/cpu
run_timeout=3600
hog=0
collx_also=""
timing=mean
rewrite=0

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }
die() { echo "$prog: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --coll|--procs|--minbytes|--maxbytes|--repeats|--iters|--warmup|--peers|--name|--build|--timeout)
      [ $# -ge 2 ] || die "$1 needs a value"
      case "$1" in
        --coll) coll=$2 ;; --procs) procs=$2 ;; --minbytes) minbytes=$2 ;; --maxbytes) maxbytes=$2 ;;
        --repeats) repeats=$2 ;; --iters) iters=$2 ;; --warmup) warmup=$2 ;; --peers) peers=$2 ;;
        --name) name=$2 ;; --build) build=$2 ;; --timeout) run_timeout=$2 ;;
      esac
      shift 2 ;;
    --hog) hog=1; shift ;;
    --rewrite-input) rewrite=1; shift ;;
    --timing) [ $# -ge 2 ] || die "$1 needs a value"; timing=$2; shift 2 ;;
    --collx-also) [ $# -ge 2 ] || die "$1 needs a value"; collx_also=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (try --help)" ;;
  esac
done
positive() { case "$2" in ''|*[!0-9]*) die "$1 needs a positive integer" ;; esac; [ "$2" -gt 0 ] || die "$1 needs a positive integer"; }
positive --procs "$procs"; positive --repeats "$repeats"; positive --iters "$iters"; positive --timeout "$run_timeout"
case "$warmup" in ''|*[!0-9]*) die "--warmup needs an integer >= 0" ;; esac
case "$coll" in all_reduce|all_gather|reduce_scatter|broadcast|reduce|all_to_all|all_to_allv|send_recv|barrier) ;;
  *) die "unknown --coll '$coll'" ;; esac
for p in $peers; do
  case "$p" in ompi|mpich|gloo-ring|gloo-hd|copy) ;; *) die "unknown peer '$p' (ompi mpich gloo-ring gloo-hd copy)" ;; esac
done
[ -n "$name" ] || { name="${coll}_${procs}proc_vs_peers"; [ "$hog" -eq 0 ] || name+=_hog; }
if [ -n "$collx_also" ]; then
  case "$collx_also" in *:*=*) ;; *) die "--collx-also needs 'LABEL:VAR=VALUE ...', got '$collx_also'" ;; esac
fi
command -v python3 >/dev/null || { echo "$prog: python3 is needed for the report" >&2; exit 1; }

ncpu=$(nproc)
oversub=0
[ "$procs" -gt "$ncpu" ] && oversub=1
case "$timing" in mean|median) ;; *) die "--timing needs mean or median, got '$timing'" ;; esac
[ "$rewrite" -eq 0 ] || [ "$timing" = median ] || die "--rewrite-input needs --timing median"
sweep=(-b "$minbytes" -e "$maxbytes" -f 2 -d float -o sum -n "$iters" -w "$warmup" -c 1 -t "$timing")
[ "$rewrite" -eq 0 ] || sweep+=(--rewrite-input)

# glibc returns blocks above 32 MiB (its mmap threshold grows only so far) to
# the kernel on free; a library that allocates a temporary per call (Open
# MPI's all_reduce does) then faults its pages in on every call. Every run
# gets the same environment, which keeps large blocks in the heap.
peer_env=${PEER_ENV-MALLOC_MMAP_THRESHOLD_=2000000000 MALLOC_TRIM_THRESHOLD_=4000000000}
read -r -a env_words <<<"$peer_env"
envcmd=(env "${env_words[@]}")

ompi_mpirun=${OPENMPI_MPIRUN:-mpirun.openmpi}
mpich_mpiexec=${MPICH_MPIEXEC:-mpiexec.mpich}
if [ "$(id -u)" -eq 0 ]; then  # Open MPI refuses root unless told
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
if [ "$oversub" -eq 1 ]; then
  ompi_bind=(--oversubscribe)      # Open MPI then binds nothing and yields when idle
  mpich_bind=()
else
  ompi_bind=(--bind-to core)       # Open MPI's default for P <= 2, explicit for every P
  mpich_bind=(-bind-to core)
fi

# The libraries of this run: tag, label, command. A peer whose binary or
# launcher is missing is skipped with a note in the results.
tags=() skipped=()
declare -A label cmd
add() {  # add TAG LABEL CMD...
  local t=$1 l=$2
  shift 2
  tags+=("$t"); label[$t]=$l; cmd[$t]=$(quote "$@")
}
quote() {  # the words, shell-quoted only where they need it
  local w out=()
  for w in "$@"; do
    if [[ "$w" =~ ^[A-Za-z0-9_./=,:+@%-]+$ ]]; then out+=("$w"); else out+=("$(printf '%q' "$w")"); fi
  done
  echo "${out[*]}"
}
need() {  # need TAG WHAT...: true if every WHAT is an executable
  local t=$1 w
  shift
  for w in "$@"; do
    if ! command -v "$w" >/dev/null 2>&1; then
      skipped+=("$t: $w not found"); echo "$prog: skipping $t: $w not found" >&2; return 1
    fi
  done
}
[ -x "$build/tools/collx-perf" ] || { echo "$prog: $build/tools/collx-perf is not built (see --help)" >&2; exit 1; }
add collx collx "${envcmd[@]}" "$build/tools/collx-perf" "$coll" "${sweep[@]}" --procs -p "$procs"
if [ -n "$collx_also" ]; then
  read -r -a also_words <<<"${collx_also#*:}"
  add collx-also "collx (${collx_also%%:*})" "${envcmd[@]}" "${also_words[@]}" "$build/tools/collx-perf" "$coll" \
    "${sweep[@]}" --procs -p "$procs"
fi
for p in $peers; do
  case "$p" in
    ompi)
      need ompi "$build/bench/mpi-bench" "$ompi_mpirun" &&
        add ompi "Open MPI" "${envcmd[@]}" "$ompi_mpirun" -np "$procs" "${ompi_bind[@]}" --report-bindings \
          --mca btl self,vader --mca btl_vader_single_copy_mechanism cma \
          "$build/bench/mpi-bench" "$coll" "${sweep[@]}" ;;
    mpich)
      need mpich "$build/bench/mpich-bench" "$mpich_mpiexec" &&
        add mpich MPICH "${envcmd[@]}" "$mpich_mpiexec" -n "$procs" "${mpich_bind[@]}" \
          "$build/bench/mpich-bench" "$coll" "${sweep[@]}" ;;
    gloo-ring|gloo-hd)
      if [ "$coll" != all_reduce ]; then
        skipped+=("$p: Gloo is measured for all_reduce only")
      else
        algo=ring_chunked; [ "$p" = gloo-hd ] && algo=halving_doubling
        need "$p" "$build/bench/gloo-bench" &&
          add "$p" "Gloo $algo" "${envcmd[@]}" "$build/bench/gloo-bench" "$coll" -p "$procs" --algo "$algo" "${sweep[@]}"
      fi ;;
    copy)
      need copy "$build/bench/copy-bench" &&
        add copy "memcpy (1 thread)" "${envcmd[@]}" "$build/bench/copy-bench" "$coll" "${sweep[@]}" ;;
  esac
done

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
if python3 -c "import sys; sys.exit(0 if float('${load_start%% *}') > 0.5 * $ncpu else 1)"; then
  echo "$prog: warning: load average ${load_start%% *} on $ncpu CPUs; results will be noisy" >&2
fi

tmp=$(mktemp -d)
trap 'bench/hog.sh stop "$tmp/hog.pids"; rm -rf "$tmp"' EXIT
if [ "$hog" -eq 1 ]; then
  bench/hog.sh start "$tmp/hog.pids"
  echo "$prog: one busy loop per CPU is running (bench/hog.sh)" >&2
fi
failed=()
n=${#tags[@]}
start=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
t0=$SECONDS
for ((rep = 1; rep <= repeats; rep++)); do
  for ((i = 0; i < n; i++)); do
    t=${tags[$(((i + rep - 1) % n))]}
    echo "==> [$rep/$repeats, $((SECONDS - t0)) s] ${label[$t]}: ${cmd[$t]}" >&2
    rc=0
    eval "timeout --kill-after=10 $run_timeout ${cmd[$t]}" >"$tmp/$t.$rep.out" 2>"$tmp/$t.$rep.err" || rc=$?
    if [ "$rc" -ne 0 ]; then
      failed+=("${label[$t]} repeat $rep: exit $rc")
      echo "$prog: ${label[$t]} failed (exit $rc, repeat $rep):" >&2
      tail -5 "$tmp/$t.$rep.err" >&2 || true
    fi
  done
done
end=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
echo "==> done in $((SECONDS - t0)) s" >&2
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
bench/hog.sh stop "$tmp/hog.pids"

# ---- the machine and the versions ---------------------------------------------
if [ -n "${COLLX_COMMIT:-}" ]; then
  commit=$COLLX_COMMIT
else
  commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
  if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then commit="$commit (with uncommitted changes)"; fi
fi
lscpu_field() { lscpu | sed -n "s/^$1:[[:space:]]*//p" | head -1; }
cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null | head -1 || true)
dpkg_ver() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo "not installed"; }

{
  echo "START=$start"; echo "END=$end"
  echo "LOAD_START=$load_start"; echo "LOAD_END=$load_end"; echo "HOG=$hog"
  echo "CPU=$(lscpu_field 'Model name') — $(lscpu_field 'CPU(s)') CPUs ($(lscpu_field 'Socket(s)') socket(s) x $(lscpu_field 'Core(s) per socket') core(s), $(lscpu_field 'Thread(s) per core') thread(s) per core)"
  echo "NCPU=$ncpu"
  echo "MEM=$(free -g | awk '/^Mem:/ {print $2 " GiB"}')"
  echo "KERNEL=$(uname -sr)"
  echo "OS=$(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
  echo "OMPI=$("$ompi_mpirun" --version 2>/dev/null | head -1 || echo 'not found') (openmpi-bin $(dpkg_ver openmpi-bin))"
  echo "MPICH=MPICH $(pkg-config --modversion mpich 2>/dev/null || echo '?') (mpich $(dpkg_ver mpich); launcher $(command -v "$mpich_mpiexec" || echo "$mpich_mpiexec"))"
  echo "GLOO=libgloo-dev $(dpkg_ver libgloo-dev)"
  echo "CXX=$("${cxx:-c++}" --version 2>/dev/null | head -1)"
  echo "COMMIT=$commit"
  echo "COLL=$coll"; echo "PROCS=$procs"; echo "OVERSUB=$oversub"; echo "REPEATS=$repeats"
  echo "ITERS=$iters"; echo "WARMUP=$warmup"; echo "TIMING=$timing"; echo "REWRITE_INPUT=$rewrite"; echo "PEER_ENV=$peer_env"
  echo "INVOCATION=bench/$prog --coll $coll --procs $procs --minbytes $minbytes --maxbytes $maxbytes --repeats $repeats --iters $iters --warmup $warmup --peers \"$peers\" --name $name$([ "$hog" -eq 0 ] || echo ' --hog')$([ "$timing" = mean ] || echo " --timing $timing")$([ "$rewrite" -eq 0 ] || echo " --rewrite-input")$([ -z "$collx_also" ] || printf ' --collx-also %q' "$collx_also")"
  for t in "${tags[@]}"; do echo "LIB=$t|${label[$t]}|${cmd[$t]}"; done
  for s in "${skipped[@]+"${skipped[@]}"}"; do echo "SKIPPED=$s"; done
  for f in "${failed[@]+"${failed[@]}"}"; do echo "FAILED=$f"; done
} >"$tmp/meta.txt"

mkdir -p bench/results
rc=0
python3 bench/vs_peers_report.py "$tmp" "bench/results/$name" || rc=$?
[ "${#failed[@]}" -eq 0 ] || rc=1
exit "$rc"
