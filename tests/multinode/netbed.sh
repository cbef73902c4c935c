#!/usr/bin/env bash
# A cluster of "hosts" on one machine for the multinode tests: Linux network namespaces joined by
# veth pairs to a bridge that lives in a namespace of its own, so that no traffic touches the
# machine's own network. Needs root and iproute2.
#
#   netbed.sh up N          hosts <P>-h0 .. <P>-h(N-1) at 10.77.0.1 .. 10.77.0.N (/24)
#   netbed.sh down          removes every namespace of the bed
#   netbed.sh run HOST CMD  runs CMD on HOST (h0, h1, ... or its address): in its network
#                           namespace, with its own hostname (<P>-hI) and mount namespace, in which
#                           $QKV_BED_HIDE (a folder) is covered by an empty tmpfs on every host but
#                           h0: a file system only h0 sees
#   netbed.sh agent HOST CMD...
#                           the same, as Open MPI's rsh agent: mpirun --mca plm_rsh_agent netbed-rsh
#   netbed.sh link HOST up|down     the host's link to the bridge
#   netbed.sh rate HOST RATE|off    a token-bucket rate limit on the host's outgoing traffic
#                                   (tc tbf, e.g. 2mbit), with netem's delay when the kernel has it
#
# P is $QKV_BED_PREFIX (default qkvbed). Exit status 77 when the bed cannot be made here (not
# root, no `ip`, no network namespaces), which CTest reports as skipped.
set -euo pipefail

prefix=${QKV_BED_PREFIX:-qkvbed}
net=$prefix-net

host_index() {  # h3, 3 or 10.77.0.4 -> 3
  case "$1" in
    h[0-9]*) echo "${1#h}" ;;
    "$prefix"-h[0-9]*) echo "${1#"$prefix"-h}" ;;
    10.77.0.*) echo $(( ${1##*.} - 1 )) ;;
    [0-9]*) echo "$1" ;;
    *) echo "netbed: unknown host '$1' (expected h0, h1, ... or 10.77.0.1, ...)" >&2; exit 2 ;;
  esac
}

cant() { echo "netbed: $*" >&2; exit 77; }

up() {
  local n=$1
  [ "$(id -u)" = 0 ] || cant "needs root (network namespaces)"
  command -v ip >/dev/null || cant "needs iproute2's ip"
  down
  ip netns add "$net" 2>/dev/null || cant "cannot create network namespaces here"
  ip -n "$net" link add br0 type bridge
  ip -n "$net" link set br0 up
  for ((i = 0; i < n; i++)); do
    ip netns add "$prefix-h$i"
    ip link add "$prefix-v$i" type veth peer name eth0 netns "$prefix-h$i"
    ip link set "$prefix-v$i" netns "$net"
    ip -n "$net" link set "$prefix-v$i" master br0 up
    ip -n "$prefix-h$i" addr add "10.77.0.$((i + 1))/24" dev eth0
    ip -n "$prefix-h$i" link set eth0 up
    ip -n "$prefix-h$i" link set lo up
  done
}

down() {  # the processes left on the hosts too (an orted whose job ended badly)
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$prefix-" || true); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns"
  done
}

# The host's view of the machine, then CMD (a shell command line).
run_on() {
  local i=$1
  shift
  local setup="hostname $prefix-h$i"
  if [ -n "${QKV_BED_HIDE:-}" ] && [ "$i" != 0 ]; then
    setup+="; mkdir -p '$QKV_BED_HIDE' && mount -t tmpfs -o size=1m qkvbed-hidden '$QKV_BED_HIDE'"
  fi
  exec ip netns exec "$prefix-h$i" unshare --uts --mount --propagation private /bin/sh -c "$setup; exec $*"
}

cmd=${1:-}
shift || true
case "$cmd" in
  up) up "${1:?netbed up N}" ;;
  down) down ;;
  run) i=$(host_index "${1:?netbed run HOST CMD}"); shift; run_on "$i" "$*" ;;
  agent) i=$(host_index "${1:?netbed agent HOST CMD}"); shift; run_on "$i" "$*" ;;
  link) ip -n "$net" link set "$prefix-v$(host_index "$1")" "${2:?up or down}" ;;
  rate)
    i=$(host_index "$1")
    if [ "${2:?RATE or off}" = off ]; then
      ip netns exec "$prefix-h$i" tc qdisc del dev eth0 root 2>/dev/null || true
    elif ip netns exec "$prefix-h$i" tc qdisc replace dev eth0 root netem delay 20ms rate "$2" 2>/dev/null; then
      :
    else
      ip netns exec "$prefix-h$i" tc qdisc replace dev eth0 root tbf rate "$2" burst 16kb latency 2s
    fi ;;
  *) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
