#!/usr/bin/env bash
# bench/run_allreduce_vs_mpi.sh — collx vs Open MPI, all_reduce, 2 processes.
#
#   bench/run_allreduce_vs_mpi.sh [--repeats N] [--maxbytes SIZE] [--out FILE]
#                                 [--collx-perf PATH] [--mpi-bench PATH]
#
# Runs `collx-perf all_reduce --procs -p 2` and `mpirun -np 2 mpi-bench
# all_reduce` on the same sizes (fp32 sum, 8 B .. 64 MB (--maxbytes), factor 2, default
# -n 20 -w 5, results checked), alternating which goes first, N times (default
# 3). Writes FILE (default bench/results/allreduce_2proc_vs_openmpi.md): the
# machine, the commit, a table per size of the medians over the repeats
# (collx time, MPI time, collx busbw, MPI busbw, busbw ratio collx/MPI, latency
# ratio collx/MPI) for out-of-place and in-place, whether the targets hold
# (>= 1 MB: collx busbw >= MPI busbw; 8 B: collx time <= 2x MPI time), and
# every raw output.
#
# Binaries default to the `cpu` preset's build tree (build/cpu/tools/collx-perf,
# build/cpu/bench/mpi-bench); COLLX_PERF / MPI_BENCH / MPIRUN override them, and
# COLLX_COMMIT names the commit they were built from (default: this tree's HEAD).
# MPI_BIND (default "core", Open MPI's own default for 2 ranks) is passed to
# mpirun --bind-to. Run it on an otherwise idle machine: it warns if the load
# average is above 0.5 per core.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)

repeats=3
maxbytes=64M
out=bench/results/allreduce_2proc_vs_openmpi.md
collx_perf=${COLLX_PERF:-build/cpu/tools/collx-perf}
mpi_bench=${MPI_BENCH:-build/cpu/bench/mpi-bench}
mpirun=${MPIRUN:-mpirun}
bind=${MPI_BIND:-core}

while [ $# -gt 0 ]; do
  case "$1" in
    --repeats) repeats=$2; shift 2 ;;
    --maxbytes) maxbytes=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --collx-perf) collx_perf=$2; shift 2 ;;
    --mpi-bench) mpi_bench=$2; shift 2 ;;
    -h|--help) sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_allreduce_vs_mpi.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
case "$repeats" in ''|*[!0-9]*|0) echo "run_allreduce_vs_mpi.sh: --repeats needs a positive integer" >&2; exit 2 ;; esac
for b in "$collx_perf" "$mpi_bench"; do
  [ -x "$b" ] || { echo "run_allreduce_vs_mpi.sh: $b is not built (cmake --workflow --preset cpu)" >&2; exit 1; }
done
command -v "$mpirun" >/dev/null || { echo "run_allreduce_vs_mpi.sh: $mpirun not found" >&2; exit 1; }
command -v python3 >/dev/null || { echo "run_allreduce_vs_mpi.sh: python3 is needed for the table" >&2; exit 1; }

sweep=(all_reduce -b 8 -e "$maxbytes" -f 2 -d float -o sum -c 1)
# Open MPI refuses root and more ranks than cores unless told; vader is its
# shared-memory transport, the same path collx's shm transport takes.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi_cmd=("$mpirun" --oversubscribe --bind-to "$bind" --mca btl self,vader -np 2 "$mpi_bench" "${sweep[@]}")
collx_cmd=("$collx_perf" "${sweep[@]}" --procs -p 2)

ncpu=$(nproc)
load=$(cut -d' ' -f1 /proc/loadavg)
if python3 -c "import sys; sys.exit(0 if float('$load') > 0.5 * $ncpu else 1)"; then
  echo "run_allreduce_vs_mpi.sh: warning: load average $load on $ncpu cores; results will be noisy" >&2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run_one() {  # run_one NAME REP CMD...
  local name=$1 rep=$2
  shift 2
  echo "==> [$rep/$repeats] $name: $*" >&2
  if ! "$@" >"$tmp/$name.$rep.txt" 2>"$tmp/$name.$rep.err"; then
    cat "$tmp/$name.$rep.txt" "$tmp/$name.$rep.err" >&2
    echo "run_allreduce_vs_mpi.sh: $name failed (repeat $rep)" >&2
    exit 1
  fi
}

start=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
for rep in $(seq 1 "$repeats"); do
  if [ $((rep % 2)) -eq 1 ]; then
    run_one collx "$rep" "${collx_cmd[@]}"
    run_one mpi "$rep" "${mpi_cmd[@]}"
  else
    run_one mpi "$rep" "${mpi_cmd[@]}"
    run_one collx "$rep" "${collx_cmd[@]}"
  fi
done
end=$(date -u '+%Y-%m-%d %H:%M:%S UTC')

if [ -n "${COLLX_COMMIT:-}" ]; then
  commit=$COLLX_COMMIT
else
  commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
  if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then commit="$commit (with uncommitted changes)"; fi
fi
model=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
cpus=$(lscpu | sed -n 's/^CPU(s):[[:space:]]*//p' | head -1)
cores=$(lscpu | sed -n 's/^Core(s) per socket:[[:space:]]*//p' | head -1)
sockets=$(lscpu | sed -n 's/^Socket(s):[[:space:]]*//p' | head -1)
mem=$(free -g | awk '/^Mem:/ {print $2 " GiB"}')
kernel=$(uname -r)
mpiver=$("$mpirun" --version 2>/dev/null | head -1)
cxx=$(${CXX:-c++} --version 2>/dev/null | head -1 || true)

mkdir -p "$(dirname "$out")"
MACHINE_MODEL="$model" MACHINE_CPUS="$cpus" MACHINE_CORES="$cores" MACHINE_SOCKETS="$sockets" \
MACHINE_MEM="$mem" MACHINE_KERNEL="$kernel" MPI_VERSION="$mpiver" CXX_VERSION="$cxx" COMMIT="$commit" \
START="$start" END="$end" LOAD="$load" REPEATS="$repeats" TMPDIR_RUNS="$tmp" BIND="$bind" \
COLLX_CMD="${collx_cmd[*]}" MPI_CMD="${mpi_cmd[*]}" \
python3 - "$out" <<'PY'
import os, statistics, sys

env = os.environ
out = sys.argv[1]
tmp = env["TMPDIR_RUNS"]
reps = int(env["REPEATS"])

def parse(path):
    """size -> (oop_time, oop_busbw, oop_wrong, ip_time, ip_busbw, ip_wrong)"""
    rows = {}
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            p = line.split()
            if len(p) < 13:
                continue
            rows[int(p[0])] = (float(p[5]), float(p[7]), p[8], float(p[9]), float(p[11]), p[12])
    return rows

runs = {name: [parse(f"{tmp}/{name}.{r}.txt") for r in range(1, reps + 1)] for name in ("collx", "mpi")}
sizes = sorted(runs["collx"][0])
raw = {name: [open(f"{tmp}/{name}.{r}.txt").read() for r in range(1, reps + 1)] for name in ("collx", "mpi")}

def med(name, size, col):
    return statistics.median(r[size][col] for r in runs[name] if size in r)

def human(b):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div:
            v = b / div
            return f"{v:g} {unit}"
    return f"{b} B"

def fmt_t(us):
    return f"{us:.0f}" if us >= 10000 else f"{us:.1f}" if us >= 100 else f"{us:.2f}"

def table(t_col, title):
    lines = [f"### {title}", "",
             "| size | collx time (us) | MPI time (us) | collx busbw (GB/s) | MPI busbw (GB/s) | busbw ratio collx/MPI | latency ratio collx/MPI |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    res = {}
    for s in sizes:
        ct, mt = med("collx", s, t_col), med("mpi", s, t_col)
        # busbw from the median times (all_reduce, P = 2: busbw = algbw = size / time),
        # so that tiny sizes do not lose their ratio to the table's 2-decimal rounding.
        cb, mb = (s / t / 1e3 if t > 0 else 0.0 for t in (ct, mt))
        bw_ratio = cb / mb if mb > 0 else float("nan")
        lat_ratio = ct / mt if mt > 0 else float("nan")
        res[s] = (ct, mt, cb, mb, bw_ratio, lat_ratio)
        bwr = f"{bw_ratio:.2f}" if mb > 0 else "n/a"
        lines.append(f"| {human(s)} | {fmt_t(ct)} | {fmt_t(mt)} | {cb:.3f} | {mb:.3f} | {bwr} | {lat_ratio:.2f} |")
    return lines, res

def verdict(res):
    big = [s for s in sizes if s >= (1 << 20)]
    short = [s for s in big if res[s][2] < res[s][3]]
    lines = []
    if big:
        if short:
            worst = min(short, key=lambda s: res[s][4] if res[s][3] > 0 else 1)
            lines.append(f"- **>= 1 MiB, collx busbw >= Open MPI busbw: NOT MET** at {len(short)} of {len(big)} sizes "
                         f"({', '.join(human(s) for s in short)}); worst ratio {res[worst][4]:.2f} at {human(worst)}.")
        else:
            lines.append(f"- **>= 1 MiB, collx busbw >= Open MPI busbw: MET** at all {len(big)} sizes "
                         f"(lowest ratio {min(res[s][4] for s in big):.2f}).")
    if 8 in res:
        r = res[8][5]
        lines.append(f"- **8 B, collx latency within 2x of Open MPI: {'MET' if r <= 2 else 'NOT MET'}** "
                     f"(collx {fmt_t(res[8][0])} us, Open MPI {fmt_t(res[8][1])} us, ratio {r:.2f}).")
    return lines

wrong = []
for name in ("collx", "mpi"):
    for i, r in enumerate(runs[name], 1):
        for s, v in r.items():
            if v[2] not in ("0", "N/A") or v[5] not in ("0", "N/A"):
                wrong.append(f"{name} repeat {i} size {s}")

oop_lines, oop = table(0, "Out-of-place (medians over repeats)")
ip_lines, ip = table(3, "In-place (medians over repeats)")

md = []
md += ["# all_reduce, 2 processes: collx vs Open MPI", ""]
md += [f"Generated by `bench/run_allreduce_vs_mpi.sh` from {env['START']} to {env['END']}.", ""]
md += ["## Machine", "",
       f"- CPU: {env['MACHINE_MODEL']} — {env['MACHINE_CPUS']} CPUs ({env['MACHINE_SOCKETS']} socket(s) x {env['MACHINE_CORES']} core(s))",
       f"- Memory: {env['MACHINE_MEM']}; kernel {env['MACHINE_KERNEL']}",
       f"- Load average at start: {env['LOAD']}",
       f"- MPI: {env['MPI_VERSION']}",
       f"- Compiler: {env['CXX_VERSION']}",
       f"- collx commit: `{env['COMMIT']}`", ""]
md += ["## Method", "",
       f"- collx: `{env['COLLX_CMD']}`",
       f"- Open MPI: `{env['MPI_CMD']}`",
       f"- {reps} repeats, alternating which of the two runs first; each value below is the median over the repeats.",
       "- Both tools time the mean of 20 iterations after 5 warmups per size and report the maximum over ranks;",
       "  results are checked once per size before timing (the #wrong columns). busbw = algbw x 2(P-1)/P (nccl-tests),",
       "  which is size / time for P = 2; the tables compute it from the median times.",
       f"- Open MPI runs with `--bind-to {env['BIND']}` (its default for 2 ranks); collx's launcher pins rank r to CPU r likewise when the ranks fit.",
       "- Ratios > 1 favour collx for busbw; latency ratios < 1 favour collx.", ""]
md += ["## Targets (out-of-place)", ""] + verdict(oop) + [""]
md += ["In-place:", ""] + verdict(ip) + [""]
if wrong:
    md += ["**Wrong results reported:** " + "; ".join(wrong), ""]
else:
    md += ["All results checked: 0 wrong elements in every run.", ""]
md += ["## Results", ""] + oop_lines + [""] + ip_lines + [""]
md += ["## Raw output", ""]
for i in range(reps):
    for name, label in (("collx", "collx-perf"), ("mpi", "mpi-bench (Open MPI)")):
        md += [f"<details><summary>{label}, repeat {i + 1}</summary>", "", "```", raw[name][i].rstrip(), "```", "", "</details>", ""]
with open(out, "w") as f:
    f.write("\n".join(md))
print(f"wrote {out}")
print("\n".join(verdict(oop)))
PY
