# bench/rev_headers.sh — sourced by the scripts that compare what nvcc makes
# of a git revision's headers with what it makes of the working tree's
# (lowp_ptx.sh, stack_frame.sh). Takes "$@" = REV [ARCH] and $usage; sets
# rev, arch (default 90), nvcc (NVCC or /usr/local/cuda/bin/nvcc) and tmp, a
# directory removed on exit that holds REV's include/; runs from the
# repository root.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rev=${1:?usage: $usage}
arch=${2:-90}
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git archive "$rev" include | tar -x -C "$tmp"
