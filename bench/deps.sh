#!/usr/bin/env bash
# bench/deps.sh — install the optional peer libraries of bench/ (Debian 12), on
# top of what scripts/deps.sh installs (Open MPI among it):
#
#   mpich libmpich-dev   MPICH, for mpich-bench (mpiexec.mpich)
#   libgloo-dev          Gloo, for gloo-bench
#   pkgconf              pkg-config: how bench/CMakeLists.txt finds Open MPI
#                        (ompi-c) and MPICH (mpich) side by side
#
# Optional: the build skips a peer whose package is missing, and the test
# suite (scripts/test.sh) does not need any of them. Same behaviour as
# scripts/deps.sh (installs what is missing; not root: prints the command).
#
# With both MPIs installed, Debian's `mpi` and `mpirun` alternatives (mpicc,
# mpicxx, mpirun, mpiexec) choose one of them (Open MPI on amd64, by priority,
# unless set by hand). collx does not go through them: mpi-bench and
# mpich-bench are built with pkg-config and run with mpirun.openmpi /
# mpiexec.mpich. This script says where the alternatives point afterwards.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/deps.sh mpich libmpich-dev libgloo-dev pkgconf "$@"

if command -v update-alternatives >/dev/null; then
  for alt in mpi mpirun; do
    target=$(update-alternatives --query "$alt" 2>/dev/null | sed -n 's/^Value: //p')
    [ -n "$target" ] || continue
    case "$target" in
      *openmpi*) ;;
      *) echo "bench/deps.sh: note: the '$alt' alternative points to $target (not Open MPI);" \
              "bench/ does not depend on it (update-alternatives --config $alt to change it)" >&2 ;;
    esac
  done
fi
