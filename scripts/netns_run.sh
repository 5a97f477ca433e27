#!/usr/bin/env bash
# Runs a command in a private network namespace whose loopback is rate-limited (and
# optionally delayed) with tc, so MPI over TCP sees a slow network. The namespace is
# removed afterwards, also on failure or Ctrl-C.
#   scripts/netns_run.sh RATE [DELAY] -- command...
#   e.g. scripts/netns_run.sh 100mbit 1ms -- mpirun --allow-run-as-root -np 2 ... \
#          --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo ...
# RATE uses tc units (100mbit, 1gbit); DELAY e.g. 0.5ms (default none; needs netem).
set -euo pipefail
if [[ $# -lt 3 ]]; then
  echo "usage: $0 RATE [DELAY] -- command..." >&2
  exit 2
fi
rate=$1
shift
delay=""
if [[ $1 != "--" ]]; then
  delay=$1
  shift
fi
[[ $1 == "--" ]] || { echo "netns_run: expected -- before the command" >&2; exit 2; }
shift
[[ $(id -u) -eq 0 ]] || { echo "netns_run: needs root (ip netns, tc)" >&2; exit 2; }
ns=st_bw_$$
cleanup() { ip netns del "$ns" 2>/dev/null || true; }
trap cleanup EXIT INT TERM
ip netns add "$ns"
ip netns exec "$ns" ip link set lo up
# Rate: a token bucket (tbf) whose burst covers loopback's 64 KiB MTU and whose queue
# holds a second of traffic, so bursts wait instead of being dropped. Delay needs netem
# (sch_netem), which not every kernel has: then it is a clear error.
if [[ -n $delay ]]; then
  ip netns exec "$ns" tc qdisc add dev lo root handle 1: netem delay "$delay" ||
    { echo "netns_run: this kernel has no netem qdisc; run without DELAY" >&2; exit 2; }
  ip netns exec "$ns" tc qdisc add dev lo parent 1: handle 2: tbf rate "$rate" burst 256kb latency 1s
else
  ip netns exec "$ns" tc qdisc add dev lo root tbf rate "$rate" burst 256kb latency 1s
fi
echo "netns_run: $ns loopback limited to $rate${delay:+, delay $delay}" >&2
ip netns exec "$ns" "$@"
