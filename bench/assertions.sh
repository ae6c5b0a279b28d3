#!/usr/bin/env bash
# Benchmark (not a test): what `tunbench test` costs per assertion (issue 16).
# A generated chain of NODES nodes gets COUNT reachability assertions (h0 to
# the far host across every router, IPv4 and IPv6 alternately: the generator
# routes end to end only, so the routers' own far addresses are not reachable
# from h0); for each
# COUNT, ROUNDS rounds of `tunbench test FILE` (up, every assertion, down), timed
# whole, beside `up` + `down` of the same file alone. Per assertion: the
# difference divided by COUNT.
#
#   sudo bench/assertions.sh [--nodes 10] [--counts "10 100"] [--rounds 3] [--bin PATH]
#
# Lab names: sa + count. Output: the table on stdout (markdown), every step on
# stderr. Exit 1 when a `tunbench test` does not pass. Labs are taken down on
# exit, also on failure or Ctrl-C.
#
# Figures, method and history: docs/benchmarks/scale.md (index: BENCHMARKS.md).
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH=assertions
. bench/common.sh

NODES=10
COUNTS="10 100"
ROUNDS=3
BIN=
while [[ $# -gt 0 ]]; do
    case $1 in
        --nodes) NODES=${2-}; shift 2 || die "--nodes needs a value" ;;
        --counts) COUNTS=${2-}; shift 2 || die "--counts needs a value" ;;
        --rounds) ROUNDS=${2-}; shift 2 || die "--rounds needs a value" ;;
        --bin) BIN=${2-}; shift 2 || die "--bin needs a value" ;;
        *) die "unknown argument $1 (see the header of bench/assertions.sh)" ;;
    esac
done
num --nodes "$NODES"
num --rounds "$ROUNDS"
[[ $NODES -ge 2 ]] || die "--nodes must be at least 2"
for c in $COUNTS; do num --counts "$c"; done
[[ $(id -u) == 0 ]] || die "needs root (namespaces)"
if [[ -n $BIN ]]; then TB=$BIN; else build_tunbench; fi

DIR=$(mktemp -d)
labs=()
cleanup() {
    for l in "${labs[@]}"; do "$TB" down "$l" >/dev/null 2>&1 || true; done
    rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The chain's nodes are h0, r1 ... h(N-1).
file_with() { # count lab -> path
    local count=$1 lab=$2 f="$DIR/$2.toml" k node fam
    "$TB" gen chain --nodes "$NODES" --name "$lab" -o "$f" >/dev/null
    node="h$((NODES - 1))"
    for ((k = 0; k < count; k++)); do
        if ((k % 2)); then fam=ipv6; else fam=ipv4; fi
        printf '\n[[assert]]\nname = "reach-%d"\nkind = "reach"\nfrom = "h0"\nto = "%s"\nfamily = "%s"\n' \
            "$k" "$node" "$fam" >>"$f"
    done
    echo "$f"
}

median() { sort -g | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

failed=0
rows=()
for count in $COUNTS; do
    lab=sa$count
    labs+=("$lab")
    f=$(file_with "$count" "$lab")
    tests=() updowns=()
    for ((r = 1; r <= ROUNDS; r++)); do
        t0=$(now)
        "$TB" up "$f" --name "$lab" >/dev/null
        "$TB" down "$lab" >/dev/null
        t1=$(now)
        if "$TB" test "$f" --name "$lab" >"$DIR/out" 2>&1; then :; else
            failed=1
            echo "$BENCH: tunbench test failed with $count assertions:" >&2
            cat "$DIR/out" >&2
        fi
        t2=$(now)
        ud=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')
        te=$(awk -v a="$t1" -v b="$t2" 'BEGIN {printf "%.3f", b - a}')
        echo "$BENCH: $count assertions, round $r: up+down $ud s, test $te s" >&2
        updowns+=("$ud")
        tests+=("$te")
    done
    ud=$(printf '%s\n' "${updowns[@]}" | median)
    te=$(printf '%s\n' "${tests[@]}" | median)
    per=$(awk -v t="$te" -v u="$ud" -v n="$count" 'BEGIN {printf "%.1f", (t - u) * 1000 / n}')
    rows+=("$(printf '| %d | %d | %.2f | %.2f | %.1f |' "$NODES" "$count" "$ud" "$te" "$per")")
done

echo "bench/assertions.sh, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $ROUNDS rounds, medians"
echo
echo "| chain nodes | assertions | up + down s | test s | per assertion ms |"
echo "| ---: | ---: | ---: | ---: | ---: |"
printf '%s\n' "${rows[@]}"
exit $failed
