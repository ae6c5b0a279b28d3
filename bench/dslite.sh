#!/usr/bin/env bash
# Benchmark (not a test): DS-Lite softwire throughput against the plain path, in one
# run. topologies/dslite.toml is built twice, once per scenario (kernel and
# userspace softwire); the client and the server are the same namespaces and links
# each time, and iperf3 (Debian's, the neutral peer) measures TCP, one stream, both
# directions:
#   plain      native IPv6 client -> server (the veth path through b4 and aftr)
#   kernel     IPv4 over the kernel softwire (seg6 encap.red / End.DX4, nftables NAT44)
#   userspace  IPv4 over tunbench's userspace softwire (TUN + raw IPv6 socket, NAT44)
# Issue 4's targets: kernel >= 0.8x plain; userspace >= 0.35x kernel, both directions.
#
#   sudo bench/dslite.sh [ROUNDS [SECONDS]]       (defaults: 5 rounds, 5 s)
#   sudo JUMBO=1 bench/dslite.sh ...               (every link MTU 9000, softwire 8960)
#
# Rounds alternate the order of the paths. Prints every run, then per direction the
# medians, the median of the per-round ratios, and the datapath processes' CPU
# seconds per Gbit (userspace). The labs (bds<pid>k, bds<pid>u) are taken down on
# exit, also on failure or Ctrl-C.
#
# Figures, method and history: docs/benchmarks/dslite.md (index: BENCHMARKS.md).
set -euo pipefail
ROUNDS=${1:-5}
SECS=${2:-5}
cd "$(dirname "$0")/.."
. scripts/setup.sh --build --tests
cargo build --release -q
TB=${CARGO_TARGET_DIR:-target}/release/tunbench
K=bds$$k
U=bds$$u
cleanup() { "$TB" down "$K" >/dev/null 2>&1 || true; "$TB" down "$U" >/dev/null 2>&1 || true; }
trap cleanup EXIT INT TERM
TOPO=topologies/dslite.toml
if [ -n "${JUMBO:-}" ]; then
  # The softwire's other MTU policy: a raised underlay (every link 9000) so the
  # inner MTU is 8960: six times fewer packets per byte for the userspace path.
  TOPO=$(mktemp --suffix=.toml)
  awk '/^\[nodes\./ && !d { print "[defaults]\nmtu = 9000\n"; d = 1 }
       /^mtu = 1460$/ { print "mtu = 8960"; next } { print }' topologies/dslite.toml > "$TOPO"
fi
"$TB" up "$TOPO" --name "$K" --scenario kernel >&2
"$TB" up "$TOPO" --name "$U" --scenario userspace >&2

# run LAB ADDR [-R] -> Gbit/s received
run() {
  local lab=$1 addr=$2; shift 2
  ip netns exec "$lab-server" iperf3 -s -1 -D -p 5301 >/dev/null
  sleep 0.3
  ip netns exec "$lab-client" iperf3 -c "$addr" -p 5301 -t "$SECS" -J "$@" \
    | python3 -c 'import json,sys; print("%.3f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e9))'
}
cpu() { python3 -c "import json,sys; print(sum(json.load(open(f))['cpu_seconds'] for f in sys.argv[1:]))" /run/tunbench/"$U"/datapath-*.json; }

declare -A R
for r in $(seq 1 "$ROUNDS"); do
  order=(plain kernel userspace)
  [ $((r % 2)) = 0 ] && order=(userspace kernel plain)
  for dir in up down; do
    flag=(); [ "$dir" = down ] && flag=(-R)
    for p in "${order[@]}"; do
      case $p in
        plain) v=$(run "$K" 2001:2:0:52::10 "${flag[@]}") ;;
        kernel) v=$(run "$K" 198.18.52.10 "${flag[@]}") ;;
        userspace)
          c0=$(cpu); v=$(run "$U" 198.18.52.10 "${flag[@]}"); c1=$(cpu)
          R[cpu,$dir,$r]=$(python3 -c "print('%.3f' % (($c1-$c0)/($v*$SECS)))") ;;
      esac
      R[$p,$dir,$r]=$v
      echo "round $r $dir $p: $v Gbit/s" >&2
    done
  done
done

python3 - "$ROUNDS" <<PY
import statistics as st, sys
rounds = int(sys.argv[1])
R = {}
$(for k in "${!R[@]}"; do echo "R['$k'] = ${R[$k]}"; done)
def col(p, d): return [R[f"{p},{d},{r}"] for r in range(1, rounds + 1)]
print("| direction | plain veth (IPv6) | kernel DS-Lite | userspace DS-Lite | kernel/plain | userspace/kernel | userspace CPU s per Gbit |")
print("|---|---|---|---|---|---|---|")
for d, name in (("up", "upload (client sends)"), ("down", "download (-R)")):
    pl, k, u = col("plain", d), col("kernel", d), col("userspace", d)
    kp = st.median([a / b for a, b in zip(k, pl)])
    uk = st.median([a / b for a, b in zip(u, k)])
    print(f"| {name} | {st.median(pl):.2f} Gbit/s | {st.median(k):.2f} Gbit/s | {st.median(u):.2f} Gbit/s | {kp:.2f} | {uk:.2f} | {st.median(col('cpu', d)):.3f} |")
PY
