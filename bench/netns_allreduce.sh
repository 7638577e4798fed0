#!/bin/bash
# all_reduce fp32 8 B..64 MiB between two hosts played by network namespaces
# joined by a veth pair (one rank per namespace): collx's socket transport
# (tests/net/net_rank bench) and Open MPI's TCP BTL (bench/net_allreduce_mpi.c,
# started in the second namespace through an rsh agent that runs
# `ip netns exec`), alternating ROUNDS times in the same run. Needs root.
#
#   bench/netns_allreduce.sh NET_RANK MPI_BENCH [ROUNDS [GLOO_BENCH]] > raw.txt
#
# With GLOO_BENCH (bench/peers/gloo_bench.cpp), each round also runs Gloo's
# TCP transport (ring_chunked and halving_doubling), one rank per namespace,
# meeting through a FileStore directory both namespaces see.
set -u
bin=$1 mpibin=$2 rounds=${3:-2} gloobin=${4:-}
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)"; exit 77; }
tag=$(printf '%04x%04x' $$ $RANDOM | tail -c 8)
nsa=collx-$tag-a nsb=collx-$tag-b
work=$(mktemp -d)
cleanup() {
  ip netns del "$nsa" 2> /dev/null
  ip netns del "$nsb" 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_veth_pair "$nsa" "$nsb" "$tag" || exit 1

cat > "$work/agent.sh" << AGENT
#!/bin/bash
# Open MPI's rsh agent: "agent HOST COMMAND...": run COMMAND in HOST's namespace.
host=\$1
shift
case \$host in
  10.77.0.1) ns=$nsa ;;
  10.77.0.2) ns=$nsb ;;
  *) echo "agent: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec \$ns /bin/bash -c "\$*"
AGENT
chmod +x "$work/agent.sh"

echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# columns: bytes  us_per_call  busbw_GB/s  variant"
secret=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
# collx with its defaults and with the rank's spin cut to 1 us (COLLX_SPIN_US=1:
# on a host whose CPUs are all busy, a spinning rank delays its own proxy);
# Open MPI with its defaults and with mpi_yield_when_idle (its ranks yield
# while they poll).
for round in $(seq "$rounds"); do
  for spin in default 1; do
    echo "## round $round: collx socket transport (COLLX_SOCKET_NSTREAMS=${COLLX_SOCKET_NSTREAMS:-1}, COLLX_SPIN_US=$spin)"
    common=(COLLX_SIZE=2 COLLX_ROOT_ADDR=10.77.0.1:$((29500 + 2 * round + ${#spin})) COLLX_SECRET=$secret COLLX_SOCKET_IFNAME=cxv)
    [ "$spin" = default ] || common+=(COLLX_SPIN_US=$spin)
    # One host per namespace (COLLX_HOSTID): the steps cross the veth pair, not shared memory.
    ip netns exec "$nsb" env "${common[@]}" COLLX_RANK=1 COLLX_HOSTID=nsb "$bin" bench > /dev/null 2>&1 &
    ip netns exec "$nsa" env "${common[@]}" COLLX_RANK=0 COLLX_HOSTID=nsa "$bin" bench
    wait
  done
  if [ -n "$gloobin" ]; then
    for algo in ring_chunked halving_doubling; do
      echo "## round $round: Gloo tcp ($algo)"
      store=$(mktemp -d -p "$work")
      gargs=(all_reduce -p 2 --algo "$algo" -b 8 -e 64M -f 2 -d float -o sum -n 20 -w 10 -c 1)
      ip netns exec "$nsb" env GLOO_BENCH_RANK=1 GLOO_BENCH_HOST=10.77.0.2 GLOO_BENCH_STORE="$store" \
        "$gloobin" "${gargs[@]}" > /dev/null 2>&1 &
      ip netns exec "$nsa" env GLOO_BENCH_RANK=0 GLOO_BENCH_HOST=10.77.0.1 GLOO_BENCH_STORE="$store" \
        "$gloobin" "${gargs[@]}" 2>&1
      wait
    done
  fi
  for extra in "" "--mca mpi_yield_when_idle 1"; do
    echo "## round $round: Open MPI $(mpirun --version 2> /dev/null | head -1 | awk '{print $NF}'), btl tcp,self ${extra}"
    # shellcheck disable=SC2086
    ip netns exec "$nsa" mpirun --allow-run-as-root -np 2 --host 10.77.0.1,10.77.0.2 \
      --mca plm_rsh_agent "$work/agent.sh" --mca plm_rsh_no_tree_spawn 1 \
      --mca btl tcp,self --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 \
      --mca pml ob1 $extra "$mpibin" 2>&1
  done
done
