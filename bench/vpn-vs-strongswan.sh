#!/usr/bin/env bash
# Benchmark (not a test): tunbench's ESP (tunnel mode) and L2TP/IPsec datapaths
# against real strongSwan (IKEv2, charon with kernel-libipsec: userspace ESP) between
# the same two namespaces. The lab is topologies/vpn.toml (hosts a, b on one veth,
# tunnel `vpn` over it), built per scenario and run as lab `bvpn`:
#   esp         tunbench's ESP in UDP 4500, AES-GCM-128
#   l2tp-ipsec  tunbench's L2TP/PPP in ESP transport mode in UDP 4500, AES-GCM-128
#   ikev2       strongSwan 5.9 charon + kernel-libipsec, ESP AES-GCM-128 in UDP 4500
#   plain       the veth itself (the esp lab's raw path, its tunnel idle)
# The traffic is iperf3's (the neutral tool), TCP one stream, server in b, client in a:
#   tcp1-ab  iperf3 -c 198.18.73.2 -t SECONDS      tcp1-ba  ... -R
#
#   sudo bench/vpn-vs-strongswan.sh [ROUNDS [SECONDS]]      (defaults: 5 rounds, 5 s)
#
# Each round brings the lab up per scenario in turn (the order rotates from round to
# round), runs both tests and takes the lab down. Per test: the received bit/s
# (end.sum_received of the client's -J) and the CPU seconds of every process of the
# lab's two namespaces but iperf3 (tunbench's datapaths; charon and its helpers) while
# the client ran. Prints every run, then a markdown table: per test and scenario the
# median Gbit/s over the rounds with min-max, the median of the per-round ratios
# esp/ikev2 and l2tp-ipsec/esp, and the median CPU seconds per Gbit.
#
# Environment: CARGO_TARGET_DIR, PORT (iperf3's port in the lab, default 5201).
#
# Figures, method and history: docs/benchmarks/vpn-vs-strongswan.md (index: BENCHMARKS.md).
set -euo pipefail
ROUNDS=${1:-${ROUNDS:-5}}
SECS=${2:-${DURATION:-5}}
PORT=${PORT:-5201}
cd "$(dirname "$0")/.."
. scripts/setup.sh --build --tests

BENCH=vpn-vs-strongswan
. bench/common.sh
num ROUNDS "$ROUNDS"; num SECONDS "$SECS"; num PORT "$PORT"
for c in iperf3 python3 ss swanctl; do command -v "$c" >/dev/null || die "$c is missing"; done

build_tunbench

LAB=bvpn
TOPO=topologies/vpn.toml
HZ=$(getconf CLK_TCK)
exec 9>/run/lock/tunbench-bench-bvpn.lock
flock -n 9 || die "another run holds lab $LAB (/run/lock/tunbench-bench-bvpn.lock)"

work=$(mktemp -d /tmp/vpn-vs-strongswan.XXXXXX)
SERVER_PID=
lab_down() {
    if [[ -n $SERVER_PID ]]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=; fi
    "$TB" down "$LAB" >/dev/null 2>&1 || true
}
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    lab_down
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
"$TB" down "$LAB" >/dev/null 2>&1 || true

lab_up() { # scenario
    "$TB" up "$TOPO" --scenario "$1" --name "$LAB" >"$work/up.log" 2>&1 || { cat "$work/up.log" >&2; die "tunbench up --scenario $1 failed"; }
    local i
    for ((i = 0; i < 20; i++)); do
        ip netns exec "$LAB-a" ping -c1 -W1 -q 198.18.73.2 >/dev/null 2>&1 && return 0
    done
    die "$1: no answer through the tunnel (198.18.73.2) for 20 s"
}

# CPU ticks (utime+stime) of every process in the lab's namespaces but iperf3.
lab_ticks() {
    local ns p t=0 v
    for ns in "$LAB-a" "$LAB-b"; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do
            [[ $(cat /proc/"$p"/comm 2>/dev/null) == iperf3 ]] && continue
            v=$(proc_ticks "$p") || true
            t=$((t + ${v:-0}))
        done
    done
    echo "$t"
}


run_once() { # addr args...: sets BPS, GBIT, CPU
    local addr=$1 i c0 c1 rc=0
    shift
    ip netns exec "$LAB-b" iperf3 -s -1 -p "$PORT" >/dev/null 2>&1 &
    SERVER_PID=$!
    for ((i = 0; i < 250; i++)); do listening && break; sleep 0.02; done
    c0=$(lab_ticks)
    timeout $((SECS + 30)) ip netns exec "$LAB-a" iperf3 -c "$addr" -p "$PORT" -t "$SECS" -J "$@" \
        >"$work/client.json" 2>"$work/client.err" || rc=$?
    c1=$(lab_ticks)
    for ((i = 0; i < 250; i++)); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.02; done
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=
    ((rc == 0)) || return 1
    read -r BPS GBIT < <(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
if "error" in d: sys.exit(1)
s = d["end"]["sum_received"]
if s["bits_per_second"] <= 0: sys.exit(1)
print(s["bits_per_second"], s["bytes"] * 8 / 1e9)' "$work/client.json") || return 1
    CPU=$(awk -v a="$c0" -v b="$c1" -v hz="$HZ" 'BEGIN {printf "%.2f", (b - a) / hz}')
}

FAILS=0
DATA=$work/runs.tsv
printf 'round\timpl\ttest\tbps\tgbit\tcpu_s\n' >"$DATA"
rev=$(git describe --always --dirty 2>/dev/null || echo unknown)
printf '# %s, tunbench at %s, lab %s (%s), %s rounds, -t %s s, TCP, iperf3 server in b, client in a\n' \
    "$(date -u +%FT%TZ)" "$rev" "$LAB" "$TOPO" "$ROUNDS" "$SECS"
printf '# %s; strongSwan %s\n' "$(iperf3 --version | head -n1)" \
    "$(dpkg-query -W -f '${Version}' strongswan-charon 2>/dev/null || echo '?')"
printf '# machine: %s CPUs (%s), Linux %s, load average %s\n' "$(nproc)" \
    "$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)" "$(uname -r)" "$(cut -d' ' -f1-3 /proc/loadavg)"

ORDER=(esp ikev2 l2tp-ipsec plain)
for ((r = 1; r <= ROUNDS; r++)); do
    k=$(((r - 1) % ${#ORDER[@]}))
    order=("${ORDER[@]:k}" "${ORDER[@]:0:k}")
    echo "round $r of $ROUNDS: ${order[*]}" >&2
    for impl in "${order[@]}"; do
        if [[ $impl == plain ]]; then lab_up esp; addr=198.18.72.2; else lab_up "$impl"; addr=198.18.73.2; fi
        for t in tcp1-ab tcp1-ba; do
            args=(); [[ $t == tcp1-ba ]] && args=(-R)
            ok=0
            for a in 1 2 3; do
                if run_once "$addr" "${args[@]}"; then ok=1; break; fi
                echo "  $impl $t failed (attempt $a): $(head -c 300 "$work/client.err")" >&2
                sleep 1
            done
            if ((ok)); then
                printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$impl" "$t" "$BPS" "$GBIT" "$CPU" >>"$DATA"
                line=$(printf 'round %d %-11s %-8s %6.2f Gbit/s  cpu %5.2f s' "$r" "$impl" "$t" \
                    "$(awk -v b="$BPS" 'BEGIN {print b / 1e9}')" "$CPU")
            else
                FAILS=$((FAILS + 1))
                line=$(printf 'round %d %-11s %-8s FAILED' "$r" "$impl" "$t")
            fi
            echo "$line"
            echo "  $line" >&2
        done
        lab_down
    done
done

python3 - "$DATA" "$ROUNDS" <<'PY'
import csv, statistics as st, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
rounds = int(sys.argv[2])
tests = [("tcp1-ab", "TCP 1 stream a->b"), ("tcp1-ba", "TCP 1 stream b->a (-R)")]
impls = ["plain", "esp", "l2tp-ipsec", "ikev2"]
fig = {(r["impl"], r["test"], int(r["round"])): r for r in rows}
gb = lambda x: float(x["bps"]) / 1e9
def cell(i, t):
    v = [gb(fig[(i, t, r)]) for r in range(1, rounds + 1) if (i, t, r) in fig]
    if not v:
        return "-"
    n = "" if len(v) == rounds else f" n={len(v)}"
    return f"{st.median(v):.2f} ({min(v):.2f}-{max(v):.2f}){n}"
def ratio(t, a, b):
    v = [gb(fig[(a, t, r)]) / gb(fig[(b, t, r)]) for r in range(1, rounds + 1)
         if (a, t, r) in fig and (b, t, r) in fig]
    return f"{st.median(v):.2f} ({min(v):.2f}-{max(v):.2f})" if v else "-"
def cpg(i, t):
    v = [float(fig[(i, t, r)]["cpu_s"]) / float(fig[(i, t, r)]["gbit"])
         for r in range(1, rounds + 1) if (i, t, r) in fig]
    return f"{st.median(v):.2f}" if v else "-"
print()
print("| test | plain link | esp (tunbench) | l2tp-ipsec (tunbench) | IKEv2 (strongSwan libipsec) "
      "| esp/ikev2 | l2tp-ipsec/esp | CPU-s/Gbit esp | l2tp-ipsec | ikev2 |")
print("|---|---|---|---|---|---|---|---|---|---|")
for t, name in tests:
    print(f"| {name} | " + " | ".join(cell(i, t) for i in impls)
          + f" | {ratio(t, 'esp', 'ikev2')} | {ratio(t, 'l2tp-ipsec', 'esp')} | "
          + " | ".join(cpg(i, t) for i in ["esp", "l2tp-ipsec", "ikev2"]) + " |")
print(f"\nGbit/s received: median over {rounds} rounds (min-max). Ratios: median (min-max) of the "
      "per-round ratios. CPU-s/Gbit: CPU seconds of every process of the lab's namespaces but "
      "iperf3, per Gbit received, median over rounds.")
PY
((FAILS == 0)) || echo "# $FAILS test(s) failed three times and are missing from the table"
