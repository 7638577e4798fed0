#!/usr/bin/env bash
# scripts/deps.sh — install the Debian 12 packages collx needs to build and test.
#
# Installs only what is missing (checked with dpkg), running `apt-get update`
# once first. Quiet and idempotent when everything is present. Not root and
# something missing: prints the packages and the apt command, exits 1.
#
# Extra package names given as arguments are checked and installed as well.
set -euo pipefail

packages=(
  cmake            # 3.25: presets v6, workflow presets
  g++              # host compiler (C++20)
  make
  ninja-build      # generator of every preset
  catch2           # Catch2 v2 (catch2/catch.hpp, Catch2::Catch2)
  libbenchmark-dev # Google Benchmark (bench/)
  openmpi-bin      # mpirun, peer baseline in bench/ and launcher tests
  libopenmpi-dev
  iproute2         # ip netns / veth for multi-node tests
  clang-format
  libhwloc-dev     # CPU topology for collx-probe (optional in CMake)
  libibverbs-dev   # rdma-core: the ib transport's real provider (optional in CMake)
  "$@"
)

installed() {
  [[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" == "installed" ]]
}

missing=()
for pkg in "${packages[@]}"; do
  installed "$pkg" || missing+=("$pkg")
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

install_cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}"

if [[ "$(id -u)" -ne 0 ]]; then
  {
    echo "deps.sh: missing Debian packages: ${missing[*]}"
    echo "deps.sh: install them as root, then run this again:"
    echo "  sudo sh -c '${install_cmd}'"
  } >&2
  exit 1
fi

echo "deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get update -qq; then
  echo "deps.sh: apt-get update failed" >&2
  exit 1
fi
if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
  echo "deps.sh: apt-get install failed for: ${missing[*]}" >&2
  exit 1
fi

still_missing=()
for pkg in "${missing[@]}"; do
  installed "$pkg" || still_missing+=("$pkg")
done
if ((${#still_missing[@]} > 0)); then
  echo "deps.sh: still missing after apt-get install: ${still_missing[*]}" >&2
  exit 1
fi
echo "deps.sh: done"
