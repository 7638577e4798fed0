#!/bin/bash
# A/B of two builds of tests/net/net_rank's bench mode (all_reduce fp32
# 8 B..64 MiB) between two hosts played by network namespaces joined by a
# veth pair, one rank per namespace, alternating A and B ROUNDS times in one
# run. Needs root. bench/netns_report.py summarises the output.
#   bench/netns_ab.sh NET_RANK_A NET_RANK_B [ROUNDS] > raw.txt
set -u
a=$1 b=$2 rounds=${3:-3}
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)"; exit 77; }
tag=$(printf '%04x%04x' $$ $RANDOM | tail -c 8)
nsa=collx-$tag-a nsb=collx-$tag-b
trap 'ip netns del "$nsa" 2> /dev/null; ip netns del "$nsb" 2> /dev/null' EXIT
trap 'exit 1' INT TERM
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_veth_pair "$nsa" "$nsb" "$tag" || exit 1
echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# A: $a"
echo "# B: $b"
secret=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
port=29500
for round in $(seq "$rounds"); do
  for side in A B; do
    bin=$a
    [ "$side" = B ] && bin=$b
    echo "## round $round: collx $side"
    port=$((port + 1))
    # One host per namespace (COLLX_HOSTID): the steps cross the veth pair.
    common=(COLLX_SIZE=2 COLLX_ROOT_ADDR=10.77.0.1:$port COLLX_SECRET=$secret COLLX_SOCKET_IFNAME=cxv)
    ip netns exec "$nsb" env "${common[@]}" COLLX_RANK=1 COLLX_HOSTID=nsb "$bin" bench > /dev/null 2>&1 &
    ip netns exec "$nsa" env "${common[@]}" COLLX_RANK=0 COLLX_HOSTID=nsa "$bin" bench
    wait
  done
done
