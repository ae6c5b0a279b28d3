#!/usr/bin/env bash
# Benchmark (not a test): what charging every frame its wire bytes costs on a
# shaped link, in one run. Two hosts on one link shaped to RATE both ways
# (1G and 2.5G); tunbench's engine measures TCP, one stream, left -> right,
# under two shapers of the same rate, alternating which goes first each round:
#   per-frame   what `tunbench up` builds: TBF charging each frame its 38 bytes
#               of Ethernet (84 at least), over a TBF that splits GSO packets
#               into the frames they become
#   per-gso     the shaper before issue 27: one TBF with overhead 24, which
#               charges a GSO super-packet's framing once
# For each: the goodput (steady state, after one omitted second), goodput /
# what gigabit Ethernet physics allows (1448 B per 1538 B), and the machine's
# busy CPU (/proc/stat, every core, user+system+irq+softirq) per Gbit of
# goodput.
#
#   sudo bench/shaped-link.sh [ROUNDS [SECONDS]]     (defaults: 3 rounds, 5 s)
#
# The lab (bsl<pid>) is taken down on exit, also on failure or Ctrl-C.
#
# Figures, method and history: docs/benchmarks/shaped-wire.md (index: BENCHMARKS.md).
set -euo pipefail
BENCH=shaped-link
ROUNDS=${1:-3}
SECS=${2:-5}
cd "$(dirname "$0")/.."
. bench/common.sh
num ROUNDS "$ROUNDS"
num SECONDS "$SECS"
build_tunbench
LAB=bsl$$
TOPO=$(mktemp --suffix=.toml)
cleanup() { "$TB" down "$LAB" >/dev/null 2>&1 || true; rm -f "$TOPO"; }
trap cleanup EXIT INT TERM

# busy_ticks -> clock ticks every core spent busy so far.
busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }

# shape RATE_BIT per-gso|per-frame: puts that shaper on left's eth0.
shape() {
  local ns=$LAB-left
  tc -n "$ns" qdisc del dev eth0 root 2>/dev/null || true
  if [[ $2 == per-gso ]]; then
    local burst=$(( $1 / 8 / 200 > 32768 ? $1 / 8 / 200 : 32768 ))
    tc -n "$ns" qdisc add dev eth0 root tbf rate "$1bit" burst "$burst" latency 50ms overhead 24
  else
    "$TB" impair "$LAB" left:eth0 --rate "$1" --direction out >/dev/null
  fi
}

# measure -> "Mbit/s busy_core_seconds" of one test, steady state.
measure() {
  ip netns exec "$LAB-right" "$TB" server -1 -p 5401 >/dev/null 2>&1 &
  local srv=$!
  for _ in $(seq 100); do
    [[ -n $(ip netns exec "$LAB-right" ss -Hltn "sport = :5401") ]] && break
    sleep 0.05
  done
  local t0 t1 json
  t0=$(busy_ticks)
  json=$(ip netns exec "$LAB-left" "$TB" client 198.18.88.2 -p 5401 -t "$SECS" -O 1 -J)
  t1=$(busy_ticks)
  wait "$srv" || true
  python3 - "$json" "$t0" "$t1" "$(getconf CLK_TCK)" <<'EOF'
import json, sys
j = json.loads(sys.argv[1])
# The sender's intervals after the omitted one: what crossed the shaper.
ivs = [iv["sum"] for iv in j["intervals"] if not iv["sum"]["omitted"]]
mbps = sum(i["bytes"] for i in ivs) * 8 / sum(i["seconds"] for i in ivs) / 1e6
busy = (int(sys.argv[3]) - int(sys.argv[2])) / int(sys.argv[4])
print(f"{mbps:.1f} {busy:.2f}")
EOF
}

for rate in 1000000000 2500000000; do
  cat > "$TOPO" <<EOF
name = "shaped"
[nodes.left]
kind = "host"
[nodes.right]
kind = "host"
[[links]]
a = { port = "left:eth0", ipv4 = "198.18.88.1/24" }
b = { port = "right:eth0", ipv4 = "198.18.88.2/24" }
impairments = { rate = "$rate" }
EOF
  "$TB" up "$TOPO" --name "$LAB" >&2
  physics=$(python3 -c "print($rate * 1448 / 1538 / 1e6)")
  for round in $(seq "$ROUNDS"); do
    order="per-frame per-gso"
    (( round % 2 == 0 )) && order="per-gso per-frame"
    for shaper in $order; do
      shape "$rate" "$shaper"
      read -r mbps busy < <(measure)
      python3 -c "
m, b, p, s = $mbps, $busy, $physics, $SECS + 1
print(f'rate $rate round $round $shaper: {m:.1f} Mbit/s, {m / p:.4f} x physics ({p:.1f}), '
      f'{b / s:.2f} cores busy, {b / (m * s / 1e3):.2f} core-s per Gbit')"
    done
  done
  "$TB" down "$LAB" >&2
done
