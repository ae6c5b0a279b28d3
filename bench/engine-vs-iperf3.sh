#!/usr/bin/env bash
# Benchmark (not a test): tunbench's measurement engine against iperf3 on a plain veth
# between two namespaces, the same tool on both ends each time (tunbench server +
# tunbench client; iperf3 -s + iperf3 -c). Issue 3's targets: TCP 1 stream >= 1.0x
# iperf3, TCP -P 4 >= 1.0x, UDP with 1448-byte datagrams at <= 1 % loss >= 2.0x.
#
#   sudo bench/engine-vs-iperf3.sh [ROUNDS [SECONDS]]     (defaults: 5 rounds, 5 s)
#
# Both tools get the same socket buffers (issue 12):
#   - TCP: neither sets SO_SNDBUF / SO_RCVBUF, so both get the kernel's autotuning,
#     bounded by net.ipv4.tcp_rmem / tcp_wmem (iperf3 runs without -w, as tunbench's
#     TCP streams set no buffer).
#   - UDP: tunbench asks for UDP_BUF (32 MiB, UDP_SOCKET_BUFFER in core/src/socket/gso.rs)
#     each way on both ends with SO_RCVBUFFORCE / SO_SNDBUFFORCE; iperf3 gets
#     -w UDP_BUF, which sets SO_SNDBUF and SO_RCVBUF on both ends (the server takes the
#     client's -w). Those are capped by net.core.rmem_max / wmem_max, which on this
#     kernel are global (read-only inside a namespace), so the script raises both to
#     UDP_BUF for the run and puts the old values back on exit. iperf3 itself fails a
#     test whose buffer it cannot set ("socket buffer size not set correctly").
# Before the rounds, one short run per tool and protocol is sampled with `ss -m`
# (skmem rb / tb of the test's sockets, mid-run) and printed; the script stops if the
# two tools' UDP buffers differ.
#
# Each round runs, for both tools, alternating which goes first from round to round:
#   1. tcp1: TCP, 1 stream, -t SECONDS;
#   2. tcp4: TCP, -P 4, -t SECONDS;
#   3. udp-gso: UDP, -l UDP_LEN, on the veth as the lab leaves it: UDP segmentation
#      offload on, so a UDP_SEGMENT send (tunbench uses it; iperf3 does not) crosses
#      the veth as one skb of up to 45 datagrams, never cut apart;
#   4. udp-split: the same with every datagram crossing the veth as its own packet,
#      as on a real NIC without UDP offloads or through a tunnel: on both veth ends
#      `ethtool -K eth0` turns off tx-udp-segmentation and tx-gso-list (the kernel then
#      segments before the veth), and gro, rx-gro-list and rx-udp-gro-forwarding (the
#      receiving side cannot merge them again). Each UDP run checks this with the
#      veth's packet counters: datagrams sent / packets the veth carried (h1's tx and
#      h2's rx) must be <= 1.02, or the script stops.
# Each UDP figure: the highest offered rate (-b) at which the receiver's loss stays
# <= UDP_LOSS %, found by the same search for both tools: bracket (start at UDP_START
# bit/s, double while it passes, halve while it fails; there is no ceiling), then
# bisect until the bracket is within 5 %, at most UDP_TRIALS trials of UDP_TRIAL_SECS
# seconds (a search the trials cut short is marked "trials ran out"); a trial whose
# sender cannot reach the offered rate while the loss passes ends the search there
# (the sender is the limit). The rate found is confirmed with a SECONDS-long run,
# stepping down 10 % at most twice if the confirmation fails; the figure is the
# receiver's rate in the confirmation. A confirmation still over UDP_LOSS % after the
# two step-downs is reported as "failed", not as a figure, and leaves that round out
# of the medians and ratios of that test.
# Figures come from each client's -J output (sum_received; for UDP also sum.lost_percent,
# the receiver's loss), CPU from cpu_utilization_percent (percent of one core; the
# client is the sender). For each UDP confirmation the script also gives the
# datagrams per veth packet and the receiving namespace's UDP RcvbufErrors (drops
# because the receiving socket's buffer was full, /proc/net/snmp and snmp6; the kernel
# counts skbs, so on the GSO path one drop is a whole train of datagrams).
#
# Environment: CARGO_TARGET_DIR (default: target/ of the workspace), PORT (default
# 5201, inside the lab's namespaces), UDP_LOSS (1), UDP_LEN (1448), UDP_START (1e9),
# UDP_TRIALS (12: from 1 Gbit/s, doubling reaches 64 Gbit/s in 7 trials, and a
# bracket as wide as 64-128 Gbit/s needs 4 more to close within 5 %), UDP_TRIAL_SECS
# (2), UDP_BUF (33554432).
#
# Prints per-round figures, medians and the median of the per-round ratio
# tunbench/iperf3 per test to stdout (progress to stderr). The lab, bench<pid>e, is
# taken down on exit, also on failure or Ctrl-C, and the sysctls are put back.
#
# Figures, method and history: docs/benchmarks/engine-vs-iperf3.md (index: BENCHMARKS.md).
set -euo pipefail

ROUNDS=${1:-5}
SECS=${2:-5}
PORT=${PORT:-5201}
UDP_LOSS=${UDP_LOSS:-1}
UDP_LEN=${UDP_LEN:-1448}
UDP_START=${UDP_START:-1000000000}
UDP_TRIALS=${UDP_TRIALS:-12}
UDP_TRIAL_SECS=${UDP_TRIAL_SECS:-2}
UDP_BUF=${UDP_BUF:-33554432}

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
BENCH=engine-vs-iperf3
. bench/common.sh
num ROUNDS "$ROUNDS"; num SECONDS "$SECS"; num PORT "$PORT"; num UDP_LEN "$UDP_LEN"
num UDP_START "$UDP_START"; num UDP_TRIALS "$UDP_TRIALS"; num UDP_TRIAL_SECS "$UDP_TRIAL_SECS"
num UDP_BUF "$UDP_BUF"
[[ $UDP_LOSS =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "UDP_LOSS must be a percentage (got '$UDP_LOSS')"
[[ $EUID -eq 0 ]] || die "run as root (it builds network namespaces and sets sysctls)"
for c in iperf3:iperf3 jq:jq ethtool:ethtool ss:iproute2 ip:iproute2 sysctl:procps; do
    command -v "${c%%:*}" >/dev/null ||
        die "${c%%:*} is missing (Debian: apt-get install ${c#*:}; scripts/setup.sh installs it)"
done

build_tunbench
bin=$TB

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
SAMPLER_PID=
# name=value of each sysctl this script raised, to put back on exit.
declare -A SYSCTL_OLD=() SYSCTL_SET=()
cleanup() {
    local rc=$? k
    trap - EXIT INT TERM
    if [[ -n $SAMPLER_PID ]]; then kill "$SAMPLER_PID" 2>/dev/null || true; fi
    if [[ -n $SERVER_PID ]]; then kill "$SERVER_PID" 2>/dev/null || true; fi
    "$bin" down "$LAB" >/dev/null 2>&1 || true
    for k in "${!SYSCTL_OLD[@]}"; do
        # Only if nobody changed it since: another run may have raised it too.
        if [[ $(sysctl -n "$k" 2>/dev/null) == "${SYSCTL_SET[$k]}" ]]; then
            sysctl -qw "$k=${SYSCTL_OLD[$k]}" || echo "$BENCH: could not put $k back to ${SYSCTL_OLD[$k]}" >&2
        fi
    done
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- the caps on SO_RCVBUF / SO_SNDBUF: global on this kernel, raised for the run
for k in net.core.rmem_max net.core.wmem_max; do
    old=$(sysctl -n "$k")
    if ((old < UDP_BUF)); then
        SYSCTL_OLD[$k]=$old
        SYSCTL_SET[$k]=$UDP_BUF
        sysctl -qw "$k=$UDP_BUF" || die "cannot set $k=$UDP_BUF"
    fi
done

"$bin" up "$root/topologies/two-hosts.toml" --name "$LAB" >/dev/null || die "tunbench up failed"
SERVER_ADDR=198.18.0.2   # h2 in topologies/two-hosts.toml
"$bin" check "$LAB" >/dev/null || die "the lab's hosts do not reach each other (tunbench check $LAB)"
in_ns() { local node=$1; shift; ip netns exec "$LAB-$node" "$@"; }
for k in net.core.rmem_max net.core.wmem_max; do
    v=$(in_ns h2 sysctl -n "$k")
    ((v >= UDP_BUF)) || die "$k is $v inside the lab, below $UDP_BUF"
done

# --- the veths' UDP offloads: as the lab leaves them (udp-gso) or all off (udp-split)
OFFLOADS=(tx-udp-segmentation tx-gso-list generic-receive-offload rx-gro-list rx-udp-gro-forwarding)
declare -A OFF_DEFAULT=()
for h in h1 h2; do
    feats=$(in_ns "$h" ethtool -k eth0) || die "ethtool -k eth0 failed in $LAB-$h"
    for f in "${OFFLOADS[@]}"; do
        v=$(awk -v f="$f:" '$1 == f {print $2}' <<<"$feats")
        [[ $v == on || $v == off ]] || die "the veth in $LAB-$h has no offload $f (ethtool -k eth0)"
        if [[ $v == on ]] && grep -q "^[[:space:]]*$f: on \[fixed\]" <<<"$feats"; then
            die "$f is fixed on in $LAB-$h: the split path cannot be made"
        fi
        OFF_DEFAULT[$h,$f]=$v
    done
done
offloads() { # default | split
    local h f args
    for h in h1 h2; do
        args=()
        for f in "${OFFLOADS[@]}"; do
            if [[ $1 == split ]]; then args+=("$f" off); else args+=("$f" "${OFF_DEFAULT[$h,$f]}"); fi
        done
        in_ns "$h" ethtool -K eth0 "${args[@]}" 2>/dev/null || die "ethtool -K eth0 ${args[*]} failed in $LAB-$h"
    done
}
offload_state() { # h: the five features as f=on/off
    in_ns "$1" ethtool -k eth0 | awk -v list="${OFFLOADS[*]}" \
        'BEGIN {n = split(list, w, " "); for (i = 1; i <= n; i++) want[w[i] ":"] = 1}
         $1 in want {s = s sprintf("%s%s=%s", s == "" ? "" : " ", substr($1, 1, length($1) - 1), $2)} END {print s}'
}

# --- one run: server in h2 (one test, then it exits), client in h1, -J into $work/run.json.
# With SS_AT set, `ss -m` of the test's sockets in both namespaces is saved to
# $work/ss.h1 / ss.h2 that many seconds into the client's run (SS_PROTO: -t or -u).
server_listening() { [[ -n $(in_ns h2 ss -Hltn "sport = :$PORT" 2>/dev/null) ]]; }

run_once() { # tool, client args...
    local tool=$1 i
    shift
    case $tool in
        tunbench) "$bin" exec "$LAB" h2 -- "$bin" server -1 -p "$PORT" >/dev/null 2>&1 & ;;
        iperf3) "$bin" exec "$LAB" h2 -- iperf3 -s -1 -p "$PORT" >/dev/null 2>&1 & ;;
    esac
    SERVER_PID=$!
    for ((i = 0; i < 200; i++)); do server_listening && break; sleep 0.02; done
    if [[ -n ${SS_AT:-} ]]; then
        (
            sleep "$SS_AT"
            for h in h1 h2; do
                in_ns "$h" ss -Hnm -a "$SS_PROTO" "( sport = :$PORT or dport = :$PORT )" >"$work/ss.$h" 2>&1
            done
        ) &
        SAMPLER_PID=$!
    fi
    local rc=0
    case $tool in
        tunbench) "$bin" exec "$LAB" h1 -- "$bin" client "$SERVER_ADDR" -p "$PORT" -J "$@" >"$work/run.json" 2>"$work/run.err" || rc=$? ;;
        iperf3) "$bin" exec "$LAB" h1 -- iperf3 -c "$SERVER_ADDR" -p "$PORT" -J "$@" >"$work/run.json" 2>"$work/run.err" || rc=$? ;;
    esac
    if [[ -n $SAMPLER_PID ]]; then wait "$SAMPLER_PID" 2>/dev/null || true; SAMPLER_PID=; fi
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
# The largest rb and tb among the sockets ss saw in node h: "rb N tb M".
skmem() { # h
    local rb tb
    rb=$(grep -o 'rb[0-9]*' "$work/ss.$1" | tr -d 'rb' | sort -n | tail -n1)
    tb=$(grep -o 'tb[0-9]*' "$work/ss.$1" | tr -d 'tb' | sort -n | tail -n1)
    echo "rb ${rb:-?} tb ${tb:-?}"
}

# Extra client arguments per tool and protocol: the matched UDP buffers for iperf3.
udp_args() { [[ $1 == iperf3 ]] && echo "-w $UDP_BUF" || true; }

# --- TCP: sets BPS, CPU_C (client = sender) and CPU_S (server = receiver)
tcp_test() { # tool, extra args...
    local tool=$1
    shift
    run "$tool" -t "$SECS" "$@"
    BPS=$(jqr .end.sum_received.bits_per_second)
    CPU_C=$(pct "$(jqr .end.cpu_utilization_percent.host_total)")
    CPU_S=$(pct "$(jqr .end.cpu_utilization_percent.remote_total)")
}

# Counters of one node: its veth's tx and rx packets, and its UDP RcvbufErrors
# (IPv4 and IPv6 summed): "tx rx rcvbuf".
counters() { # h
    local tx rx rcvbuf
    read -r tx rx < <(in_ns "$1" ip -j -s link show dev eth0 | jq -r '.[0].stats64 | "\(.tx.packets) \(.rx.packets)"')
    rcvbuf=$(in_ns "$1" cat /proc/net/snmp /proc/net/snmp6 | awk '
        $1 == "Udp:" && !h {for (i = 2; i <= NF; i++) if ($i == "RcvbufErrors") c = i; h = 1; next}
        $1 == "Udp:" && h {s += $c}
        $1 == "Udp6RcvbufErrors" {s += $2}
        END {printf "%.0f", s}')
    echo "$tx $rx $rcvbuf"
}

# --- UDP: one trial at a rate; sets T_RECV, T_SENT, T_LOSS, T_CPU_C, T_CPU_S, T_PASS,
# T_DPP (datagrams per veth packet, the larger of h1's tx and h2's rx) and T_RCVBUF
# (RcvbufErrors in h2 during the run).
udp_trial() { # tool, rate, seconds
    local tx1 rx2 rb2 tx1b rx2b rb2b dgrams
    read -r tx1 _ _ < <(counters h1)
    read -r _ rx2 rb2 < <(counters h2)
    # shellcheck disable=SC2046 # udp_args is a word list on purpose
    run "$1" -u -l "$UDP_LEN" -b "$2" -t "$3" $(udp_args "$1")
    read -r tx1b _ _ < <(counters h1)
    read -r _ rx2b rb2b < <(counters h2)
    T_RECV=$(jqr .end.sum_received.bits_per_second)
    T_SENT=$(jqr .end.sum_sent.bits_per_second)
    T_LOSS=$(jqr .end.sum.lost_percent)
    T_CPU_C=$(pct "$(jqr .end.cpu_utilization_percent.host_total)")
    T_CPU_S=$(pct "$(jqr .end.cpu_utilization_percent.remote_total)")
    T_PASS=$(awk -v l="$T_LOSS" -v m="$UDP_LOSS" 'BEGIN {print (l <= m) ? 1 : 0}')
    dgrams=$(jqr ".end.sum_sent.bytes / $UDP_LEN | floor")
    T_DPP=$(awk -v d="$dgrams" -v t="$((tx1b - tx1))" -v r="$((rx2b - rx2))" \
        'BEGIN {a = d / (t > 0 ? t : 1); b = d / (r > 0 ? r : 1); printf "%.2f", (a > b) ? a : b}')
    T_RCVBUF=$((rb2b - rb2))
    printf '    %-8s -b %6s Mbit/s: sent %6.0f, received %6.0f Mbit/s, loss %6.2f %%, %5s datagrams/packet, rcvbuf drops %s\n' \
        "$1" "$(($2 / 1000000))" "$(awk -v x="$T_SENT" 'BEGIN {print x / 1e6}')" \
        "$(awk -v x="$T_RECV" 'BEGIN {print x / 1e6}')" "$T_LOSS" "$T_DPP" "$T_RCVBUF" >&2
    if [[ $VARIANT == split ]] && awk -v x="$T_DPP" 'BEGIN {exit !(x > 1.02)}'; then
        die "split path: $T_DPP datagrams per veth packet ($dgrams datagrams, h1 tx $((tx1b - tx1)), h2 rx $((rx2b - rx2)) packets): the offloads did not split them"
    fi
}

# Rates are whole Mbit/s.
# (%.0f: some awks print %d through a 32-bit int)
mbit_round() { awk -v r="$1" 'BEGIN {m = int(r / 1e6 + 0.5); if (m < 1) m = 1; printf "%.0f", m * 1000000}'; }
mbit_floor() { awk -v r="$1" 'BEGIN {m = int(r / 1e6); if (m < 1) m = 1; printf "%.0f", m * 1000000}'; }

# The search; sets BPS (receiver rate in the confirmation), RATE (offered), LOSS,
# TRIALS, LIMIT ("sender" when the sender could not reach the offered rate, "trials
# ran out" when UDP_TRIALS ended the search before it converged), CPU_C,
# CPU_S, DPP, RCVBUF, FAILED (1 when the confirmation's loss stayed over UDP_LOSS).
udp_search() { # tool
    # capped: the trials ran out before the search ended on its own.
    local tool=$1 lo=0 hi=0 r=$UDP_START trials=0 sat=0 capped=1 a off
    while ((trials < UDP_TRIALS)); do
        udp_trial "$tool" "$r" "$UDP_TRIAL_SECS"
        trials=$((trials + 1))
        # What the sender really offered: a sender that cannot reach -b offers less.
        off=$(mbit_floor "$(awk -v s="$T_SENT" -v r="$r" 'BEGIN {printf "%.0f", (s < r) ? s : r}')")
        if ((T_PASS)); then
            ((off > lo)) && lo=$off
            # The loss passes but the sender offers well under the rate: asking for
            # more changes nothing, so the search ends at what it did offer.
            if awk -v s="$T_SENT" -v r="$r" 'BEGIN {exit !(s < 0.9 * r)}'; then sat=1 capped=0; break; fi
        else
            ((hi == 0 || off < hi)) && hi=$off
            # Failing below a rate that passed: noise; keep the pass.
            ((lo == 0 || hi > lo)) || { capped=0; break; }
        fi
        if ((hi == 0)); then
            r=$((lo * 2))
        elif ((lo == 0)); then
            r=$(mbit_round "$((hi / 2))")
            ((hi > 1000000)) || { capped=0; break; }
        else
            awk -v l="$lo" -v h="$hi" 'BEGIN {exit !(h <= 1.05 * l)}' && { capped=0; break; }
            r=$(mbit_round "$(((lo + hi) / 2))")
            ((r > lo && r < hi)) || { capped=0; break; }
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
    DPP=$T_DPP RCVBUF=$T_RCVBUF
    LIMIT=loss
    ((sat)) && LIMIT=sender
    ((capped)) && LIMIT="trials ran out"
    FAILED=$((1 - T_PASS))
}

# --- header
rev=$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)
printf '# %s, tunbench at %s, %s, lab %s (two hosts on one veth), %s rounds, -t %s s\n' \
    "$(date -u +%FT%TZ)" "$rev" "$(iperf3 --version | head -n1)" "$LAB" "$ROUNDS" "$SECS"
printf '# machine: %s CPUs (%s), Linux %s, load average %s\n' "$(nproc)" \
    "$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)" "$(uname -r)" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '# sysctls for the run: net.core.rmem_max %s, wmem_max %s (%s); net.ipv4.tcp_rmem %s; tcp_wmem %s\n' \
    "$(sysctl -n net.core.rmem_max)" "$(sysctl -n net.core.wmem_max)" \
    "$(if ((${#SYSCTL_OLD[@]})); then echo "raised from ${SYSCTL_OLD[net.core.rmem_max]:-unchanged} / ${SYSCTL_OLD[net.core.wmem_max]:-unchanged}, restored on exit"; else echo unchanged; fi)" \
    "$(sysctl -n net.ipv4.tcp_rmem | tr '\t' ' ')" "$(sysctl -n net.ipv4.tcp_wmem | tr '\t' ' ')"
printf '# UDP: -l %s, loss <= %s %%, search from %s Mbit/s, at most %s trials of %s s, then a %s s confirmation\n' \
    "$UDP_LEN" "$UDP_LOSS" "$((UDP_START / 1000000))" "$UDP_TRIALS" "$UDP_TRIAL_SECS" "$SECS"
printf '# buffers: TCP, neither tool sets any (autotuning); UDP, tunbench %s B each way (SO_*BUFFORCE), iperf3 -w %s\n' \
    "$UDP_BUF" "$UDP_BUF"
printf '# veth offloads, udp-gso (as the lab leaves them): h1 %s; h2 %s\n' "$(offload_state h1)" "$(offload_state h2)"
offloads split
printf '# veth offloads, udp-split:                        h1 %s; h2 %s\n' "$(offload_state h1)" "$(offload_state h2)"
offloads default

# --- the buffers each tool really has: ss -m mid-run (the kernel doubles a setsockopt value)
echo "sampling socket buffers with ss -m ..." >&2
declare -A SEEN=()
VARIANT=gso
for tool in tunbench iperf3; do
    SS_AT=1 SS_PROTO=-u
    # shellcheck disable=SC2046
    run "$tool" -u -l "$UDP_LEN" -b 100M -t 2 $(udp_args "$tool")
    SEEN[udp,$tool]="client $(skmem h1), server $(skmem h2)"
    SS_AT=2 SS_PROTO=-t
    run "$tool" -t 3
    SEEN[tcp,$tool]="client $(skmem h1), server $(skmem h2)"
    SS_AT=
done
printf '# ss -m, largest rb/tb of the test'"'"'s sockets mid-run, bytes:\n'
for p in udp tcp; do
    for tool in tunbench iperf3; do printf '#   %s %-8s %s\n' "$p" "$tool" "${SEEN[$p,$tool]}"; done
done
[[ ${SEEN[udp,tunbench]} == "${SEEN[udp,iperf3]}" ]] ||
    die "UDP socket buffers differ: tunbench ${SEEN[udp,tunbench]}; iperf3 ${SEEN[udp,iperf3]}"
printf '# Gbit/s at the receiver; cpu = client (sender) / server (receiver), percent of one core\n'

# --- rounds
TESTS=(tcp1 tcp4 udp-gso udp-split)
declare -A FIG=() RATIOS=() CPU=() LOSSES=() DPPS=() DROPS=() ENDS=() NFAIL=()
for ((r = 1; r <= ROUNDS; r++)); do
    if ((r % 2)); then order=(tunbench iperf3); else order=(iperf3 tunbench); fi
    echo "round $r of $ROUNDS (${order[0]} first)" >&2
    line=()
    for t in "${TESTS[@]}"; do
        case $t in udp-split) VARIANT=split; offloads split ;; *) VARIANT=gso; offloads default ;; esac
        for tool in "${order[@]}"; do
            echo "  $t: $tool" >&2
            FAILED=0
            case $t in
                tcp1) tcp_test "$tool"; extra="" ;;
                tcp4) tcp_test "$tool" -P 4; extra="" ;;
                udp-*)
                    udp_search "$tool"
                    extra=$(printf ' @ -b %dM loss %.2f%% %d trials, %s datagrams/packet, rcvbuf drops %s%s' \
                        "$((RATE / 1000000))" "$LOSS" "$TRIALS" "$DPP" "$RCVBUF" \
                        "$([[ $LIMIT == loss ]] || echo " ($LIMIT)")")
                    LOSSES[$t,$tool]+="$(printf '%.2f' "$LOSS") "
                    DPPS[$t,$tool]+="$DPP "
                    DROPS[$t,$tool]+="$RCVBUF "
                    ENDS[$t,$tool]+="${LIMIT%% *} "
                    ;;
            esac
            CPU[$t,$tool,c]+="$CPU_C "
            CPU[$t,$tool,s]+="$CPU_S "
            if ((FAILED)); then
                FIG[$t,$tool,$r]=failed
                NFAIL[$t,$tool]=$((${NFAIL[$t,$tool]:-0} + 1))
                line+=("$(printf '%-9s %-8s failed: loss %.2f %% > %s %% after 2 step-downs (received %s Gbit/s)  cpu %3s/%3s%s' \
                    "$t" "$tool" "$LOSS" "$UDP_LOSS" "$(gbit "$BPS")" "$CPU_C" "$CPU_S" "$extra")")
            else
                FIG[$t,$tool,$r]=$BPS
                line+=("$(printf '%-9s %-8s %6s Gbit/s  cpu %3s/%3s%s' "$t" "$tool" "$(gbit "$BPS")" "$CPU_C" "$CPU_S" "$extra")")
            fi
        done
        if [[ ${FIG[$t,tunbench,$r]} == failed || ${FIG[$t,iperf3,$r]} == failed ]]; then
            ratio=failed
        else
            ratio=$(awk -v a="${FIG[$t,tunbench,$r]}" -v b="${FIG[$t,iperf3,$r]}" 'BEGIN {printf "%.2f", a / b}')
        fi
        RATIOS[$t]+="$ratio "
        line+=("$(printf '%-9s ratio tunbench/iperf3 %s' "$t" "$ratio")")
    done
    offloads default
    echo "round $r (${order[0]} first)"
    printf '  %s\n' "${line[@]}"
done

median() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.6f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
numbers() { printf '%s\n' "$@" | grep -E '^[0-9.eE+-]+$' || true; }
med_fig() { # test, tool: median Gbit/s over the rounds that did not fail, "failed" if none
    local r v=()
    for ((r = 1; r <= ROUNDS; r++)); do v+=("${FIG[$1,$2,$r]}"); done
    local m
    m=$(numbers "${v[@]}" | median)
    [[ $m == nan ]] && { echo failed; return; }
    awk -v m="$m" 'BEGIN {printf "%.2f", m / 1e9}'
    [[ -z ${NFAIL[$1,$2]:-} ]] || printf ' (%s failed)' "${NFAIL[$1,$2]}"
}
declare -A TARGET=([tcp1]=1.0 [tcp4]=1.0 [udp-gso]=2.0 [udp-split]=2.0)
declare -A NAME=([tcp1]="TCP, 1 stream" [tcp4]="TCP, 4 streams"
    [udp-gso]="UDP ${UDP_LEN} B, GSO path" [udp-split]="UDP ${UDP_LEN} B, split path")
echo
printf '%-24s | %15s | %15s | %12s | %6s | %s\n' test "tunbench Gbit/s" "iperf3 Gbit/s" "median ratio" target "per-round ratios"
for t in "${TESTS[@]}"; do
    # shellcheck disable=SC2086
    m=$(numbers ${RATIOS[$t]} | median)
    # shellcheck disable=SC2086
    k=$(numbers ${RATIOS[$t]} | wc -l)
    if [[ $m == nan ]]; then
        m=failed met="NOT met"
    else
        m=$(awk -v m="$m" 'BEGIN {printf "%.2f", m}')
        met=$(awk -v m="$m" -v g="${TARGET[$t]}" 'BEGIN {print (m >= g) ? "met" : "NOT met"}')
        ((k == ROUNDS)) || met+=" over the $k of $ROUNDS rounds with both figures"
    fi
    printf '%-24s | %15s | %15s | %12s | %6s | %s(%s)\n' "${NAME[$t]}" "$(med_fig "$t" tunbench)" \
        "$(med_fig "$t" iperf3)" "$m" ">= ${TARGET[$t]}" "${RATIOS[$t]}" "$met"
done
echo "# medians over $ROUNDS rounds (a failed UDP figure is left out); ratio = tunbench / iperf3 in the same round, median of those"
echo "# UDP loss: the receiver's, in the confirmation run; a figure is 'failed' when that stayed over ${UDP_LOSS} % after 2 step-downs"
echo
printf '%-10s %-8s | %-13s | %-28s | %-16s | %-28s | %s\n' test tool "cpu c/s (med)" "confirmation loss % per round" \
    "datagrams/packet" "rcvbuf drops (skbs) per round" "search ended by, per round"
# shellcheck disable=SC2086
for t in "${TESTS[@]}"; do
    for tool in tunbench iperf3; do
        c=$(numbers ${CPU[$t,$tool,c]} | median | awk '{printf "%.0f", $1}')
        s=$(numbers ${CPU[$t,$tool,s]} | median | awk '{printf "%.0f", $1}')
        if [[ $t == udp-* ]]; then
            printf '%-10s %-8s | %13s | %-28s | %-16s | %-28s | %s\n' "$t" "$tool" "$c/$s" "${LOSSES[$t,$tool]}" \
                "$(numbers ${DPPS[$t,$tool]} | median | awk '{printf "%.2f", $1}') (median)" "${DROPS[$t,$tool]}" \
                "${ENDS[$t,$tool]}"
        else
            printf '%-10s %-8s | %13s |\n' "$t" "$tool" "$c/$s"
        fi
    done
done
