#!/usr/bin/env bash
# Runs a command in a private network namespace whose loopback is rate-limited (and
# optionally delayed) with tc, so MPI over TCP sees a slow network. The namespace is
# removed afterwards, also on failure or Ctrl-C.
#   scripts/netns_run.sh RATE [DELAY] -- command...
#   e.g. scripts/netns_run.sh 100mbit 1ms -- mpirun --allow-run-as-root -np 2 ... \
#          --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo ...
# RATE uses tc units (100mbit, 1gbit, 10gbit); DELAY e.g. 0.5ms (default none; needs netem).
# Environment: BURST, the token-bucket depth in bytes (default max(128 KiB, 1 ms of RATE)).
# After an idle gap, up to BURST bytes pass at memory speed, so a deep bucket makes small
# (sparse) exchanges look free: the earlier 256 KB let a 32 KB allgatherv finish in 0.03 ms
# at 100mbit. It cannot go below two of loopback's 64 KiB GSO packets either: with 18 KB
# (GSO on) transfers stalled for seconds, with GSO off (gso_max_size) the small packets cost
# more CPU than the 2 cores can spare at 1-10 Gbit/s. So the error per collective is at
# most BURST / RATE: 10 ms at 100mbit, 1 ms at 1gbit and 10gbit.
#
# Delay is blocked on this machine: the kernel (6.18, no /lib/modules, no modprobe) has no
# sch_netem ("Specified qdisc kind is unknown"), nor fq/etf for an eBPF departure-time
# delay; checked 2026-11-22 with `tc qdisc add dev lo root netem delay 1ms` in a netns.
# Only tbf, htb, pfifo and clsact load. So the emulated link has rate, not latency: the
# alpha of scripts/scaling_model.py is loopback TCP's own (tens of microseconds).
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
# A SIGKILL (a stopped session, the OOM killer) skips the trap below: remove namespaces
# left by netns_run processes that no longer exist before making a new one.
for stale in $(ip netns list 2>/dev/null | awk '$1 ~ /^st_bw_[0-9]+$/ {print $1}'); do
  kill -0 "${stale#st_bw_}" 2>/dev/null || { ip netns del "$stale" && echo "netns_run: removed stale $stale" >&2; }
done
ns=st_bw_$$
cleanup() { ip netns del "$ns" 2>/dev/null || true; }
trap cleanup EXIT INT TERM
rate_bytes=$(/usr/bin/python3 -c '
import re, sys
m = re.fullmatch(r"(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit|tbit)", sys.argv[1])
if not m: sys.exit("netns_run: RATE must look like 100mbit, 1gbit or 10gbit, got " + sys.argv[1])
print(int(float(m.group(1)) * {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12}[m.group(2)] / 8))' "$rate")
burst=${BURST:-$(( rate_bytes / 1000 > 131072 ? rate_bytes / 1000 : 131072 ))}
ip netns add "$ns"
ip netns exec "$ns" ip link set lo up
# Rate: a token bucket (tbf) of $burst bytes (at least two GSO packets) whose queue
# holds a second of traffic, so bursts wait instead of being dropped. Delay needs netem
# (sch_netem), which not every kernel has: then it is a clear error.
if [[ -n $delay ]]; then
  ip netns exec "$ns" tc qdisc add dev lo root handle 1: netem delay "$delay" ||
    { echo "netns_run: this kernel has no netem qdisc; run without DELAY" >&2; exit 2; }
  ip netns exec "$ns" tc qdisc add dev lo parent 1: handle 2: tbf rate "$rate" burst "$burst" latency 1s
else
  ip netns exec "$ns" tc qdisc add dev lo root tbf rate "$rate" burst "$burst" latency 1s
fi
echo "netns_run: $ns loopback limited to $rate (burst $burst bytes)${delay:+, delay $delay}" >&2
ip netns exec "$ns" "$@"
