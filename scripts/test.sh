#!/usr/bin/env bash
# scripts/test.sh — build and run the whole collx test suite.
#
#   scripts/test.sh            deps, then, in this order: where
#                              /usr/local/cuda/bin/nvcc exists, configure + build +
#                              ctest the `cuda` preset (device code compiles; GPU
#                              tests skip, exit 77, without a GPU); the `fuzz`
#                              workflow (libFuzzer on the bootstrap parsers for
#                              COLLX_FUZZ_SECONDS, default 20) where clang has
#                              libFuzzer; the `asan` workflow (unit, thread- and
#                              process-rank tests under ASan+UBSan) and the `tsan`
#                              workflow (unit tests, soak, team executor), both
#                              with COLLX_TEST_SCALE=quick; last the `cpu`
#                              workflow (configure, build, every test)
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
tests_total=0   # over every ctest run: tests ctest counted
tests_skipped=0 # of which skipped (exit 77)

# run NAME LOG CMD...: runs CMD, output to the terminal and to LOG; records the result.
run() {
  local name=$1 log=$2
  shift 2
  echo
  echo "==> ${name}: $*"
  local t0=$SECONDS
  "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local took=" [$((SECONDS - t0)) s]"
  local detail
  detail=$(ctest_result "$log")
  if [[ -f "$log.count" ]]; then
    local n k
    read -r n k <"$log.count"
    tests_total=$((tests_total + n))
    tests_skipped=$((tests_skipped + k))
    rm -f "$log.count"
  fi
  if ((rc == 0)); then
    summary+=("PASS  ${name}${detail}${took}")
  else
    summary+=("FAIL  ${name} (exit ${rc})${detail}${took}")
    while IFS= read -r line; do
      summary+=("        ${line}")
    done < <(failure_lines "$log")
    failed=1
  fi
  return "$rc"
}

# What a failed run's log says failed, for the summary (a CI log is often read
# from its tail): ctest's list of failed tests, then the first sanitizer reports,
# assertion failures and errors, each cut to one line.
failure_lines() {
  sed -n '/^The following tests FAILED:/,/^[^[:space:]]/p' "$1" | grep -E '^[[:space:]]+[0-9]+ - ' || true
  grep -E 'SUMMARY: [A-Za-z]+Sanitizer|runtime error:|FAILED:$|REQUIRE|CHECK\(|error: |terminate called|Assertion .* failed' "$1" |
    grep -v -E '^([0-9]+% tests passed|The following tests FAILED)' | head -n 12 | cut -c1-200 || true
}

# ctest's one-line result and its skip count, if LOG holds a ctest run.
ctest_result() {
  local line skipped
  line=$(grep -E '^[0-9]+% tests passed' "$1" | tail -n 1 || true)
  [[ -n "$line" ]] || return 0
  skipped=$(grep -c '(Skipped)' "$1" || true)
  echo "${line##* out of } ${skipped}" >"$1.count"
  if ((skipped > 0)); then
    printf ': %s, %s skipped' "$line" "$skipped"
  else
    printf ': %s' "$line"
  fi
}

start=$SECONDS

# The device-code check first: without a GPU its one test skips, and the
# ctest run that ends the log should be one that executed tests.
if [[ "$want_cuda" == 0 ]]; then
  summary+=("SKIP  cuda (disabled by --no-cuda / COLLX_TEST_CUDA=0)")
elif [[ ! -x "$nvcc" ]]; then
  summary+=("SKIP  cuda (no $nvcc)")
else
  run "cuda configure" "$log_dir/test-cuda-configure.log" cmake --preset cuda &&
    run "cuda build" "$log_dir/test-cuda-build.log" cmake --build --preset cuda &&
    run "cuda test" "$log_dir/test-cuda.log" ctest --preset cuda
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

if [[ "$want_san" == 0 ]]; then
  summary+=("SKIP  asan, tsan (disabled by --no-sanitizers / COLLX_TEST_SANITIZERS=0)")
else
  run "asan workflow (ASan+UBSan: unit, thread and process ranks, quick scale)" "$log_dir/test-asan.log" \
    cmake --workflow --preset asan
  run "tsan workflow (TSan: unit and thread ranks, quick scale)" "$log_dir/test-tsan.log" \
    cmake --workflow --preset tsan
fi

# The main suite last, so that the log ends with its ctest summary.
run "cpu workflow (configure, build, test)" "$log_dir/test-cpu.log" cmake --workflow --preset cpu


echo
echo "==================== collx test summary ===================="
for line in "${summary[@]}"; do
  echo "  $line"
done
executed=$((tests_total - tests_skipped))
echo "  ${executed} tests executed, ${tests_skipped} skipped, over every ctest run above"
if ((executed == 0)); then
  echo "collx tests: FAILED: no test executed" >&2
  failed=1
fi
if ((failed)); then
  echo "collx tests: FAILED after $((SECONDS - start)) s (logs in $log_dir/)"
  exit 1
fi
echo "collx tests: ALL PASSED in $((SECONDS - start)) s"
