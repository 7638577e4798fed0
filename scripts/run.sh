#!/usr/bin/env bash
# scripts/run.sh — the main job: measure collectives on local ranks of this machine.
#
#   scripts/run.sh                 all_reduce from 8 B to 64 MiB (x4 steps) on 2 local
#                                  process ranks
#   scripts/run.sh ARGS...         collx-perf with ARGS instead, e.g.
#                                  scripts/run.sh all_gather -b 1K -e 1M --nranks 4
#
# Installs missing Debian packages (scripts/deps.sh), configures and builds the
# `cpu` preset (build/cpu), then runs build/cpu/tools/collx-perf. Configure and
# build output goes to build/logs/run-*.log and is shown only on failure.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

perf=build/cpu/tools/collx-perf
default_args=(all_reduce -b 8 -e 64M -f 4 --nranks 2 --procs)
if (($# > 0)); then
  args=("$@")
else
  args=("${default_args[@]}")
fi

scripts/deps.sh

log_dir=build/logs
mkdir -p "$log_dir"

# quietly NAME LOG CMD...: runs CMD with its output in LOG; on failure shows the log's tail.
quietly() {
  local name=$1 log=$2
  shift 2
  echo "run.sh: ${name} ..."
  if ! "$@" >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "run.sh: ${name} failed; full output in ${log}" >&2
    return 1
  fi
}

quietly "configuring (preset cpu)" "$log_dir/run-configure.log" cmake --preset cpu

# Build only the perf tool; the rest (tests, benchmarks) is scripts/test.sh's business.
missing_tool() {
  cat >&2 <<MSG
run.sh: this build has no perf tool ($perf, CMake target collx-perf).
run.sh: it comes from tools/CMakeLists.txt, which this checkout does not have yet,
run.sh: or which -DCOLLX_BUILD_TOOLS=OFF switched off in build/cpu.
MSG
  exit 1
}
build_log="$log_dir/run-build.log"
echo "run.sh: building collx-perf ..."
if ! cmake --build --preset cpu --target collx-perf >"$build_log" 2>&1; then
  if grep -qE "unknown target 'collx-perf'|No rule to make target '?collx-perf" "$build_log"; then
    missing_tool
  fi
  tail -n 60 "$build_log" >&2
  echo "run.sh: building collx-perf failed; full output in $build_log" >&2
  exit 1
fi
[[ -x "$perf" ]] || missing_tool

echo "run.sh: $perf ${args[*]}"
exec "$perf" "${args[@]}"
