#!/usr/bin/env bash
# scripts/test.sh — build and run the whole collx test suite.
#
#   scripts/test.sh            deps, then the `cpu` workflow (configure, build,
#                              ctest); then, where /usr/local/cuda/bin/nvcc
#                              exists, configure + build + ctest the `cuda` preset
#                              (device code compiles; GPU tests skip, exit 77,
#                              without a GPU)
#                              then the `asan` workflow (unit, thread- and
#                              process-rank tests under ASan+UBSan) and the `tsan`
#                              workflow (unit and thread-rank tests), both with
#                              COLLX_TEST_SCALE=quick; then the `fuzz` workflow
#                              (libFuzzer on the bootstrap parsers for
#                              COLLX_FUZZ_SECONDS, default 20) where clang has
#                              libFuzzer
#   scripts/test.sh --no-cuda  skip the CUDA part (also: COLLX_TEST_CUDA=0)
#   --no-sanitizers            skip asan/tsan (also: COLLX_TEST_SANITIZERS=0)
#   --no-fuzz                  skip the fuzzer (also: COLLX_TEST_FUZZ=0)
#
# Exits non-zero if any step or any test fails. Logs: build/logs/test-*.log.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

nvcc=/usr/local/cuda/bin/nvcc
want_cuda="${COLLX_TEST_CUDA:-1}"
want_san="${COLLX_TEST_SANITIZERS:-1}"
want_fuzz="${COLLX_TEST_FUZZ:-1}"
for arg in "$@"; do
  case "$arg" in
    --no-cuda) want_cuda=0 ;;
    --no-sanitizers) want_san=0 ;;
    --no-fuzz) want_fuzz=0 ;;
    -h|--help) sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

scripts/deps.sh || exit 1

log_dir=build/logs
mkdir -p "$log_dir"

summary=()
failed=0

# run NAME LOG CMD...: runs CMD, output to the terminal and to LOG; records the result.
run() {
  local name=$1 log=$2
  shift 2
  echo
  echo "==> ${name}: $*"
  "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local detail
  detail=$(ctest_result "$log")
  if ((rc == 0)); then
    summary+=("PASS  ${name}${detail}")
  else
    summary+=("FAIL  ${name} (exit ${rc})${detail}")
    failed=1
  fi
  return "$rc"
}

# ctest's one-line result and its skip count, if LOG holds a ctest run.
ctest_result() {
  local line skipped
  line=$(grep -E '^[0-9]+% tests passed' "$1" | tail -n 1 || true)
  [[ -n "$line" ]] || return 0
  skipped=$(grep -c '(Skipped)' "$1" || true)
  if ((skipped > 0)); then
    printf ': %s, %s skipped' "$line" "$skipped"
  else
    printf ': %s' "$line"
  fi
}

start=$SECONDS

run "cpu workflow (configure, build, test)" "$log_dir/test-cpu.log" cmake --workflow --preset cpu

if [[ "$want_san" == 0 ]]; then
  summary+=("SKIP  asan, tsan (disabled by --no-sanitizers / COLLX_TEST_SANITIZERS=0)")
else
  run "asan workflow (ASan+UBSan: unit, thread and process ranks, quick scale)" "$log_dir/test-asan.log" \
    cmake --workflow --preset asan
  run "tsan workflow (TSan: unit and thread ranks, quick scale)" "$log_dir/test-tsan.log" \
    cmake --workflow --preset tsan
fi

# libFuzzer ships with clang; probe it rather than trusting the version.
fuzz_probe() {
  local dir
  dir=$(mktemp -d) || return 1
  printf '%s\n' '#include <cstddef>' '#include <cstdint>' \
    'extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }' >"$dir/p.cpp"
  clang++ -fsanitize=fuzzer "$dir/p.cpp" -o "$dir/p" >/dev/null 2>&1
  local rc=$?
  rm -rf "$dir"
  return $rc
}
if [[ "$want_fuzz" == 0 ]]; then
  summary+=("SKIP  fuzz (disabled by --no-fuzz / COLLX_TEST_FUZZ=0)")
elif ! command -v clang++ >/dev/null 2>&1 || ! fuzz_probe; then
  summary+=("SKIP  fuzz (clang++ with libFuzzer (-fsanitize=fuzzer) not available)")
else
  run "fuzz workflow (libFuzzer, bootstrap parsers, ${COLLX_FUZZ_SECONDS:-20} s)" "$log_dir/test-fuzz.log" \
    cmake --workflow --preset fuzz
fi

if [[ "$want_cuda" == 0 ]]; then
  summary+=("SKIP  cuda (disabled by --no-cuda / COLLX_TEST_CUDA=0)")
elif [[ ! -x "$nvcc" ]]; then
  summary+=("SKIP  cuda (no $nvcc)")
else
  run "cuda configure" "$log_dir/test-cuda-configure.log" cmake --preset cuda &&
    run "cuda build" "$log_dir/test-cuda-build.log" cmake --build --preset cuda &&
    run "cuda test" "$log_dir/test-cuda.log" ctest --preset cuda
fi

echo
echo "==================== collx test summary ===================="
for line in "${summary[@]}"; do
  echo "  $line"
done
if ((failed)); then
  echo "collx tests: FAILED after $((SECONDS - start)) s (logs in $log_dir/)"
  exit 1
fi
echo "collx tests: ALL PASSED in $((SECONDS - start)) s"
