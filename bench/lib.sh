# bench/lib.sh — what the bench scripts share; sourced, never run.
# The sourcing script sets `prog` (its name in messages) first.

# bench_usage: the header comment of bench/$prog (line 2 up to the first
# line that is not a comment), without the leading '# '.
bench_usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "bench/$prog"; }

# bench_parse_args "NAME..." ARGS...: sets $NAME from --NAME VALUE for each
# listed name; -h/--help prints the usage and exits 0; anything else exits 2.
bench_parse_args() {
  local names=" $1 " key
  shift
  while [ $# -gt 0 ]; do
    case "$1" in
      -h|--help) bench_usage; exit 0 ;;
      --*)
        key=${1#--}
        case "$names" in
          *" $key "*)
            [ $# -ge 2 ] || { echo "$prog: $1 needs a value" >&2; exit 2; }
            printf -v "$key" '%s' "$2"
            shift 2
            continue ;;
        esac ;;
    esac
    echo "$prog: unknown argument '$1' (try --help)" >&2
    exit 2
  done
}

# bench_start: a scratch directory $tmp (removed on exit), the load average
# $load and the UTC time $start of the runs.
bench_start() {
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  load=$(cut -d' ' -f1 /proc/loadavg)
  start=$(bench_now)
}

bench_now() { date -u '+%Y-%m-%d %H:%M:%S UTC'; }
bench_commit() { git rev-parse --short HEAD 2>/dev/null || echo unknown; }
bench_cpu_model() { lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1; }

# bench_run FILE WHAT CMD...: CMD's output to FILE.txt and FILE.err; on
# failure both are shown, with "WHAT failed", and the script exits 1.
bench_run() {
  local f=$1 what=$2
  shift 2
  "$@" >"$f.txt" 2>"$f.err" || {
    cat "$f.txt" "$f.err" >&2
    echo "$prog: $what failed" >&2
    exit 1
  }
}

# bench_veth_pair NSA NSB TAG: two network namespaces joined by a veth pair
# (cxvTAGa in NSA, 10.77.0.1/24; cxvTAGb in NSB, 10.77.0.2/24), loopback
# up in both; returns non-zero if a step fails. The caller deletes the
# namespaces (which removes the pair) on exit.
bench_veth_pair() {
  local a=$1 b=$2 tag=$3
  ip netns add "$a" && ip netns add "$b" || return 1
  ip link add "cxv${tag}a" type veth peer name "cxv${tag}b" || return 1
  ip link set "cxv${tag}a" netns "$a" && ip link set "cxv${tag}b" netns "$b" || return 1
  ip -n "$a" addr add 10.77.0.1/24 dev "cxv${tag}a" && ip -n "$b" addr add 10.77.0.2/24 dev "cxv${tag}b" || return 1
  ip -n "$a" link set lo up && ip -n "$b" link set lo up || return 1
  ip -n "$a" link set "cxv${tag}a" up && ip -n "$b" link set "cxv${tag}b" up
}
