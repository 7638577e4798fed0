#!/usr/bin/env bash
# scripts/run.sh — the main job: probe this machine (look, measure, compute,
# compare) on local ranks, or run collx-perf.
#
#   scripts/run.sh                 collx-probe: this machine's topology, α and bandwidth
#                                  per protocol, γ, barrier, then the model's predictions
#                                  and the tuner's picks against measured all_reduce on
#                                  2 process ranks (about a minute on 2 CPUs)
#   scripts/run.sh --probe ARGS... collx-probe with ARGS, e.g. --save, --json,
#                                  --colls all_reduce,all_gather --ranks 2,4
#   scripts/run.sh ARGS...         collx-perf with ARGS instead, e.g.
#                                  scripts/run.sh all_gather -b 1K -e 1M --nranks 4
#
# Installs missing Debian packages (scripts/deps.sh), configures and builds the
# `cpu` preset (build/cpu), then runs build/cpu/tools/collx-probe or collx-perf.
# Configure and build output goes to build/logs/run-*.log and is shown only on
# failure.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# The tool and its arguments: the probe by default or after --probe, else collx-perf.
if (($# == 0)); then
  target=collx-probe
  args=()
elif [[ $1 == --probe ]]; then
  target=collx-probe
  args=("${@:2}")
else
  target=collx-perf
  args=("$@")
fi
perf=build/cpu/tools/$target

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

# Build only the tool (the probe brings collx-perf, which it runs); the rest
# (tests, benchmarks) is scripts/test.sh's business.
missing_tool() {
  cat >&2 <<MSG
run.sh: this build has no $target ($perf, CMake target $target).
run.sh: it comes from tools/CMakeLists.txt, which this checkout does not have yet,
run.sh: or which -DCOLLX_BUILD_TOOLS=OFF switched off in build/cpu.
MSG
  exit 1
}
build_log="$log_dir/run-build.log"
echo "run.sh: building $target ..."
if ! cmake --build --preset cpu --target "$target" >"$build_log" 2>&1; then
  if grep -qE "unknown target '$target'|No rule to make target '?$target" "$build_log"; then
    missing_tool
  fi
  tail -n 60 "$build_log" >&2
  echo "run.sh: building $target failed; full output in $build_log" >&2
  exit 1
fi
[[ -x "$perf" ]] || missing_tool

echo "run.sh: $perf ${args[*]:-}"
exec "$perf" "${args[@]}"
