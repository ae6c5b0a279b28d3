#!/usr/bin/env bash
# Benchmark (not a test): wall time of `tunbench up` + `tunbench down` of a
# `tunbench gen chain` lab against a plain ip(8) shell script that builds and removes
# the same lab, one `ip` invocation per object. Issue 2's target: tunbench <= 0.3x
# the script's wall time for 100 nodes.
#
#   sudo bench/chain-up-down.sh [NODES [ROUNDS]]      (defaults: 100 nodes, 5 rounds)
#
# Environment: CARGO_TARGET_DIR (default: target/ of the workspace), SETTLE (seconds to
# wait before every timed run so the kernel finishes freeing the previous lab's
# namespaces; default 2).
#
# The baseline is derived from `tunbench up --dry-run`: every `;`-separated command
# becomes a line of its own, unchanged. Before timing, both ways
# build their lab once and the script fails unless every namespace looks the same
# (links, addresses, routes, net.* sysctls), ignoring only ifindexes, MAC and
# link-local addresses and the lab name.
#
# Prints per-round times, the medians and the median of the per-round ratio
# tunbench/script to stdout; writes nothing outside a temporary directory that it
# removes. Every namespace it creates is removed on exit, also on failure or Ctrl-C.
#
# Figures, method and history: docs/benchmarks/scale.md (index: BENCHMARKS.md).
set -euo pipefail

NODES=${1:-100}
ROUNDS=${2:-5}
SETTLE=${SETTLE:-2}

die() { echo "chain-up-down: $*" >&2; exit 1; }
[[ $NODES =~ ^[0-9]+$ && $NODES -ge 3 ]] || die "NODES must be a number >= 3 (got '$NODES')"
[[ $ROUNDS =~ ^[0-9]+$ && $ROUNDS -ge 1 ]] || die "ROUNDS must be a number >= 1 (got '$ROUNDS')"
[[ $EUID -eq 0 ]] || die "run as root (it builds network namespaces)"
command -v ip >/dev/null || die "ip(8) (iproute2) is missing"
command -v sysctl >/dev/null || die "sysctl(8) (procps) is missing"

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
echo "building tunbench (release) into $target ..." >&2
(cd "$root" && CARGO_TARGET_DIR=$target cargo build --release --quiet --bin tunbench) >&2
bin=$target/release/tunbench
[[ -x $bin ]] || die "no binary at $bin"

# --- names that collide with nothing: bench<pid>[x<n>]{t,s}, checked against ip netns
# list and tunbench's lab records.
ours_re() { printf '^(%s|%s)-' "$1" "$2"; }
n=0
while :; do
    tag=bench$$
    ((n == 0)) || tag+=x$n
    TB=${tag}t   # tunbench's lab
    SH=${tag}s   # the ip script's lab (same naming: LAB-NODE)
    if ! ip netns list | awk '{print $1}' | grep -Eq "$(ours_re "$TB" "$SH")" &&
        [[ ! -e /run/tunbench/$TB && ! -e /run/tunbench/$SH ]]; then
        break
    fi
    n=$((n + 1))
    [[ $n -lt 100 ]] || die "no free lab name"
done
RE=$(ours_re "$TB" "$SH")

work=$(mktemp -d /tmp/chain-up-down.XXXXXX)
NSS=()   # every namespace either way would create, for the cleanup trap

ours_left() { ip netns list | awk '{print $1}' | grep -E "$RE" || true; }

cleanup() {
    local rc=$? ns
    trap - EXIT INT TERM
    "$bin" down "$TB" >/dev/null 2>&1 || true
    for ns in "${NSS[@]}"; do
        [[ -e /run/netns/$ns ]] && ip netns del "$ns" 2>/dev/null || true
    done
    local left
    left=$(ours_left)
    if [[ -n $left ]]; then
        echo "chain-up-down: namespaces still present after cleanup:" >&2
        echo "$left" >&2
        rc=1
    fi
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- the topology, and the baseline script derived from the dry run
topo=$work/chain$NODES.toml
"$bin" gen chain --nodes "$NODES" --name "chain$NODES" -o "$topo"
"$bin" up "$topo" --name "$SH" --dry-run >"$work/dry-run.txt"

{
    echo "#!/bin/sh"
    echo "# chain of $NODES nodes as lab $SH, one ip(8) invocation per object"
    echo "set -e"
    sed 's/; /\n/g' "$work/dry-run.txt"
} >"$work/up.sh"
# Every line must be one of the forms we know; anything else means the dry-run
# vocabulary changed and this baseline would no longer be the same lab.
if bad=$(tail -n +4 "$work/up.sh" | grep -Ev \
    -e '^ip netns add [^ ]+$' \
    -e '^ip -n [^ ]+ link (add|set|property add) ' \
    -e '^ip -n [^ ]+ addr add ' \
    -e '^ip -n [^ ]+ route add .* proto static$' \
    -e '^ip netns exec [^ ]+ sysctl -qw [^ ]+=[^ ]+$'); then
    die "dry-run lines the baseline does not understand:
$bad"
fi
mapfile -t SH_NSS < <(awk '$1 == "ip" && $2 == "netns" && $3 == "add" {print $4}' "$work/up.sh")
[[ ${#SH_NSS[@]} -eq $NODES ]] || die "dry run names ${#SH_NSS[@]} namespaces, expected $NODES"
{
    echo "#!/bin/sh"
    echo "set -e"
    for ns in "${SH_NSS[@]}"; do echo "ip netns del $ns"; done
} >"$work/down.sh"
NODE_NAMES=("${SH_NSS[@]#"$SH"-}")
NSS=("${SH_NSS[@]}" "${NODE_NAMES[@]/#/$TB-}")

count() { grep -Ec "$1" "$work/up.sh" || true; }
echo "# chain of $NODES nodes: baseline script has $(($(wc -l <"$work/up.sh") - 3)) ip invocations" \
    "($(count '^ip netns add') namespaces, $(count 'sysctl -qw') sysctls," \
    "$(count ' link add ') veths, $(count ' addr add ') addresses, $(count ' route add ') routes)"

# --- one lab's state, normalised: lab name -> LAB, no ifindex, MAC or link-local
# address, no column padding, routes sorted.
dump_lab() {
    local lab=$1 node ns
    ip netns list | awk '{print $1}' | grep -E "^$lab-" | sed "s/^$lab-/LAB-/" | sort
    for node in "${NODE_NAMES[@]}"; do
        ns=$lab-$node
        echo "== $node"
        ip -n "$ns" -d -o link | sed -E \
            -e 's/^[0-9]+: //' -e 's/@(if[0-9]+|NONE)//' \
            -e 's#link/ether [0-9a-f:]+#link/ether MAC#' \
            -e "s/link-netns $lab-/link-netns LAB-/" -e 's/link-netnsid [0-9]+/link-netnsid N/' \
            -e "s/altname tunbench\\.$lab/altname tunbench.LAB/g" -e 's/ +$//'
        ip -n "$ns" -br addr | sed -E -e 's/@(if[0-9]+|NONE)//' -e 's#fe80::[0-9a-f:]+/64##' -e 's/ +/ /g' -e 's/ $//'
        ip -n "$ns" -4 route | sort
        ip -n "$ns" -6 route | sort
        ip -n "$ns" -6 rule
        ip -n "$ns" -4 rule
        ip netns exec "$ns" sysctl -a 2>/dev/null | grep '^net\.' | sort
    done
}

median() { sort -g | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else printf "%.6f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
now() { echo "$EPOCHREALTIME"; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a - b}'; }

assert_clean() {
    local left
    left=$(ours_left)
    [[ -z $left ]] || die "namespaces of this benchmark still present $1:
$left"
    [[ ! -e /run/tunbench/$TB ]] || die "tunbench still has a record of lab $TB $1"
}

tb_up() { "$bin" up "$topo" --name "$TB" >/dev/null || die "tunbench up failed"; }
tb_down() { "$bin" down "$TB" >/dev/null || die "tunbench down failed"; }
sh_up() { sh "$work/up.sh" || die "the ip script's up failed"; }
sh_down() { sh "$work/down.sh" || die "the ip script's down failed"; }

# --- same lab both ways? (also serves as a warm-up)
assert_clean "before the start"
tb_up
sh_up
sleep 1   # link-local addresses and their routes appear asynchronously
dump_lab "$TB" >"$work/state-tunbench.txt"
dump_lab "$SH" >"$work/state-script.txt"
if ! diff -u "$work/state-tunbench.txt" "$work/state-script.txt" >"$work/state.diff"; then
    head -n 80 "$work/state.diff" >&2
    die "the ip script does NOT build the same lab as tunbench (diff above: - tunbench, + script)"
fi
echo "# check: both ways build the same lab ($(grep -c '^== ' "$work/state-tunbench.txt") namespaces," \
    "$(wc -l <"$work/state-tunbench.txt") normalised lines of links, addresses, routes, rules, net.* sysctls identical)"
tb_down
sh_down
assert_clean "after the check"

# --- timed rounds; who goes first alternates from round to round
declare -a TT ST RATIO
time_tb() {
    local t0 t1 t2
    sleep "$SETTLE"; assert_clean "before a timed run"
    t0=$(now); tb_up; t1=$(now); tb_down; t2=$(now)
    TB_UP=$(sub "$t1" "$t0"); TB_DOWN=$(sub "$t2" "$t1"); TB_ALL=$(sub "$t2" "$t0")
}
time_sh() {
    local t0 t1 t2
    sleep "$SETTLE"; assert_clean "before a timed run"
    t0=$(now); sh_up; t1=$(now); sh_down; t2=$(now)
    SH_UP=$(sub "$t1" "$t0"); SH_DOWN=$(sub "$t2" "$t1"); SH_ALL=$(sub "$t2" "$t0")
}

rev=$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)
printf '# %s, tunbench at %s, %s nodes, %s rounds, lab names %s (tunbench) and %s (script)\n' \
    "$(date -u +%FT%TZ)" "$rev" "$NODES" "$ROUNDS" "$TB" "$SH"
printf '# machine: %s CPUs, Linux %s, load average %s\n' "$(nproc)" "$(uname -r)" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-5s %-9s | %9s %9s %9s | %9s %9s %9s | %7s\n' round first \
    tb-up tb-down tb-total sh-up sh-down sh-total ratio
for ((r = 1; r <= ROUNDS; r++)); do
    if ((r % 2)); then first=tunbench; time_tb; time_sh; else first=script; time_sh; time_tb; fi
    ratio=$(awk -v a="$TB_ALL" -v b="$SH_ALL" 'BEGIN {printf "%.3f", a / b}')
    TT+=("$TB_ALL"); ST+=("$SH_ALL"); RATIO+=("$ratio")
    TBU+=("$TB_UP"); TBD+=("$TB_DOWN"); SHU+=("$SH_UP"); SHD+=("$SH_DOWN")
    printf '%-5s %-9s | %9s %9s %9s | %9s %9s %9s | %7s\n' "$r" "$first" \
        "$TB_UP" "$TB_DOWN" "$TB_ALL" "$SH_UP" "$SH_DOWN" "$SH_ALL" "$ratio"
done
assert_clean "after the last round"

med() { printf '%s\n' "$@" | median | awk '{printf "%.3f", $1}'; }
printf '%-15s | %9s %9s %9s | %9s %9s %9s | %7s\n' median \
    "$(med "${TBU[@]}")" "$(med "${TBD[@]}")" "$(med "${TT[@]}")" \
    "$(med "${SHU[@]}")" "$(med "${SHD[@]}")" "$(med "${ST[@]}")" "$(med "${RATIO[@]}")"
echo "# times in seconds (wall); ratio = tunbench total / script total in the same round;"
echo "# median ratio tunbench/script for $NODES nodes: $(med "${RATIO[@]}") (issue 2's target: <= 0.3 at 100 nodes)"
