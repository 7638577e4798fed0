#!/bin/bash
# N hosts played by N network namespaces on one bridge (in its own
# namespace), one rank of tests/net/net_rank in each: the collective matrix
# across 3-4 hosts (ctest label net). Needs root and ip(8) with netns and
# bridges; otherwise exit 77 (skipped) saying why. Everything is removed on
# exit; traffic stays inside the namespaces (10.78.0.0/24).
#   bridge.sh NET_RANK N
set -u
bin=$1 n=$2
if [ "$(id -u)" != 0 ]; then echo "SKIP: network namespaces need root"; exit 77; fi
if ! command -v ip > /dev/null; then echo "SKIP: ip(8) not installed"; exit 77; fi
tag=$(printf '%04x%04x' $$ $RANDOM | tail -c 8)
sw=collx-$tag-sw
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null; done
  for ((h = 0; h < n; h++)); do ip netns del "collx-$tag-h$h" 2> /dev/null; done
  ip netns del "$sw" 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
if ! ip netns add "$sw" 2> "$work/err"; then echo "SKIP: cannot create a network namespace: $(cat "$work/err")"; exit 77; fi
ip -n "$sw" link add br0 type bridge 2> "$work/err" || { echo "SKIP: cannot create a bridge: $(cat "$work/err")"; exit 77; }
ip -n "$sw" link set br0 up || exit 1
for ((h = 0; h < n; h++)); do
  ns=collx-$tag-h$h
  ip netns add "$ns" || exit 1
  # The host end is created in the host's namespace as cxb0, the switch end as pH (names are per namespace).
  ip -n "$sw" link add "p$h" type veth peer name cxb0 netns "$ns" || { echo "SKIP: cannot create a veth pair"; exit 77; }
  ip -n "$sw" link set "p$h" master br0 && ip -n "$sw" link set "p$h" up || exit 1
  ip -n "$ns" addr add "10.78.0.$((h + 1))/24" dev cxb0 && ip -n "$ns" link set cxb0 up && ip -n "$ns" link set lo up || exit 1
done
common=(COLLX_SIZE=$n COLLX_ROOT_ADDR=10.78.0.1:29500 COLLX_SECRET=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
        COLLX_SOCKET_IFNAME=cxb COLLX_TIMEOUT=${COLLX_TIMEOUT:-30})
start=$(date +%s.%N)
for ((h = 0; h < n; h++)); do
  ip netns exec "collx-$tag-h$h" env "${common[@]}" COLLX_RANK=$h COLLX_HOSTID="h$h" "$bin" check > "$work/r$h" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
pids=()
for ((h = 0; h < n; h++)); do grep -v "refused as expected" "$work/r$h"; done
for ((h = 0; h < n; h++)); do grep -q "^rank $h: PASS: .*; 0 peer(s) through memory" "$work/r$h" || { echo "FAIL: no PASS over the network from rank $h"; rc=1; }; done
echo "bridge, $n hosts: rc $rc in $(echo "$(date +%s.%N) - $start" | bc) s"
exit $rc
