#!/bin/bash
# Two hosts played by two network namespaces joined by a veth pair, one rank
# of tests/net/net_rank in each (ctest label net).
#
#   netns.sh NET_RANK check v4|v6   every collective across the namespaces
#   netns.sh NET_RANK fault v4      rank 1 SIGKILLed mid-run: rank 0 must fail
#                                   within the deadline naming rank 1
#   netns.sh NET_RANK abort v4      rank 1 calls abort(): rank 0 fails at once
#   netns.sh NET_RANK mismatch v4   the ranks' calls differ in reduce_op: both
#                                   fail with status::mismatch
#   netns.sh NET_RANK linkdown v4   the veth taken down mid-run: both ranks
#                                   fail with a timeout at the deadline
#   netns.sh NET_RANK bench v4      all_reduce fp32 8 B..64 MiB (rank 0 prints)
#   netns.sh HIER_RANK hier v4 COLLXRUN [check|bench]
#                                   two nodes of two ranks (tests/net/hier_rank,
#                                   collx/hier.hpp): one collxrun --nnodes per
#                                   namespace, its ranks one node (COLLX_HOSTID)
#
# NETEM="delay 1ms loss 1%" (any tc netem arguments) shapes both ends of the
# veth pair with tc netem (exit 77 where the kernel has no netem). With
# TAP_LINK=path/to/collx_tap_link as well, the link is played in user space
# instead (tests/net/tap_link.cpp: a TAP device per namespace, frames delayed
# and dropped; NETEM then takes only "delay Nms|Nus" and "loss P%"), which
# works on kernels without netem; the script then checks that frames were
# dropped and that an 8-byte all_reduce took at least the delay. RATE=1gbit (any tc
# rate) limits both ends with a token bucket (tc tbf, burst of 1 ms at that
# rate), e.g. for `RATE=1gbit netns.sh NET_RANK bench v4`.
# Needs root and ip(8) with netns: otherwise exit 77 (skipped) saying why.
# Names are unique per run (parallel runs do not clash); the namespaces (and
# the veth pair with them) are removed on exit by a trap, also on failure.
# Traffic stays inside the two namespaces: 10.77.0.1/24 - 10.77.0.2/24, or
# fd77::1/64 - fd77::2/64.
set -u
bin=$1 mode=$2 family=${3:-v4}
if [ "$(id -u)" != 0 ]; then echo "SKIP: network namespaces need root"; exit 77; fi
if ! command -v ip > /dev/null; then echo "SKIP: ip(8) not installed"; exit 77; fi

tag=$(printf '%04x%04x' $$ $RANDOM | tail -c 8)
nsa=collx-$tag-a nsb=collx-$tag-b
work=$(mktemp -d)
pids=()
link_pid=
cleanup() {
  for p in "${pids[@]}" $link_pid; do kill -9 "$p" 2> /dev/null; done
  ip netns del "$nsa" 2> /dev/null
  ip netns del "$nsb" 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
if ! ip netns add "$nsa" 2> "$work/err"; then
  echo "SKIP: cannot create a network namespace here: $(cat "$work/err")"
  exit 77
fi
ip netns add "$nsb" || exit 1
# Link names: at most 15 characters, one prefix (cxv) for COLLX_SOCKET_IFNAME.
if [ -n "${NETEM:-}" ] && [ -n "${TAP_LINK:-}" ]; then
  # NETEM="delay 1ms loss 1%" in user space: parse the two parameters it takes.
  delay_us=0 loss=0
  read -ra w <<< "$NETEM"
  for ((i = 0; i < ${#w[@]}; i += 2)); do
    v=${w[i + 1]:-}
    case ${w[i]} in
      delay) case $v in *ms) delay_us=$((${v%ms} * 1000)) ;; *us) delay_us=${v%us} ;;
               *) echo "FAIL: NETEM delay '$v': give ms or us"; exit 1 ;; esac ;;
      loss) loss=${v%\%} ;;
      *) echo "FAIL: NETEM '${w[i]}': the user-space link takes only delay and loss"; exit 1 ;;
    esac
  done
  "$TAP_LINK" "$nsa" "cxv${tag}a" "$nsb" "cxv${tag}b" "$delay_us" "$loss" "${SEED:-1}" > "$work/link" 2>&1 &
  link_pid=$!
  for _ in $(seq 100); do grep -q ready "$work/link" && break; kill -0 $link_pid 2> /dev/null || break; sleep 0.05; done
  grep -q ready "$work/link" || { echo "FAIL: the user-space link did not start:"; cat "$work/link"; exit 1; }
  echo "link: user space (tap_link), delay $delay_us us, loss $loss %"
else
  ip link add "cxv${tag}a" type veth peer name "cxv${tag}b" || { echo "SKIP: cannot create a veth pair"; exit 77; }
  ip link set "cxv${tag}a" netns "$nsa" && ip link set "cxv${tag}b" netns "$nsb" || exit 1
fi
if [ "$family" = v6 ]; then
  a0=fd77::1 a1=fd77::2 root="[fd77::1]:29500" plen=64 fam=AF_INET6
  ip -n "$nsa" addr add $a0/$plen dev "cxv${tag}a" nodad && ip -n "$nsb" addr add $a1/$plen dev "cxv${tag}b" nodad || exit 1
else
  a0=10.77.0.1 a1=10.77.0.2 root=10.77.0.1:29500 plen=24 fam=AF_INET
  ip -n "$nsa" addr add $a0/$plen dev "cxv${tag}a" && ip -n "$nsb" addr add $a1/$plen dev "cxv${tag}b" || exit 1
fi
for ns in "$nsa" "$nsb"; do
  ip -n "$ns" link set lo up
done
ip -n "$nsa" link set "cxv${tag}a" up && ip -n "$nsb" link set "cxv${tag}b" up || exit 1
# NETEM="delay 1ms loss 1%": the same on both ends of the link (tc netem).
if [ -n "${NETEM:-}" ] && [ -z "$link_pid" ]; then
  for end in "$nsa:cxv${tag}a" "$nsb:cxv${tag}b"; do
    # shellcheck disable=SC2086
    if ! ip netns exec "${end%%:*}" tc qdisc add dev "${end#*:}" root netem $NETEM 2> "$work/err"; then
      echo "SKIP: tc netem not available here: $(cat "$work/err")"
      exit 77
    fi
  done
fi

# RATE=1gbit: a token bucket on both ends (burst: 1 ms at the rate).
if [ -n "${RATE:-}" ]; then
  bits=$(echo "$RATE" | sed -E 's/gbit$/000000000/; s/mbit$/000000/; s/kbit$/000/; s/bit$//')
  burst=$((bits / 8 / 1000 > 16384 ? bits / 8 / 1000 : 16384))
  for end in "$nsa:cxv${tag}a" "$nsb:cxv${tag}b"; do
    if ! ip netns exec "${end%%:*}" tc qdisc add dev "${end#*:}" root tbf rate "$RATE" burst "$burst" latency 20ms \
      2> "$work/err"; then
      echo "SKIP: tc tbf not available here: $(cat "$work/err")"
      exit 77
    fi
  done
fi

common=(COLLX_SIZE=2 COLLX_ROOT_ADDR=$root COLLX_SECRET=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
        COLLX_SOCKET_IFNAME=cxv COLLX_SOCKET_FAMILY=$fam COLLX_TIMEOUT=${COLLX_TIMEOUT:-15})
run() {  # run RANK NS ARGS...: in the background, output to $work/rRANK
  local r=$1 ns=$2
  shift 2
  # Each namespace plays a host of its own (COLLX_HOSTID): its rank's steps cross the veth pair.
  ip netns exec "$ns" env "${common[@]}" COLLX_RANK=$r COLLX_HOSTID="ns$r" "$bin" "$@" > "$work/r$r" 2>&1 &
  pids+=($!)
}

case $mode in
  hier)
    runner=$4 sub=${5:-check}
    secret=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
    master=$a0:29600
    [ "$family" = v6 ] && master="[$a0]:29600"
    k=0
    for ns in "$nsa" "$nsb"; do
      ip netns exec "$ns" env COLLX_SECRET="$secret" COLLX_SOCKET_IFNAME=cxv COLLX_SOCKET_FAMILY=$fam \
        COLLX_TIMEOUT="${COLLX_TIMEOUT:-30}" COLLX_HOSTID="ns$k" \
        "$runner" --timeout 600 --nnodes 2 --node-rank $k --master "$master" -n 2 "$bin" "$sub" > "$work/n$k" 2>&1 &
      pids+=($!)
      k=$((k + 1))
    done
    rc=0
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    pids=()
    cat "$work/n0" "$work/n1"
    if [ "$sub" = check ]; then
      for r in 0 1 2 3; do
        grep -q "^\[$r\] rank $r: PASS: 2 nodes x 2 ranks" "$work/n0" "$work/n1" || { echo "FAIL: no PASS from rank $r"; rc=1; }
      done
    fi
    exit $rc
    ;;
  check)
    start=$(date +%s.%N)
    run 0 "$nsa" check
    run 1 "$nsb" check
    rc=0
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    pids=()
    cat "$work/r0"
    cat "$work/r1"
    for r in 0 1; do
      grep -q "^rank $r: PASS: .*; 0 peer(s) through memory, [1-9][0-9]* step(s) over the network" "$work/r$r" ||
        { echo "FAIL: rank $r did not pass with every step over the network"; rc=1; }
    done
    if [ -n "$link_pid" ]; then
      # The user-space link: loss must have happened, and a call must have
      # waited at least one delay (a step crosses the link once).
      kill -TERM "$link_pid" && wait "$link_pid"
      cat "$work/link"
      dropped=$(sed -n 's/.*forwarded [0-9]* frames, dropped \([0-9]*\) at random.*/\1/p' "$work/link")
      if [ "$loss" != 0 ] && ! [ "${dropped:-0}" -gt 0 ]; then echo "FAIL: the link dropped no frame"; rc=1; fi
      for r in 0 1; do
        us=$(sed -n "s/^rank $r: 8-byte all_reduce: mean \([0-9.]*\) us/\1/p" "$work/r$r")
        if [ -z "$us" ] || [ "$(echo "$us < $delay_us" | bc)" = 1 ]; then
          echo "FAIL: rank $r's 8-byte all_reduce took ${us:-?} us, under the link's delay ($delay_us us)"
          rc=1
        fi
      done
    fi
    echo "netns $family check: rc $rc in $(echo "$(date +%s.%N) - $start" | bc) s"
    exit $rc
    ;;
  bench)
    run 0 "$nsa" bench
    run 1 "$nsb" bench
    rc=0
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    pids=()
    cat "$work/r0"
    exit $rc
    ;;
  abort | mismatch)
    run 0 "$nsa" "$mode" "$work/running"
    run 1 "$nsb" "$mode" "$work/running"
    rc=0
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    pids=()
    cat "$work/r0" "$work/r1"
    [ $rc -eq 0 ] && grep -q FAILED_AS_EXPECTED "$work/r0" && grep -q FAILED_AS_EXPECTED "$work/r1" || {
      echo "FAIL"
      exit 1
    }
    exit 0
    ;;
  linkdown)
    run 0 "$nsa" linkdown "$work/running"
    run 1 "$nsb" linkdown "$work/running"
    for _ in $(seq 300); do [ -e "$work/running" ] && break; sleep 0.05; done
    [ -e "$work/running" ] || { echo "FAIL: the ranks never started running"; cat "$work/r0" "$work/r1"; exit 1; }
    ip -n "$nsb" link set "cxv${tag}b" down
    rc=0
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    pids=()
    cat "$work/r0" "$work/r1"
    [ $rc -eq 0 ] || { echo "FAIL"; exit 1; }
    exit 0
    ;;
  fault)
    run 0 "$nsa" fault "$work/running"
    run 1 "$nsb" fault "$work/running"
    for _ in $(seq 300); do [ -e "$work/running" ] && break; sleep 0.05; done
    [ -e "$work/running" ] || { echo "FAIL: the ranks never started running"; cat "$work/r0" "$work/r1"; exit 1; }
    killed=$(date +%s.%N)
    kill -9 "${pids[1]}"
    wait "${pids[1]}" 2> /dev/null
    # The survivor must fail well within its deadline (COLLX_TIMEOUT), not hang.
    for _ in $(seq 200); do kill -0 "${pids[0]}" 2> /dev/null || break; sleep 0.05; done
    if kill -0 "${pids[0]}" 2> /dev/null; then
      echo "FAIL: rank 0 still running 10 s after rank 1 was killed"
      cat "$work/r0"
      exit 1
    fi
    wait "${pids[0]}"
    rc=$?
    pids=()
    took=$(echo "$(date +%s.%N) - $killed" | bc)
    cat "$work/r0"
    echo "rank 0 exited $rc, $took s after rank 1 was killed"
    if [ $rc -ne 0 ] || ! grep -q FAILED_AS_EXPECTED "$work/r0" || ! grep -q "rank 1 (10.77.0.2:" "$work/r0"; then
      echo "FAIL: rank 0 did not fail naming rank 1 and its address"
      exit 1
    fi
    exit 0
    ;;
  *)
    echo "unknown mode $mode"
    exit 2
    ;;
esac
