#!/usr/bin/env bash
# Benchmark (not a test): tunbench's WireGuard datapath against the two other userspace
# implementations it can run as peers, boringtun-cli 0.7.1 (crates.io) and Debian's
# wireguard-go, both peers on the same implementation each time. The lab is
# bench/wireguard-peers.toml (two hosts a, b on one veth, a WireGuard tunnel over it),
# built once per implementation and run as lab `bwg`; the traffic is iperf3's (the
# neutral tool), TCP only, server in b, client in a:
#   tcp1 a->b    iperf3 -c 198.18.71.2 -t SECONDS
#   tcp1 b->a    ... -R
#   tcp4 a->b    ... -P 4
#   tcp4 b->a    ... -P 4 -R
# The plain link (same four tests to 198.18.70.2, no tunnel) is measured once per round
# as the reference.
#
#   sudo bench/wireguard-vs-peers.sh [ROUNDS [SECONDS]]      (defaults: 5 rounds, 5 s)
#
# Each round brings the lab up with each implementation in turn (the order rotates from
# round to round, the plain link taking a turn too, so machine noise hits all alike),
# runs the four tests and takes the lab down. Per test it records the received bit/s
# (end.sum_received of the client's -J) and the CPU seconds both WireGuard processes
# used while the client ran: utime+stime from /proc/PID/stat of tunbench's datapath
# process ("pid" in /run/tunbench/bwg/datapath-wg-NODE.json), or of the wireguard-go /
# boringtun-cli process ("child_pid") for the external ones, summed over a and b. For
# tunbench the datapath's own "cpu_seconds" (its datapath threads) is recorded as a
# cross-check.
#
# Environment: CARGO_TARGET_DIR (default: target/ of the workspace), PORT (iperf3's
# port inside the lab, default 5201), RESULTS (a file to keep the per-run figures in,
# tab-separated; default: none). boringtun-cli 0.7.1 is used from PATH, else from
# target/peers/bin, where it is installed when missing (cargo install, ~40 s).
#
# Prints every run, then a markdown table: per test and implementation the median
# Gbit/s over the rounds with min-max, the median of the per-round ratios
# tunbench/boringtun and tunbench/wireguard-go, and the median CPU seconds per Gbit
# received. Progress goes to stderr. The lab is taken down on exit, also on failure or
# Ctrl-C, and processes it leaves are killed.
#
# Figures, method and history: docs/benchmarks/wireguard.md (index: BENCHMARKS.md).
set -euo pipefail
ROUNDS=${1:-${ROUNDS:-5}}
SECS=${2:-${DURATION:-5}}
PORT=${PORT:-5201}
cd "$(dirname "$0")/.."
ROOT=$(pwd)
. scripts/setup.sh --build --tests

BENCH=wireguard-vs-peers
. bench/common.sh
num ROUNDS "$ROUNDS"; num SECONDS "$SECS"; num PORT "$PORT"
for c in iperf3 wireguard-go python3 ss; do command -v "$c" >/dev/null || die "$c is missing"; done

build_tunbench

# boringtun-cli 0.7.1: from PATH, else target/peers/bin (installed there when missing).
BT_VERSION=0.7.1
bt_ok() { command -v boringtun-cli >/dev/null && [[ $(boringtun-cli --version 2>/dev/null) == *" $BT_VERSION" ]]; }
if ! bt_ok; then
    export PATH="$ROOT/target/peers/bin:$PATH"
    if ! bt_ok; then
        echo "installing boringtun-cli $BT_VERSION into $ROOT/target/peers (~40 s) ..." >&2
        # Its own build directory: not the one tunbench is built in.
        env -u CARGO_TARGET_DIR cargo install --locked --quiet boringtun-cli --version "$BT_VERSION" \
            --root "$ROOT/target/peers" >&2
        bt_ok || die "boringtun-cli $BT_VERSION is not on PATH after cargo install"
    fi
fi

LAB=bwg
TOPO=bench/wireguard-peers.toml
IMPLS=(tunbench boringtun wireguard-go)
TESTS=(tcp1-ab tcp1-ba tcp4-ab tcp4-ba)
declare -A ARGS=([tcp1-ab]="" [tcp1-ba]="-R" [tcp4-ab]="-P 4" [tcp4-ba]="-P 4 -R")
HZ=$(getconf CLK_TCK)

# One run of this script at a time owns lab bwg.
exec 9>/run/lock/tunbench-bench-bwg.lock
flock -n 9 || die "another run holds lab $LAB (/run/lock/tunbench-bench-bwg.lock)"

work=$(mktemp -d /tmp/wireguard-vs-peers.XXXXXX)
SERVER_PID=
WG_PIDS=()     # every datapath and child pid seen, to kill should one outlive the lab
alive() { # pid: a datapath, wireguard-go or boringtun-cli process that is not a zombie
    local st
    case $(cat /proc/"$1"/comm 2>/dev/null) in
        tunbench | wireguard-go | boringtun-cli) ;;
        *) return 1 ;;
    esac
    st=$(awk '/^State:/ {print $2}' /proc/"$1"/status 2>/dev/null)
    [[ -n $st && $st != Z ]]
}
lab_down() {
    local ns p
    if [[ -n $SERVER_PID ]]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=; fi
    # iperf3 left in the lab's namespaces (a client killed by Ctrl-C, a server)
    for ns in $LAB-a $LAB-b; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do
            [[ $(cat /proc/"$p"/comm 2>/dev/null) == iperf3 ]] && kill "$p" 2>/dev/null || true
        done
    done
    "$TB" down "$LAB" >/dev/null 2>&1 || true
    # `down` stops them; give them 5 s to be gone (a zombie waiting for its reaper is
    # gone), then kill what is left.
    local i left
    for ((i = 0; i < 50; i++)); do
        left=()
        for p in "${WG_PIDS[@]}"; do alive "$p" && left+=("$p"); done
        ((${#left[@]})) || break
        sleep 0.1
    done
    for p in "${left[@]}"; do
        alive "$p" || continue
        echo "killing leftover $(cat /proc/"$p"/comm 2>/dev/null) $p" >&2
        kill -9 "$p" 2>/dev/null || true
    done
    WG_PIDS=()
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

# A lab of that name left by an earlier run that was killed hard: ours, remove it.
if [[ -e /run/tunbench/$LAB ]] || ip netns list | grep -q "^$LAB-"; then
    echo "removing a leftover lab $LAB" >&2
    "$TB" down "$LAB" >&2 || true
fi

# --- lab up with one implementation; sets CPU_PIDS (what is measured) and DP_PIDS
jget() { python3 -c 'import json,sys; v=json.load(open(sys.argv[1])).get(sys.argv[2]); print("" if v is None else v)' "$@" 2>/dev/null || true; }
lab_up() { # scenario
    local impl=$1 n i p c
    "$TB" up "$TOPO" --scenario "$impl" --name "$LAB" >"$work/up.log" 2>&1 || { cat "$work/up.log" >&2; die "tunbench up --scenario $impl failed"; }
    CPU_PIDS=() DP_PIDS=()
    for n in a b; do
        local f=/run/tunbench/$LAB/datapath-wg-$n.json
        p= c=
        for ((i = 0; i < 150; i++)); do
            if [[ -s $f ]]; then
                p=$(jget "$f" pid)
                [[ $impl == tunbench ]] && break
                c=$(jget "$f" child_pid)
                [[ -n $c ]] && break
            fi
            sleep 0.1
        done
        [[ -n $p ]] || die "$impl: no datapath stats for $n after 15 s ($f)"
        [[ $impl == tunbench || -n $c ]] || die "$impl: no child_pid for $n after 15 s ($f)"
        DP_PIDS+=("$p")
        WG_PIDS+=("$p" ${c:+"$c"})
        if [[ $impl == tunbench ]]; then CPU_PIDS+=("$p"); else CPU_PIDS+=("$c"); fi
    done
    # The handshake before anything is timed.
    for ((i = 0; i < 20; i++)); do
        ip netns exec "$LAB-a" ping -c1 -W1 -q 198.18.71.2 >/dev/null 2>&1 && return 0
    done
    die "$impl: no answer through the tunnel (198.18.71.2) for 20 s"
}

cpu_ticks() { # pids... -> sum of utime+stime in clock ticks
    local p t=0 v
    for p in "$@"; do
        v=$(proc_ticks "$p") || true
        [[ -n $v ]] || { echo "process $p is gone" >&2; echo -1; return; }
        t=$((t + v))
    done
    echo "$t"
}
# tunbench's own figure, from the stats files (written every second): the sum over
# both peers. After a test, wait for both files to be written again.
json_cpu() { python3 -c 'import json,sys; print(sum(json.load(open(f))["cpu_seconds"] for f in sys.argv[1:]))' /run/tunbench/$LAB/datapath-wg-{a,b}.json; }
json_fresh() { # epoch seconds: wait (at most 3 s) until both files are newer than this
    python3 - "$1" /run/tunbench/$LAB/datapath-wg-{a,b}.json <<'PY' || true
import os, sys, time
t, files = float(sys.argv[1]), sys.argv[2:]
for _ in range(30):
    if all(os.stat(f).st_mtime > t for f in files):
        break
    time.sleep(0.1)
PY
}


# --- one test; sets BPS, GBIT (received), CPU (s), JCPU (s, tunbench only, else "")
run_once() { # impl addr args...
    local impl=$1 addr=$2 i c0 c1 j0 t1
    shift 2
    ip netns exec "$LAB-b" iperf3 -s -1 -J -p "$PORT" >"$work/server.json" 2>&1 &
    SERVER_PID=$!
    for ((i = 0; i < 250; i++)); do listening && break; sleep 0.02; done
    JCPU=
    [[ $impl == tunbench ]] && j0=$(json_cpu)
    c0=$(cpu_ticks "${CPU_PIDS[@]}")
    local rc=0
    timeout $((SECS + 30)) ip netns exec "$LAB-a" iperf3 -c "$addr" -p "$PORT" -t "$SECS" -J "$@" \
        >"$work/client.json" 2>"$work/client.err" || rc=$?
    c1=$(cpu_ticks "${CPU_PIDS[@]}")
    t1=$(date +%s.%N)
    for ((i = 0; i < 250; i++)); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.02; done
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=
    ((rc == 0)) || return 1
    ((c0 >= 0 && c1 >= 0)) || return 1
    read -r BPS GBIT < <(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
if "error" in d: sys.exit(1)
s = d["end"]["sum_received"]
if s["bits_per_second"] <= 0: sys.exit(1)
print(s["bits_per_second"], s["bytes"] * 8 / 1e9)' "$work/client.json") || return 1
    CPU=$(awk -v a="$c0" -v b="$c1" -v hz="$HZ" 'BEGIN {printf "%.2f", (b - a) / hz}')
    if [[ $impl == tunbench ]]; then
        json_fresh "$t1"
        JCPU=$(awk -v a="$j0" -v b="$(json_cpu)" 'BEGIN {printf "%.2f", b - a}')
    fi
}

FAILS=0
run() { # impl addr args...: run_once, retried twice; 1 when all three failed
    local a
    for a in 1 2 3; do
        run_once "$@" && return 0
        echo "  $1 ${*:3} failed (attempt $a): $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("error",""))' "$work/client.json" 2>/dev/null) $(head -c 300 "$work/client.err")" >&2
        sleep 1
    done
    FAILS=$((FAILS + 1))
    return 1
}

save_logs() { # tag
    mkdir -p "$work/logs/$1"
    cp /run/tunbench/$LAB/logs/*.log "$work/logs/$1/" 2>/dev/null || true
}

# --- rounds
DATA=$work/runs.tsv
printf 'round\timpl\ttest\tbps\tgbit\tcpu_s\tjson_cpu_s\n' >"$DATA"
rev=$(git describe --always --dirty 2>/dev/null || echo unknown)
printf '# %s, tunbench at %s, lab %s (%s), %s rounds, -t %s s, TCP, iperf3 server in b, client in a\n' \
    "$(date -u +%FT%TZ)" "$rev" "$LAB" "$TOPO" "$ROUNDS" "$SECS"
printf '# %s; %s; wireguard-go %s\n' "$(iperf3 --version | head -n1)" "$(boringtun-cli --version)" \
    "$(wireguard-go --version 2>/dev/null | awk 'NR == 1 {print $2}')"
printf '# machine: %s CPUs (%s), Linux %s, load average %s\n' "$(nproc)" \
    "$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)" "$(uname -r)" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '# cpu = CPU seconds of both WireGuard processes during the run (tunbench: datapath process [its cpu_seconds]; others: the child)\n'

ORDER=(tunbench boringtun wireguard-go plain)
for ((r = 1; r <= ROUNDS; r++)); do
    k=$(((r - 1) % ${#ORDER[@]}))
    order=("${ORDER[@]:k}" "${ORDER[@]:0:k}")
    echo "round $r of $ROUNDS: ${order[*]}" >&2
    for impl in "${order[@]}"; do
        if [[ $impl == plain ]]; then
            # The plain link of a lab whose tunnel is idle.
            lab_up tunbench; addr=198.18.70.2
        else
            lab_up "$impl"; addr=198.18.71.2
        fi
        for t in "${TESTS[@]}"; do
            # shellcheck disable=SC2086
            if run "$impl" "$addr" ${ARGS[$t]}; then
                [[ $impl == plain ]] && { CPU=; JCPU=; }
                printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$impl" "$t" "$BPS" "$GBIT" "${CPU:-}" "${JCPU:-}" >>"$DATA"
                line=$(printf 'round %d %-12s %-8s %6.2f Gbit/s' "$r" "$impl" "$t" "$(awk -v b="$BPS" 'BEGIN {print b / 1e9}')")
                [[ $impl == plain ]] || line+=$(printf '  cpu %5.2f s%s  %5.3f s/Gbit' "$CPU" "${JCPU:+ [$JCPU]}" \
                    "$(awk -v c="$CPU" -v g="$GBIT" 'BEGIN {print c / g}')")
            else
                line=$(printf 'round %d %-12s %-8s FAILED' "$r" "$impl" "$t")
            fi
            echo "$line"
            echo "  $line" >&2
        done
        save_logs "r$r-$impl"
        lab_down
    done
done
[[ -n ${RESULTS:-} ]] && cp "$DATA" "$RESULTS"

python3 - "$DATA" "$ROUNDS" <<'PY'
import csv, statistics as st, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
rounds = int(sys.argv[2])
tests = [("tcp1-ab", "TCP 1 stream a->b"), ("tcp1-ba", "TCP 1 stream b->a (-R)"),
         ("tcp4-ab", "TCP 4 streams a->b"), ("tcp4-ba", "TCP 4 streams b->a (-R)")]
impls = ["tunbench", "boringtun", "wireguard-go"]
fig = {(r["impl"], r["test"], int(r["round"])): r for r in rows}
def vals(i, t, f):
    return [f(fig[(i, t, r)]) for r in range(1, rounds + 1) if (i, t, r) in fig]
gb = lambda x: float(x["bps"]) / 1e9
def cell(i, t):
    v = vals(i, t, gb)
    if not v:
        return "-"
    n = "" if len(v) == rounds else f" n={len(v)}"
    return f"{st.median(v):.2f} ({min(v):.2f}-{max(v):.2f}){n}"
def ratio(t, other):
    v = [gb(fig[("tunbench", t, r)]) / gb(fig[(other, t, r)]) for r in range(1, rounds + 1)
         if ("tunbench", t, r) in fig and (other, t, r) in fig]
    return f"{st.median(v):.2f}" if v else "-"
def cpg(i, t):
    v = vals(i, t, lambda x: float(x["cpu_s"]) / float(x["gbit"]))
    return f"{st.median(v):.3f}" if v else "-"
print()
print("| test | plain link | tunbench | boringtun | wireguard-go | tunbench/boringtun | tunbench/wireguard-go "
      "| CPU-s/Gbit tunbench | CPU-s/Gbit boringtun | CPU-s/Gbit wireguard-go |")
print("|---|---|---|---|---|---|---|---|---|---|")
for t, name in tests:
    print(f"| {name} | {cell('plain', t)} | " + " | ".join(cell(i, t) for i in impls)
          + f" | {ratio(t, 'boringtun')} | {ratio(t, 'wireguard-go')} | "
          + " | ".join(cpg(i, t) for i in impls) + " |")
print(f"\nGbit/s received: median over {rounds} rounds (min-max). Ratios: median of the per-round ratios. "
      "CPU-s/Gbit: CPU seconds of both peers' WireGuard processes per Gbit received, median over rounds.")
j = [float(x["json_cpu_s"]) / float(x["cpu_s"]) for x in rows
     if x["impl"] == "tunbench" and x["json_cpu_s"] and float(x["cpu_s"]) > 0]
if j:
    print(f"tunbench's own cpu_seconds (datapath threads) / /proc CPU of its process: median {st.median(j):.2f}")
PY

# Log lines that look like trouble, from every lab of the run.
bad=$(grep -rhiE 'error|panic|warn|fail|refus|exited' "$work/logs" 2>/dev/null | sort | uniq -c | sort -rn || true)
if [[ -n $bad ]]; then
    echo "# datapath log lines with error/warn/fail/panic (count, line):"
    head -n 20 <<<"$bad" | sed 's/^/#   /'
else
    echo "# datapath logs: no error/warn/fail/panic lines"
fi
((FAILS == 0)) || echo "# $FAILS test(s) failed three times and are missing from the table"
