#!/bin/bash
# A/B of the network communicator's automatic choice with every composable
# protocol (A: Simple and LL; or only A_PROTO, e.g. ll, when given) against
# Simple alone (B: COLLX_PROTO=simple),
# tests/net/net_rank's bench mode (all_reduce fp32 8 B..64 MiB, 2 ranks),
# alternating A and B ROUNDS times in one run, over one of two paths:
#   memory  two ranks of one host on loopback, whose steps go through each
#           other's shared memory (LL's reader polls lines as they land)
#   veth    one rank per network namespace, joined by a veth pair (every step
#           through the proxy; LL's reader waits for the whole step); root
#   bench/proto_ab.sh NET_RANK memory|veth [ROUNDS [A_PROTO]] > raw.txt
# bench/netns_report.py raw.txt gives the per-size medians and A/B ratios.
set -u
if [ $# -lt 2 ] || [ ! -x "$1" ]; then
  echo "usage: bench/proto_ab.sh NET_RANK memory|veth [ROUNDS [A_PROTO]] (NET_RANK: the built tests/net/collx_net_rank)" >&2
  exit 2
fi
bin=$1 path=$2 rounds=${3:-5} a_proto=${4:-}
orig=$bin
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# B: the same binary with the automatic choice limited to Simple.
printf '#!/bin/sh\nCOLLX_PROTO=simple exec "%s" "$@"\n' "$(readlink -f "$bin")" > "$work/simple_only"
chmod +x "$work/simple_only"
if [ -n "$a_proto" ]; then
  printf '#!/bin/sh\nCOLLX_PROTO=%s exec "%s" "$@"\n' "$a_proto" "$(readlink -f "$bin")" > "$work/a_side"
  chmod +x "$work/a_side"
  bin=$work/a_side
fi
case $path in
  veth)
    "$here/netns_ab.sh" "$bin" "$work/simple_only" "$rounds" ;;
  memory)
    echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, load: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# A: $orig (automatic choice among ${a_proto:-Simple and LL})"
    echo "# B: $orig with COLLX_PROTO=simple"
    for round in $(seq "$rounds"); do
      for side in A B; do
        echo "## round $round: collx $side"
        run=$bin
        [ "$side" = B ] && run=$work/simple_only
        "$here/../tests/net/loopback.sh" "$run" 2 bench memory | grep -E '^ +[0-9]'
      done
    done ;;
  *) echo "proto_ab.sh: the path is memory or veth, not '$path'" >&2; exit 2 ;;
esac
