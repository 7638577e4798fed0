#!/usr/bin/env bash
# scripts/gpu-bundle.sh [BUILD] [BUNDLE] — copies what scripts/gpu-check.sh
# runs out of a CUDA build folder (default build/cuda) into a small folder
# (default build/gpu-bundle) with the same layout: the executables and the
# device instantiation's PTX (gzipped), no object files. The device tool
# carries at most 64 MiB; a whole build folder is larger. Then:
#   run(command='scripts/gpu-check.sh "$OUT" build/gpu-bundle', carry=["build/gpu-bundle"])
set -euo pipefail
build=${1:-build/cuda}
bundle=${2:-build/gpu-bundle}
files=(
  tests/device/collx_gpu_ring_test
  tests/device/collx_gpu_comm_test
  tests/device/collx_gpu_host_misuse
  tests/device/collx_gpu_lowp_test
  tests/device/collx_gpu_lowp_comm_test
  tests/device/collx_gpu_register_test
  tests/device/collx_gpu_multicast_test
  tools/collx-perf-cuda
  tools/collxrun
)
# Built where the toolkit has nccl.h (gpu-check.sh skips it where absent).
optional=(
  bench/nccl-bench
)
rm -rf "$bundle"
for f in "${optional[@]}"; do
  if [ -x "$build/$f" ]; then
    mkdir -p "$bundle/$(dirname "$f")"
    cp "$build/$f" "$bundle/$f"
  fi
done
for f in "${files[@]}"; do
  if [ ! -x "$build/$f" ]; then
    echo "gpu-bundle: $build/$f missing: build the cuda preset first (cmake --build --preset cuda)" >&2
    exit 1
  fi
  mkdir -p "$bundle/$(dirname "$f")"
  cp "$build/$f" "$bundle/$f"
done
ptx=tests/device/CMakeFiles/collx_device_instantiate.dir
mkdir -p "$bundle/$ptx"
# Compressed: the PTX is most of the bundle, and text (check_ptx.py reads .gz).
for f in "$build/$ptx"/*.ptx; do gzip -c "$f" >"$bundle/$ptx/$(basename "$f").gz"; done
du -sh "$bundle"
