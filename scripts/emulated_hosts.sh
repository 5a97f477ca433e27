#!/usr/bin/env bash
# Emulates a small cluster on one machine: N hosts, each a network namespace with its own
# address (10.211.0.x on a shared bridge) and its own host name (a UTS namespace per
# launched process tree), so mpirun starts ranks "remotely" exactly as on real nodes, with
# this script as its remote launch agent instead of ssh. mpirun itself runs inside the
# first host. The namespaces are removed afterwards, also on failure or Ctrl-C.
#   scripts/emulated_hosts.sh [--rate RATE] [--bytes FILE] N -- mpirun-arguments...
# --rate limits each host's link to the switch in both directions (tc tbf, units as
# netns_run.sh: 100mbit, 1gbit) with a token bucket of BURST bytes (environment, default
# 131072: 10 ms at 100 Mbit/s, so a transfer after an idle moment starts that far ahead
# of the line rate; 16384 is closer to a real port, but its frequent timer wake-ups take
# CPU from the ranks on a small machine: docs/RESULTS.md, "A full-duplex link"). Inside a
# host, ranks talk through shared memory, so only traffic between hosts is limited.
# --bytes writes, after the run, the bytes each host sent to the others ("st-host<i>
# <bytes>", from its link's counters: everything that crossed the slow link, MPI's
# start-up included).
# runs: mpirun --hostfile <N hosts, slots=64> --mca plm_rsh_agent <this script> \
#         --mca oob_tcp_if_include / btl_tcp_if_include <the emulated subnet> --bind-to none
#         arguments...
# Host i (1-based) is called st-host<i> and has address 10.211.0.<i>. Needs root.
# Internal use (the launch agent): scripts/emulated_hosts.sh --agent RUN HOST COMMAND-STRING
set -euo pipefail
subnet=10.211.0
tag=st_eh

if [[ ${1:-} == --agent ]]; then
  # mpirun calls the agent like ssh: host, then the remote command as one string.
  run=$2 host=$3
  shift 3
  i=${host##*.}
  [[ $host == "$subnet.$i" && $i =~ ^[0-9]+$ ]] || { echo "emulated_hosts: unknown host $host" >&2; exit 255; }
  ns=${run}_$i
  ip netns list | grep -q "^$ns\b" || { echo "emulated_hosts: no namespace $ns" >&2; exit 255; }
  exec ip netns exec "$ns" unshare --uts sh -c "hostname st-host$i && $*"
fi

rate="" bytes_file=""
while [[ ${1:-} == --rate || ${1:-} == --bytes ]]; do
  [[ $# -ge 2 ]] || { echo "emulated_hosts: $1 needs a value" >&2; exit 2; }
  [[ $1 == --rate ]] && rate=$2 || bytes_file=$2
  shift 2
done
if [[ -n $rate && ! $rate =~ ^[0-9]+(\.[0-9]+)?(kbit|mbit|gbit)$ ]]; then
  echo "emulated_hosts: --rate must look like 100mbit or 1gbit, got $rate" >&2
  exit 2
fi
if [[ $# -lt 2 || $2 != "--" ]]; then
  echo "usage: $0 [--rate RATE] [--bytes FILE] N -- mpirun-arguments..." >&2
  exit 2
fi
n=$1
shift 2
[[ $n =~ ^[0-9]+$ && $n -ge 1 && $n -le 16 ]] || { echo "emulated_hosts: N must be 1..16, got $n" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || { echo "emulated_hosts: needs root (ip netns, unshare)" >&2; exit 2; }
self=$(realpath "$0")
burst=${BURST:-131072}
[[ $burst =~ ^[0-9]+$ && $burst -ge 2048 ]] || { echo "emulated_hosts: BURST must be a byte count >= 2048, got $burst" >&2; exit 2; }
run=${tag}$$
# A SIGKILL skips the trap below: remove what earlier runs that no longer exist left behind.
for stale in $(ip netns list 2>/dev/null | awk -v t="$tag" '$1 ~ "^"t"[0-9]+_" {print $1}'); do
  pid=${stale#"$tag"}
  kill -0 "${pid%%_*}" 2>/dev/null || ip netns del "$stale" 2>/dev/null || true
done
ip link del "${run}_br" 2>/dev/null || true
tmp=$(mktemp -d)
cleanup() {
  for ((i = 1; i <= n; i++)); do ip netns del "${run}_$i" 2>/dev/null || true; done
  ip link del "${run}_br" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
# One bridge in the root namespace joins every host's veth: a switched LAN.
ip link add "${run}_br" type bridge
ip link set "${run}_br" up
for ((i = 1; i <= n; i++)); do
  ns=${run}_$i
  ip netns add "$ns"
  ip link add "${run}h$i" type veth peer name eth0 netns "$ns"
  ip link set "${run}h$i" master "${run}_br" up
  ip -n "$ns" addr add "$subnet.$i/24" dev eth0
  ip -n "$ns" link set lo up
  ip -n "$ns" link set eth0 up
  echo "$subnet.$i slots=64" >>"$tmp/hostfile"
  if [[ -n $rate ]]; then
    # A token bucket each way (out of the host on its eth0, into it on the switch side)
    # whose queue holds a second of traffic, so bursts wait instead of being dropped.
    ip -n "$ns" link set eth0 txqueuelen 10000
    ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" burst "$burst" latency 1s
    tc qdisc add dev "${run}h$i" root tbf rate "$rate" burst "$burst" latency 1s
  fi
done
sent_bytes() {
  [[ -n $bytes_file ]] || return 0
  : >"$bytes_file"
  for ((i = 1; i <= n; i++)); do
    echo "st-host$i $(ip netns exec "${run}_$i" cat /sys/class/net/eth0/statistics/tx_bytes)" >>"$bytes_file"
  done
}
status=0
# --bind-to none: the emulated hosts share this machine's cores, and each host's mpirun
# daemon binds its own ranks from core 0 up, so with one rank per host every rank would
# be bound to core 0 (two ranks would share one core and leave the other idle).
ip netns exec "${run}_1" unshare --uts sh -c 'hostname st-host1 && exec "$@"' sh \
  mpirun --allow-run-as-root --hostfile "$tmp/hostfile" --mca plm_rsh_agent "$self --agent $run" \
  --mca oob_tcp_if_include "$subnet.0/24" --mca btl_tcp_if_include "$subnet.0/24" --bind-to none \
  "$@" || status=$?
sent_bytes
exit $status
