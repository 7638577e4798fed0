#!/bin/bash
# What TCP alone moves over the veth pair the network benchmarks use (two
# namespaces, one process each, both directions at once), with and without
# one more copy per byte at each end: the ceiling a collective over the
# socket transport works under on this machine. Needs root.
#
#   bench/tcp_ceiling.sh [ROUNDS] > raw.txt
set -u
rounds=${1:-2}
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)"; exit 77; }
here=$(dirname "${BASH_SOURCE[0]}")
. "$here/lib.sh"
tag=$(printf '%04x%04x' $$ $RANDOM | tail -c 8)
nsa=collx-$tag-a nsb=collx-$tag-b
trap 'ip netns del "$nsa" 2> /dev/null; ip netns del "$nsb" 2> /dev/null' EXIT
bench_veth_pair "$nsa" "$nsb" "$tag" || exit 1
echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, load: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$rounds"); do
  for mode in plain copy; do
    echo "## round $round: $mode"
    ip netns exec "$nsa" /usr/bin/python3 "$here/tcp_ceiling.py" server 10.77.0.1 4 $mode &
    sleep 0.3
    ip netns exec "$nsb" /usr/bin/python3 "$here/tcp_ceiling.py" client 10.77.0.1 4 $mode
    wait
  done
done
