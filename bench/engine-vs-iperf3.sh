#!/usr/bin/env bash
# Benchmark (not a test): tunbench's measurement engine against iperf3 on a plain veth
# between two namespaces, the same tool on both ends each time (tunbench server +
# tunbench client; iperf3 -s + iperf3 -c). Issue 3's targets: TCP 1 stream >= 1.0x
# iperf3, TCP -P 4 >= 1.0x, UDP with 1448-byte datagrams at <= 1 % loss >= 2.0x.
#
#   sudo bench/engine-vs-iperf3.sh [ROUNDS [SECONDS]]     (defaults: 5 rounds, 5 s)
#
# Each round runs, for both tools, alternating which goes first from round to round:
#   1. TCP, 1 stream, -t SECONDS;
#   2. TCP, -P 4, -t SECONDS;
#   3. UDP, -l 1448: the highest offered rate (-b) at which the receiver's loss stays
#      <= UDP_LOSS %, found by the same search for both tools: bracket (start at
#      UDP_START bit/s, double while it passes, halve while it fails), then bisect, at
#      most UDP_TRIALS trials of UDP_TRIAL_SECS seconds; a trial whose sender cannot
#      reach the offered rate while the loss passes ends the search there (the sender
#      is the limit). The rate found is confirmed with a SECONDS-long run (stepping down
#      10 % at most twice if the confirmation fails); the figure is the receiver's rate
#      in that run.
# Figures come from each client's -J output (sum_received; for UDP also sum.lost_percent,
# the receiver's loss), CPU from cpu_utilization_percent (percent of one core; the
# client is the sender).
#
# Environment: CARGO_TARGET_DIR (default: target/ of the workspace), PORT (default
# 5201, inside the lab's namespaces), UDP_LOSS (1), UDP_LEN (1448), UDP_START (1e9),
# UDP_TRIALS (8), UDP_TRIAL_SECS (2).
#
# Prints per-round figures, medians and the median of the per-round ratio
# tunbench/iperf3 per test to stdout (progress to stderr). The lab, bench<pid>e, is
# taken down on exit, also on failure or Ctrl-C.
set -euo pipefail

ROUNDS=${1:-5}
SECS=${2:-5}
PORT=${PORT:-5201}
UDP_LOSS=${UDP_LOSS:-1}
UDP_LEN=${UDP_LEN:-1448}
UDP_START=${UDP_START:-1000000000}
UDP_TRIALS=${UDP_TRIALS:-8}
UDP_TRIAL_SECS=${UDP_TRIAL_SECS:-2}

die() { echo "engine-vs-iperf3: $*" >&2; exit 1; }
num() { [[ $2 =~ ^[0-9]+$ && $2 -ge 1 ]] || die "$1 must be a whole number >= 1 (got '$2')"; }
num ROUNDS "$ROUNDS"; num SECONDS "$SECS"; num PORT "$PORT"; num UDP_LEN "$UDP_LEN"
num UDP_START "$UDP_START"; num UDP_TRIALS "$UDP_TRIALS"; num UDP_TRIAL_SECS "$UDP_TRIAL_SECS"
[[ $UDP_LOSS =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "UDP_LOSS must be a percentage (got '$UDP_LOSS')"
[[ $EUID -eq 0 ]] || die "run as root (it builds network namespaces)"
command -v iperf3 >/dev/null || die "iperf3 is missing (Debian: apt-get install iperf3)"
command -v jq >/dev/null || die "jq is missing"

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
echo "building tunbench (release) into $target ..." >&2
(cd "$root" && CARGO_TARGET_DIR=$target cargo build --release --quiet --bin tunbench) >&2
bin=$target/release/tunbench
[[ -x $bin ]] || die "no binary at $bin"

# --- a lab name that collides with nothing: bench<pid>[x<n>]e
n=0
while :; do
    LAB=bench$$
    ((n == 0)) || LAB+=x$n
    LAB+=e
    if ! ip netns list | awk '{print $1}' | grep -q "^$LAB-" && [[ ! -e /run/tunbench/$LAB ]]; then
        break
    fi
    n=$((n + 1))
    [[ $n -lt 100 ]] || die "no free lab name"
done

work=$(mktemp -d /tmp/engine-vs-iperf3.XXXXXX)
SERVER_PID=
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [[ -n $SERVER_PID ]]; then kill "$SERVER_PID" 2>/dev/null || true; fi
    "$bin" down "$LAB" >/dev/null 2>&1 || true
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

"$bin" up "$root/topologies/two-hosts.toml" --name "$LAB" >/dev/null || die "tunbench up failed"
SERVER_ADDR=198.18.0.2   # h2 in topologies/two-hosts.toml
"$bin" check "$LAB" >/dev/null || die "the lab's hosts do not reach each other (tunbench check $LAB)"

# --- one run: server in h2 (one test, then it exits), client in h1, -J into $work/run.json
listening() { [[ -n $("$bin" exec "$LAB" h2 -- ss -Hltn "sport = :$PORT" 2>/dev/null) ]]; }

run_once() { # tool, client args...
    local tool=$1 i
    shift
    case $tool in
        tunbench) "$bin" exec "$LAB" h2 -- "$bin" server -1 -p "$PORT" >/dev/null 2>&1 & ;;
        iperf3) "$bin" exec "$LAB" h2 -- iperf3 -s -1 -p "$PORT" >/dev/null 2>&1 & ;;
    esac
    SERVER_PID=$!
    for ((i = 0; i < 200; i++)); do listening && break; sleep 0.02; done
    local rc=0
    case $tool in
        tunbench) "$bin" exec "$LAB" h1 -- "$bin" client "$SERVER_ADDR" -p "$PORT" -J "$@" >"$work/run.json" 2>"$work/run.err" || rc=$? ;;
        iperf3) "$bin" exec "$LAB" h1 -- iperf3 -c "$SERVER_ADDR" -p "$PORT" -J "$@" >"$work/run.json" 2>"$work/run.err" || rc=$? ;;
    esac
    # The one-off server ends with the test; one that does not (a failed client) is
    # stopped here. `tunbench exec` becomes the command, so the pid is the server's.
    for ((i = 0; i < 250; i++)); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.02; done
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=
    ((rc == 0)) && jq -e '.end.sum_received.bits_per_second > 0 and (has("error") | not)' \
        "$work/run.json" >/dev/null 2>&1
}

run() { # tool, client args...: run_once, retried twice on failure
    local a
    for a in 1 2 3; do
        run_once "$@" && return 0
        echo "  $1 $* failed (attempt $a): $(jq -r '.error // empty' "$work/run.json" 2>/dev/null) $(head -c 300 "$work/run.err")" >&2
        sleep 1
    done
    die "$1 $* failed three times"
}

jqr() { jq -r "$1" "$work/run.json"; }
gbit() { awk -v b="$1" 'BEGIN {printf "%.2f", b / 1e9}'; }
pct() { awk -v p="$1" 'BEGIN {printf "%.0f", p}'; }

# --- TCP: sets BPS, CPU_C (client = sender) and CPU_S (server = receiver)
tcp_test() { # tool, extra args...
    local tool=$1
    shift
    run "$tool" -t "$SECS" "$@"
    BPS=$(jqr .end.sum_received.bits_per_second)
    CPU_C=$(pct "$(jqr .end.cpu_utilization_percent.host_total)")
    CPU_S=$(pct "$(jqr .end.cpu_utilization_percent.remote_total)")
}

# --- UDP: one trial at a rate; sets T_RECV, T_SENT, T_LOSS, T_CPU_C, T_CPU_S, T_PASS
udp_trial() { # tool, rate, seconds
    run "$1" -u -l "$UDP_LEN" -b "$2" -t "$3"
    T_RECV=$(jqr .end.sum_received.bits_per_second)
    T_SENT=$(jqr .end.sum_sent.bits_per_second)
    T_LOSS=$(jqr .end.sum.lost_percent)
    T_CPU_C=$(pct "$(jqr .end.cpu_utilization_percent.host_total)")
    T_CPU_S=$(pct "$(jqr .end.cpu_utilization_percent.remote_total)")
    T_PASS=$(awk -v l="$T_LOSS" -v m="$UDP_LOSS" 'BEGIN {print (l <= m) ? 1 : 0}')
    printf '    %-8s -b %6s Mbit/s: sent %6.0f, received %6.0f Mbit/s, loss %6.2f %%\n' \
        "$1" "$(($2 / 1000000))" "$(awk -v x="$T_SENT" 'BEGIN {print x / 1e6}')" \
        "$(awk -v x="$T_RECV" 'BEGIN {print x / 1e6}')" "$T_LOSS" >&2
}

# Rates are whole Mbit/s.
# (%.0f: some awks print %d through a 32-bit int)
mbit_round() { awk -v r="$1" 'BEGIN {m = int(r / 1e6 + 0.5); if (m < 1) m = 1; printf "%.0f", m * 1000000}'; }
mbit_floor() { awk -v r="$1" 'BEGIN {m = int(r / 1e6); if (m < 1) m = 1; printf "%.0f", m * 1000000}'; }

# The search; sets BPS (receiver rate in the confirmation), RATE (offered), LOSS,
# TRIALS, LIMIT ("sender" when the sender could not reach the offered rate), CPU_C, CPU_S.
udp_search() { # tool
    local tool=$1 lo=0 hi=0 r=$UDP_START trials=0 sat=0 a off
    while ((trials < UDP_TRIALS)); do
        udp_trial "$tool" "$r" "$UDP_TRIAL_SECS"
        trials=$((trials + 1))
        # What the sender really offered: a sender that cannot reach -b offers less.
        off=$(mbit_floor "$(awk -v s="$T_SENT" -v r="$r" 'BEGIN {printf "%.0f", (s < r) ? s : r}')")
        if ((T_PASS)); then
            ((off > lo)) && lo=$off
            # The loss passes but the sender offers well under the rate: asking for
            # more changes nothing, so the search ends at what it did offer.
            if awk -v s="$T_SENT" -v r="$r" 'BEGIN {exit !(s < 0.9 * r)}'; then sat=1; break; fi
        else
            ((hi == 0 || off < hi)) && hi=$off
            # Failing below a rate that passed: noise; keep the pass.
            ((lo == 0 || hi > lo)) || break
        fi
        if ((hi == 0)); then
            r=$((lo * 2))
        elif ((lo == 0)); then
            r=$(mbit_round "$((hi / 2))")
            ((hi > 1000000)) || break
        else
            awk -v l="$lo" -v h="$hi" 'BEGIN {exit !(h <= 1.05 * l)}' && break
            r=$(mbit_round "$(((lo + hi) / 2))")
            ((r > lo && r < hi)) || break
        fi
    done
    ((lo > 0)) || lo=1000000
    # Confirm with a full-length run; step down if it fails.
    for a in 1 2 3; do
        udp_trial "$tool" "$lo" "$SECS"
        ((T_PASS)) && break
        ((a < 3)) && lo=$(mbit_round "$((lo * 9 / 10))")
    done
    BPS=$T_RECV RATE=$lo LOSS=$T_LOSS TRIALS=$((trials + a)) CPU_C=$T_CPU_C CPU_S=$T_CPU_S
    LIMIT=$( ((sat)) && echo sender || echo loss)
    ((T_PASS)) || LIMIT="loss>$UDP_LOSS%"
}

# --- rounds
declare -A FIG RATIOS
rev=$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)
printf '# %s, tunbench at %s, %s, lab %s (two hosts on one veth), %s rounds, -t %s s\n' \
    "$(date -u +%FT%TZ)" "$rev" "$(iperf3 --version | head -n1)" "$LAB" "$ROUNDS" "$SECS"
printf '# machine: %s CPUs (%s), Linux %s, load average %s\n' "$(nproc)" \
    "$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)" "$(uname -r)" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '# UDP: -l %s, loss <= %s %%, search from %s Mbit/s, at most %s trials of %s s, then a %s s confirmation\n' \
    "$UDP_LEN" "$UDP_LOSS" "$((UDP_START / 1000000))" "$UDP_TRIALS" "$UDP_TRIAL_SECS" "$SECS"
printf '# Gbit/s at the receiver; cpu = client (sender) / server (receiver), percent of one core\n'

TESTS=(tcp1 tcp4 udp)
for ((r = 1; r <= ROUNDS; r++)); do
    if ((r % 2)); then order=(tunbench iperf3); else order=(iperf3 tunbench); fi
    echo "round $r of $ROUNDS (${order[0]} first)" >&2
    line=()
    for t in "${TESTS[@]}"; do
        for tool in "${order[@]}"; do
            echo "  $t: $tool" >&2
            case $t in
                tcp1) tcp_test "$tool"; extra="" ;;
                tcp4) tcp_test "$tool" -P 4; extra="" ;;
                udp)
                    udp_search "$tool"
                    extra=$(printf ' @ -b %dM loss %.2f%% %d trials%s' "$((RATE / 1000000))" "$LOSS" "$TRIALS" \
                        "$([[ $LIMIT == loss ]] || echo " ($LIMIT)")")
                    ;;
            esac
            FIG[$t,$tool,$r]=$BPS
            line+=("$(printf '%-5s %-8s %6s Gbit/s  cpu %3s/%3s%s' "$t" "$tool" "$(gbit "$BPS")" "$CPU_C" "$CPU_S" "$extra")")
        done
        ratio=$(awk -v a="${FIG[$t,tunbench,$r]}" -v b="${FIG[$t,iperf3,$r]}" 'BEGIN {printf "%.2f", a / b}')
        RATIOS[$t]+="$ratio "
        line+=("$(printf '%-5s ratio tunbench/iperf3 %s' "$t" "$ratio")")
    done
    echo "round $r (${order[0]} first)"
    printf '  %s\n' "${line[@]}"
done

median() { sort -g | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else printf "%.6f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
med_fig() { # test, tool
    local r
    for ((r = 1; r <= ROUNDS; r++)); do echo "${FIG[$1,$2,$r]}"; done | median | awk '{printf "%.2f", $1 / 1e9}'
}
declare -A TARGET=([tcp1]=1.0 [tcp4]=1.0 [udp]=2.0)
declare -A NAME=([tcp1]="TCP, 1 stream" [tcp4]="TCP, 4 streams" [udp]="UDP ${UDP_LEN} B, loss <= ${UDP_LOSS} %")
echo
printf '%-24s | %14s | %14s | %12s | %6s | %s\n' test "tunbench Gbit/s" "iperf3 Gbit/s" "median ratio" target "per-round ratios"
for t in "${TESTS[@]}"; do
    m=$(printf '%s\n' ${RATIOS[$t]} | median | awk '{printf "%.2f", $1}')
    met=$(awk -v m="$m" -v g="${TARGET[$t]}" 'BEGIN {print (m >= g) ? "met" : "NOT met"}')
    printf '%-24s | %14s | %14s | %12s | %6s | %s(%s)\n' "${NAME[$t]}" "$(med_fig "$t" tunbench)" \
        "$(med_fig "$t" iperf3)" "$m" ">= ${TARGET[$t]}" "${RATIOS[$t]}" "$met"
done
echo "# medians over $ROUNDS rounds; ratio = tunbench / iperf3 in the same round, median of those"
