#!/usr/bin/env bash
# Benchmark (not a test): a lab over several machines (issue 30), the machines
# emulated on this one. `tunbench gen SHAPE --nodes N --hosts H` places N nodes
# on hosts host1 ... hostH, a run of N/H consecutive nodes each; the links
# between runs cross hosts (a chain: H-1 of them) and are VXLAN over an
# underlay bridge.
#
#   sudo bench/distributed-scale.sh [--nodes 5000] [--hosts 5] [--shape chain|star]
#                                   [--modes "parallel single serial"] [--rounds N]
#                                   [--pings N] [--bin PATH] [--out DIR]
#   bench/distributed-scale.sh --gen DIR   (no root: write DIR/placed.toml and
#                                           DIR/single.toml, the files a run uses)
#   bench/distributed-scale.sh --report DIR   (no root: render DIR's tables again)
#
# Each emulated host is what netns/tests/emulated/mod.rs makes: a network
# namespace with a mount namespace of its own, held by a `sleep` started under
# `unshare --net --mount --propagation private` after it mounted a fresh tmpfs on
# /run (so its own /run/netns and /run/tunbench) and a sysfs. Programs run on a
# host under `nsenter --target HOLDER --net --mount`. The underlay is a bridge in
# a namespace of its own, each host joined to it by a veth `u0` of MTU 1550
# (1500-byte links plus VXLAN's 50) with 198.18.230.K/24, the address the file
# gives hostK. Nothing is named in this machine's /run/netns.
#
# Modes, in the order given, each round:
#   parallel  every host's `tunbench up FILE --host hostK` at once, as an
#             orchestrator would; pings across the links between hosts; every
#             host's `down` at once
#   serial    the same, one host after another
#   single    the same N nodes as one lab (the file without [hosts]) on one
#             emulated host: `up` and `down`
# Every `up` and `down` is timed as the whole command (wall clock); `up`'s own
# "in X s" is kept too. After `down` each host is checked for leftovers (its
# namespaces, VXLAN devices, the lab's record). --pings: how many ends of links
# between hosts ping their far end (IPv4 and IPv6), from either side so both
# directions are tried (default 8: every crossing of a 5-host chain).
#
# `down` returns once the namespaces are deleted; the kernel frees them
# afterwards, under locks the next `up` needs. So before every `up` the script
# waits until the kernel's count of network namespaces (/proc/slabinfo) is back
# near where it was at the start (at most SETTLE_BOUND seconds, default 300), and
# records how long that took (SETTLE_BOUND=0: no wait, as in the tests, where
# other labs come and go).
#
# Output: every step on stderr; the report on stdout, also in DIR/report.md
# (default DIR: results/distributed-scale-UTCTIME/): the date, commit, machine,
# command and load average, a row per mode and host (medians over the rounds),
# and the ratio of the parallel and serial runs to the single host's. DIR also
# holds runs.tsv (every step), crossings.tsv and settings. Exit 1 when a step
# failed (an `up` or `down`, a ping, a leftover).
#
# Everything (the labs, the emulated hosts, the underlay) is taken down on exit,
# also on failure or Ctrl-C.
#
# Figures, method and what limits them: docs/benchmarks/distributed.md.
set -euo pipefail
HERE=$(pwd)
CMD="bench/distributed-scale.sh $*"
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BENCH=distributed-scale
. bench/common.sh

NODES=5000
HOSTS=5
SHAPE=chain
MODES="parallel single serial"
ROUNDS=1
PINGS=8
OUT=
REPORT=
GEN=
BIN=
SETTLE_BOUND=${SETTLE_BOUND:-300}
LAB=dsc
UNDERLAY_MTU=1550
while [[ $# -gt 0 ]]; do
    case $1 in
        --nodes) NODES=${2-}; shift 2 || die "--nodes needs a value" ;;
        --hosts) HOSTS=${2-}; shift 2 || die "--hosts needs a value" ;;
        --shape) SHAPE=${2-}; shift 2 || die "--shape needs a value" ;;
        --modes) MODES=${2-}; shift 2 || die "--modes needs a value" ;;
        --rounds) ROUNDS=${2-}; shift 2 || die "--rounds needs a value" ;;
        --pings) PINGS=${2-}; shift 2 || die "--pings needs a value" ;;
        --bin) BIN=${2-}; shift 2 || die "--bin needs a value" ;;
        --out) OUT=${2-}; shift 2 || die "--out needs a value" ;;
        --gen) GEN=${2-}; shift 2 || die "--gen needs a value" ;;
        --report) REPORT=${2-}; shift 2 || die "--report needs a value" ;;
        *) die "unknown argument '$1' (see the top of $0)" ;;
    esac
done
abs() { [[ $1 == /* ]] && echo "$1" || echo "$HERE/$1"; }

# --- the report: a row per mode and host, from runs.tsv
render() {
    local dir=$1
    [[ -f $dir/runs.tsv && -f $dir/settings ]] || die "$dir has no runs.tsv and settings"
    # shellcheck disable=SC1091
    . "$dir/settings"
    {
        echo "# Distributed scale: $NODES nodes over $HOSTS emulated hosts"
        echo
        echo "$STARTED to $ENDED, tunbench $REV, $MACHINE; load average $LOAD_START at the start, $LOAD_END at the end; \`$CMD\`; $ROUNDS round(s), medians."
        echo "A $SHAPE of $NODES nodes, $CROSSINGS links between hosts (VXLAN, underlay MTU $UNDERLAY_MTU)."
        echo
        echo "| mode | host | nodes | up s | up s (its own) | down s | up + down per node ms | pings across hosts | left after down | namespaces freed s |"
        echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: |"
        awk -F'\t' '
            function median(list,   n, v, i, j, t) {
                n = split(list, v, " ")
                for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
                return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
            }
            NR == 1 { next }
            {
                k = $1 "\t" $3
                if (!(k in nodes)) { order[++n] = k; nodes[k] = $4 }
                up[k] = up[k] " " $5; own[k] = own[k] " " $6; down[k] = down[k] " " $7
                if ($10 != "-") freed[k] = freed[k] " " $10
                if (index(" " pings[k] " ", " " $8 " ") == 0) pings[k] = pings[k] (pings[k] == "" ? "" : " ") $8
                if (index("; " left[k] ";", "; " $9 ";") == 0) left[k] = left[k] (left[k] == "" ? "" : "; ") $9
                if ($3 == "all" || $3 == "solo") total[$1, $2] = $5 + $7
            }
            END {
                for (i = 1; i <= n; i++) {
                    k = order[i]; split(k, f, "\t")
                    u = median(up[k]); d = median(down[k])
                    printf "| %s | %s | %d | %.2f | %s | %.2f | %.2f | %s | %s | %s |\n", f[1], f[2], nodes[k],
                        u, (own[k] ~ /[0-9]/ ? sprintf("%.2f", median(own[k])) : "-"), d, 1000 * (u + d) / nodes[k],
                        pings[k], left[k], (k in freed ? sprintf("%.1f", median(freed[k])) : "")
                }
                for (m = 1; m <= 2; m++) {
                    mode = (m == 1 ? "parallel" : "serial"); list = ""
                    for (key in total) {
                        split(key, g, SUBSEP)
                        if (g[1] == mode && (("single", g[2]) in total)) list = list " " sprintf("%.2f", total[key] / total["single", g[2]])
                    }
                    if (list != "") printf "\n%s over one host, up + down (wall, same round): **%.2f**; per round:%s.\n", mode, median(list), list
                }
            }' "$dir/runs.tsv"
        echo
        echo "Times are wall seconds of the whole command on its host; \"its own\" is the time \`up\` reports. A mode's \`all\` row is its wall time from the first start to the last exit, per node over all $NODES nodes. \"namespaces freed\" is how long after the mode's last \`down\` the kernel's count of network namespaces was back to the start's."
    } >"$dir/report.md"
    cat "$dir/report.md"
}
if [[ -n $REPORT ]]; then
    render "$(abs "$REPORT")"
    exit 0
fi

num "--nodes" "$NODES"
num "--hosts" "$HOSTS"
num "--rounds" "$ROUNDS"
[[ $PINGS =~ ^[0-9]+$ ]] || die "--pings must be a whole number (got '$PINGS')"
[[ $SHAPE == chain || $SHAPE == star ]] || die "--shape is chain or star (got '$SHAPE')"
[[ $HOSTS -ge 2 && $HOSTS -le 250 ]] || die "--hosts is 2 to 250 (got $HOSTS)"
[[ $NODES -ge $HOSTS ]] || die "--nodes ($NODES) must be at least --hosts ($HOSTS)"
for m in $MODES; do
    [[ $m == parallel || $m == serial || $m == single ]] || die "a mode is parallel, serial or single (got '$m')"
done
[[ $SETTLE_BOUND =~ ^[0-9]+$ ]] || die "SETTLE_BOUND is whole seconds"

if [[ -n $BIN ]]; then
    TB=$(abs "$BIN")
    [[ -x $TB ]] || die "no binary at $TB"
else
    build_tunbench
fi

# --- the two files: the lab placed on the hosts, and the same lab unplaced
generate() {
    local dir=$1
    mkdir -p "$dir"
    "$TB" gen "$SHAPE" --nodes "$NODES" --hosts "$HOSTS" --name "$LAB" -o "$dir/placed.toml"
    "$TB" gen "$SHAPE" --nodes "$NODES" --name "$LAB" -o "$dir/single.toml"
}
if [[ -n $GEN ]]; then
    generate "$(abs "$GEN")"
    exit 0
fi

[[ $EUID -eq 0 ]] || die "run as root (it builds network and mount namespaces)"
for c in ip unshare nsenter awk; do command -v "$c" >/dev/null || die "$c is missing"; done
OUT=$(abs "${OUT:-results/distributed-scale-$(date -u +%Y%m%dT%H%M%SZ)}")
mkdir -p "$OUT"
work=$(mktemp -d /tmp/bench-distributed.XXXXXX)
generate "$work"
PLACED=$work/placed.toml
SINGLE=$work/single.toml

declare -A PID=() HOST_NODES=()
NAMES=()
HOLDERS=()
# Kills every process on the emulated hosts but their holders (an `up` or
# `down` still running when the script stops): the processes whose mount
# namespace is one of the holders'.
stop_on_hosts() {
    local p d m
    declare -A mine=() holders=()
    for p in "${HOLDERS[@]}"; do
        m=$(readlink "/proc/$p/ns/mnt" 2>/dev/null) && mine[$m]=1
        holders[$p]=1
    done
    for d in /proc/[0-9]*; do
        p=${d#/proc/}
        [[ -z ${holders[$p]-} ]] || continue
        m=$(readlink "$d/ns/mnt" 2>/dev/null) || continue
        [[ -z ${mine[$m]-} ]] || kill -KILL "$p" 2>/dev/null || true
    done
}
cleanup() {
    local rc=$? h p
    trap - EXIT INT TERM
    stop_on_hosts
    for h in "${!PID[@]}"; do on "$h" "$TB" down "$LAB" >/dev/null 2>&1 || true; done
    for p in "${HOLDERS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${HOLDERS[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# `wait_for WHAT BOUND COMMAND...`: until COMMAND succeeds, at most BOUND seconds.
wait_for() {
    local what=$1 bound=$2 t0
    shift 2
    t0=$SECONDS
    until "$@" 2>/dev/null; do
        ((SECONDS - t0 < bound)) || die "$what: not within $bound s"
        sleep 0.1
    done
}

# `on HOST COMMAND...`: COMMAND on emulated host HOST (or `underlay`).
on() { nsenter --target "${PID[$1]}" --net --mount -- "${@:2}"; }

# `holder NAME`: a process holding a fresh network and mount namespace.
holder() {
    local name=$1 ready=$work/$1.ready
    unshare --net --mount --propagation private -- sh -c \
        'mount -t tmpfs -o mode=755 tunbench-emulated-host /run && mkdir /run/netns \
         && mount -t sysfs sysfs /sys && ip link set lo up && echo ready && exec sleep infinity' \
        >"$ready" 2>&1 &
    PID[$name]=$!
    HOLDERS+=($!)
    wait_for "emulated host $name getting ready" 20 grep -qx ready "$ready"
}

# The underlay bridge and hosts host1 ... hostH on it, plus host `solo` for
# the single-host mode.
emulate_hosts() {
    local k h
    holder underlay
    on underlay ip link add br0 mtu "$UNDERLAY_MTU" type bridge
    on underlay ip link set br0 up
    for ((k = 1; k <= HOSTS; k++)); do
        h=host$k
        NAMES+=("$h")
        holder "$h"
        ip link add u0 netns "${PID[$h]}" mtu "$UNDERLAY_MTU" type veth \
            peer name "to-$h" netns "${PID[underlay]}" mtu "$UNDERLAY_MTU"
        on underlay ip link set "to-$h" master br0 up
        on "$h" ip addr add "198.18.230.$k/24" dev u0
        on "$h" ip link set u0 up
    done
    holder solo
    for h in "${NAMES[@]}"; do HOST_NODES[$h]=$(grep -c "^host = \"$h\"$" "$PLACED"); done
}

# How many network namespaces the kernel holds (allocated objects).
netns_count() { awk '$1 == "net_namespace" {print $2}' /proc/slabinfo; }

# Waits until the kernel has freed what the last `down` left; prints the seconds.
# Dead namespaces wait on the kernel's cleanup work, which on some kernels (6.18
# here) runs only when another namespace is made or removed: thousands stayed
# for over 10 minutes on an idle machine and went within seconds of one
# `ip netns add`/`del`. So the wait makes and drops an unnamed namespace every
# 2 s (`unshare --net true`: nothing named, nothing left).
settle() {
    local t0 slack=$((20 + NODES / 50)) n=0
    ((SETTLE_BOUND > 0)) || { echo -; return; }
    t0=$(now)
    while (($(netns_count) > NETNS_BASE + slack)); do
        ((n++ % 4 == 0)) && unshare --net true
        if (($(sub "$(now)" "$t0" | cut -d. -f1) >= SETTLE_BOUND)); then
            echo "$BENCH: namespaces not freed within $SETTLE_BOUND s ($(netns_count), $NETNS_BASE at the start); going on" >&2
            break
        fi
        sleep 0.5
    done
    sub "$(now)" "$t0"
}

sub() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a - b}'; }
# The time `up` reported ("... in X s"), from its log.
reported() { sed -n 's/^lab .* is up: .* in \([0-9.]*\) s$/\1/p' "$1" | tail -1; }

# The ends of links between hosts: host, node:interface, and the far end's
# IPv4 and IPv6 addresses (from `validate`'s placement lines and the file).
crossings() {
    "$TB" validate "$PLACED" >"$work/validate.out" || die "$PLACED does not validate"
    awk '
        function field(s, key,   m) {
            if (!match(s, key " = \"[^\"]*\"")) return ""
            m = substr(s, RSTART + length(key) + 4, RLENGTH - length(key) - 5)
            sub(/\/.*/, "", m)
            return m
        }
        FNR == NR {
            if ($1 == "a" && $3 == "{") { pa = field($0, "port"); va = field($0, "ipv4") "\t" field($0, "ipv6") }
            if ($1 == "b" && $3 == "{") { pb = field($0, "port"); far[pa] = field($0, "ipv4") "\t" field($0, "ipv6"); far[pb] = va }
            next
        }
        $1 == "host" {
            h = $2; sub(/.*links to other hosts: /, "")
            n = split($0, e, ", ")
            for (i = 1; i <= n; i++) { split(e[i], w, " "); if (w[1] in far) print h "\t" w[1] "\t" far[w[1]] }
        }' "$PLACED" "$work/validate.out"
}

# `ping_across [HOST]`: up to PINGS ends of crossings (evenly spread) ping
# their far end, IPv4 and IPv6, each on its own host (or all on HOST); prints
# "passed/tried".
ping_across() {
    local only=${1-} total step i=0 tried=0 passed=0 h end a tries
    total=$(wc -l <"$OUT/crossings.tsv")
    ((PINGS > 0 && total > 0)) || { echo "-"; return; }
    step=$(((total + PINGS - 1) / PINGS))
    while IFS=$'\t' read -r h end v4 v6; do
        ((i++ % step == 0)) || continue
        for a in "$v4" "$v6"; do
            tried=$((tried + 1))
            for ((tries = 0; tries < 5; tries++)); do
                if on "${only:-$h}" "$TB" exec "$LAB" "${end%%:*}" -- ping -c1 -W2 "$a" >/dev/null 2>&1; then
                    passed=$((passed + 1))
                    break
                fi
            done
            ((tries < 5)) || echo "$BENCH: ${end%%:*} on ${only:-$h} does not reach $a" >&2
        done
    done <"$OUT/crossings.tsv"
    echo "$passed/$tried"
}

# `up_on HOST FILE [--host NAME]`: timed; writes work/up-HOST: rc, seconds, its own seconds.
up_on() {
    local h=$1 t0 rc=0
    shift
    t0=$(now)
    on "$h" "$TB" up "$@" >"$work/up-$h.log" 2>&1 || rc=$?
    echo "$rc $(sub "$(now)" "$t0") $(reported "$work/up-$h.log")" >"$work/up-$h"
    [[ $rc == 0 ]] || { echo "$BENCH: up on $h failed:" >&2; tail -5 "$work/up-$h.log" >&2; }
}

# `down_on HOST`: timed; writes work/down-HOST: rc, seconds.
down_on() {
    local h=$1 t0 rc=0
    t0=$(now)
    on "$h" "$TB" down "$LAB" >"$work/down-$h.log" 2>&1 || rc=$?
    echo "$rc $(sub "$(now)" "$t0")" >"$work/down-$h"
    [[ $rc == 0 ]] || { echo "$BENCH: down on $h failed:" >&2; tail -5 "$work/down-$h.log" >&2; }
}

# What HOST still has of the lab after `down`: "nothing", or a list.
left_on() {
    local h=$1 ns vx left=()
    ns=$(on "$h" ip netns list | wc -l)
    vx=$(on "$h" ip -o link show type vxlan | wc -l)
    ((ns == 0)) || left+=("$ns namespaces")
    ((vx == 0)) || left+=("$vx VXLAN devices")
    ! on "$h" test -e "/run/tunbench/$LAB" || left+=("the lab's record")
    local IFS=,
    echo "${left[*]:-nothing}"
}

# `row MODE ROUND HOST NODES UP OWN DOWN PINGS LEFT FREED` to runs.tsv.
row() { (IFS=$'\t'; echo "$*") | tee -a "$OUT/runs.tsv" >&2; }

# `run_hosts MODE ROUND`: every host's part up (at once or in turn), pings
# across, every part down, leftovers; a row per host and one for all.
run_hosts() {
    local mode=$1 r=$2 h t0 t1 t2 t3 pings freed bad=0 pids=() rc s own left
    t0=$(now)
    for h in "${NAMES[@]}"; do
        if [[ $mode == parallel ]]; then up_on "$h" "$PLACED" --host "$h" --name "$LAB" & pids+=($!)
        else up_on "$h" "$PLACED" --host "$h" --name "$LAB"; fi
    done
    ((${#pids[@]} == 0)) || wait "${pids[@]}"
    t1=$(now)
    pings=$(ping_across)
    pids=()
    t2=$(now)
    for h in "${NAMES[@]}"; do
        if [[ $mode == parallel ]]; then down_on "$h" & pids+=($!)
        else down_on "$h"; fi
    done
    ((${#pids[@]} == 0)) || wait "${pids[@]}"
    t3=$(now)
    freed=$(settle)
    for h in "${NAMES[@]}"; do
        read -r rc s own <"$work/up-$h"
        [[ $rc == 0 ]] || bad=1
        left=$(left_on "$h")
        [[ $left == nothing ]] || bad=1
        read -r rc t <"$work/down-$h"
        [[ $rc == 0 ]] || bad=1
        row "$mode" "$r" "$h" "${HOST_NODES[$h]}" "$s" "${own:--}" "$t" - "$left" -
    done
    [[ $pings == "-" || ${pings%/*} == "${pings#*/}" ]] || bad=1
    row "$mode" "$r" all "$NODES" "$(sub "$t1" "$t0")" - "$(sub "$t3" "$t2")" "$pings" - "$freed"
    return "$bad"
}
run_parallel() { run_hosts parallel "$1"; }
run_serial() { run_hosts serial "$1"; }

# `run_single ROUND`: the same nodes as one lab on host solo.
run_single() {
    local r=$1 pings freed rc s own t left bad=0
    up_on solo "$SINGLE"
    pings=$(ping_across solo)
    down_on solo
    freed=$(settle)
    read -r rc s own <"$work/up-solo"
    [[ $rc == 0 ]] || bad=1
    read -r rc t <"$work/down-solo"
    [[ $rc == 0 ]] || bad=1
    left=$(left_on solo)
    [[ $left == nothing ]] || bad=1
    [[ $pings == "-" || ${pings%/*} == "${pings#*/}" ]] || bad=1
    row single "$r" solo "$NODES" "$s" "${own:--}" "$t" "$pings" "$left" "$freed"
    return "$bad"
}

NETNS_BASE=$(netns_count)
[[ -n $NETNS_BASE ]] || die "no net_namespace line in /proc/slabinfo"
emulate_hosts
crossings >"$OUT/crossings.tsv"
CROSSINGS=$(($(wc -l <"$OUT/crossings.tsv") / 2))
echo "$BENCH: $NODES nodes on $HOSTS emulated hosts, $CROSSINGS links between hosts" >&2

STARTED=$(date -u +%FT%TZ)
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
REV=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)
MACHINE="$(nproc) CPUs, Linux $(uname -r)"
printf 'mode\tround\thost\tnodes\tup_s\tup_own_s\tdown_s\tpings\tleft\tfreed_s\n' >"$OUT/runs.tsv"
failed=0
for ((r = 1; r <= ROUNDS; r++)); do
    for m in $MODES; do
        echo "$BENCH: round $r, $m" >&2
        "run_$m" "$r" || failed=1
    done
done
# Each host's namespaces were its own: none may have reached this machine's /run/netns.
if ip netns list | grep -q "^$LAB-"; then
    echo "$BENCH: this machine's /run/netns has namespaces of lab $LAB" >&2
    failed=1
fi
ENDED=$(date -u +%FT%TZ)
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
declare -p STARTED ENDED LOAD_START LOAD_END REV MACHINE ROUNDS NODES HOSTS SHAPE \
    CROSSINGS UNDERLAY_MTU CMD >"$OUT/settings"
render "$OUT"
exit "$failed"
