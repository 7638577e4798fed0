#!/bin/sh
# Usage: run_fuzz.sh FUZZER SEED_DIR
# Runs FUZZER for COLLX_FUZZ_SECONDS (default 20) on a fresh copy of SEED_DIR
# in the current directory, so inputs it finds stay out of the source tree.
# Single allocations over 64 MiB count as bugs (the bootstrap bounds every
# length it reads); each input must finish within 10 s.
set -eu
fuzzer=$1 seeds=$2
rm -rf corpus
cp -r "$seeds" corpus
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
exec "$fuzzer" -max_total_time="${COLLX_FUZZ_SECONDS:-20}" -malloc_limit_mb=64 -rss_limit_mb=1024 \
  -timeout=10 -print_final_stats=1 corpus
