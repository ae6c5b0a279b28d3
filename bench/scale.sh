#!/usr/bin/env bash
# Benchmark (not a test): what a lab costs as it grows (issue 16). For each shape
# (`tunbench gen chain`, `tunbench gen star`) and size, ROUNDS rounds of
# `tunbench up`, `tunbench check` (its automatic mode: all pairs up to 100 nodes,
# a sample above) and `tunbench down`, each timed (wall clock, the whole command).
#
#   sudo bench/scale.sh [--sizes "10 100 1000 2000"] [--shapes "chain star"]
#                       [--rounds N] [--bin PATH] [--out DIR] [--keep-neigh]
#   bench/scale.sh --report DIR        (no root: render DIR's table again)
#
# --bin: a tunbench binary to use instead of building this checkout (release, honouring
# CARGO_TARGET_DIR). Lab names: sc + c (chain) or s (star) + size (scc1000, scs10).
# `down` returns once the namespaces are deleted; the kernel frees them afterwards, on
# its own workers and under the locks `up` needs (a chain of 1,000 brought up while the
# previous one was being freed waited 10 s for its links). So before every `up` the
# script waits SETTLE seconds (default 2) plus SETTLE_PER_100 (default 1) for every
# 100 nodes of the lab it took down last.
#
# The kernel keeps ARP and ND entries in one table per family for all namespaces
# together, at most net.ipv{4,6}.neigh.default.gc_thresh3 (1024 by default): a lab of
# a thousand nodes needs more, and `check` would report its neighbours as silent. For
# the run the script raises gc_thresh1/2/3 of both families to at least NEIGH (default
# 32768) and puts the old values back on exit (--keep-neigh: leave them alone). That
# is the only change it makes outside its labs.
#
# Output: every step on stderr; the report on stdout, also in DIR/report.md (default
# DIR: results/scale-UTCTIME/): a header (date, commit, machine, the load average at
# the start and the end) and one row per shape and size: medians of up, down,
# up + down, up + down per node, check's time, its mode and its verdict. DIR also
# holds runs.tsv (every step) and settings. Exit 1 when a step failed.
#
# The labs are taken down on exit, also on failure or Ctrl-C; one run at a time (a
# lock in /run/lock).
#
# Figures, method and history: docs/benchmarks/scale.md (index: BENCHMARKS.md).
set -euo pipefail
HERE=$(pwd)
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BENCH=scale
. bench/common.sh

SIZES="10 100 1000 2000"
SHAPES="chain star"
ROUNDS=3
OUT=
REPORT=
BIN=
KEEP_NEIGH=0
NEIGH=${NEIGH:-32768}
SETTLE=${SETTLE:-2}
SETTLE_PER_100=${SETTLE_PER_100:-1}
last=0
while [[ $# -gt 0 ]]; do
    case $1 in
        --sizes) SIZES=${2-}; shift 2 || die "--sizes needs a value" ;;
        --shapes) SHAPES=${2-}; shift 2 || die "--shapes needs a value" ;;
        --rounds) ROUNDS=${2-}; shift 2 || die "--rounds needs a value" ;;
        --bin) BIN=${2-}; shift 2 || die "--bin needs a value" ;;
        --out) OUT=${2-}; shift 2 || die "--out needs a value" ;;
        --report) REPORT=${2-}; shift 2 || die "--report needs a value" ;;
        --keep-neigh) KEEP_NEIGH=1; shift ;;
        *) die "unknown argument '$1' (see the top of $0)" ;;
    esac
done
abs() { [[ $1 == /* ]] && echo "$1" || echo "$HERE/$1"; }

# --- the report: one markdown row per shape and size, from runs.tsv
render() {
    local dir=$1
    [[ -f $dir/runs.tsv && -f $dir/settings ]] || die "$dir has no runs.tsv and settings"
    # shellcheck disable=SC1091
    . "$dir/settings"
    {
        echo "# Scale: up, check and down of generated labs"
        echo
        echo "$STARTED to $ENDED, tunbench $REV, $MACHINE; load average $LOAD_START at the start, $LOAD_END at the end; $ROUNDS rounds, medians; neighbour tables (gc_thresh3) $NEIGH_NOTE."
        echo
        echo "| shape | nodes | up s | down s | up + down s | up + down per node ms | check s | check mode | check |"
        echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"
        awk -F'\t' '
            function median(list,   n, v, i, j, t) {
                n = split(list, v, " ")
                for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
                return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
            }
            NR == 1 { next }
            {
                k = $1 "\t" $2
                if (!(k in seen)) { seen[k] = 1; order[++n] = k }
                if ($4 == "ok") { up[k] = up[k] " " $5; down[k] = down[k] " " $8; both[k] = both[k] " " ($5 + $8) }
                else failed[k]++
                chk[k] = chk[k] " " $6
                mode[k] = $9
                verdict[k] = verdict[k] (verdict[k] == "" ? "" : ", ") ($7 == 0 ? "pass" : ($7 == "" ? "-" : "exit " $7))
            }
            END {
                for (i = 1; i <= n; i++) {
                    k = order[i]; split(k, f, "\t")
                    if (!(k in up)) { printf "| %s | %s | failed | | | | | | |\n", f[1], f[2]; continue }
                    b = median(both[k])
                    printf "| %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %s | %s%s |\n", f[1], f[2],
                        median(up[k]), median(down[k]), b, 1000 * b / f[2], median(chk[k]), mode[k], verdict[k],
                        (k in failed ? sprintf("; %d failed", failed[k]) : "")
                }
            }' "$dir/runs.tsv"
        echo
        echo "Times are wall seconds of the whole command (process start to exit). check's mode is its automatic choice; its verdict per round."
    } >"$dir/report.md"
    cat "$dir/report.md"
}
if [[ -n $REPORT ]]; then
    render "$(abs "$REPORT")"
    exit 0
fi

for s in $SIZES; do num "a size" "$s"; [[ $s -ge 2 ]] || die "a size is at least 2 (got $s)"; done
for s in $SHAPES; do [[ $s == chain || $s == star ]] || die "a shape is chain or star (got '$s')"; done
num "--rounds" "$ROUNDS"
num "NEIGH" "$NEIGH"
[[ $SETTLE =~ ^[0-9]+$ && $SETTLE_PER_100 =~ ^[0-9]+$ ]] || die "SETTLE and SETTLE_PER_100 are whole seconds"
[[ $EUID -eq 0 ]] || die "run as root (it builds network namespaces)"
for c in ip flock sysctl; do command -v "$c" >/dev/null || die "$c is missing"; done
exec 9>/run/lock/tunbench-bench-scale.lock
flock -n 9 || die "another run holds the sc* labs (/run/lock/tunbench-bench-scale.lock)"

if [[ -n $BIN ]]; then
    TB=$(abs "$BIN")
    [[ -x $TB ]] || die "no binary at $TB"
else
    build_tunbench
fi
OUT=$(abs "${OUT:-results/scale-$(date -u +%Y%m%dT%H%M%SZ)}")
mkdir -p "$OUT"
work=$(mktemp -d /tmp/bench-scale.XXXXXX)

LABS=()
for shape in $SHAPES; do for n in $SIZES; do LABS+=("sc${shape:0:1}$n"); done; done
OLD_NEIGH=()
KEYS=()
for f in 4 6; do for t in 1 2 3; do KEYS+=("net.ipv$f.neigh.default.gc_thresh$t"); done; done
cleanup() {
    local rc=$? lab i
    trap - EXIT INT TERM
    for lab in "${LABS[@]}"; do "$TB" down "$lab" >/dev/null 2>&1 || true; done
    for i in "${!OLD_NEIGH[@]}"; do sysctl -qw "${KEYS[$i]}=${OLD_NEIGH[$i]}" || true; done
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

NEIGH_NOTE="left as they were"
if [[ $KEEP_NEIGH -eq 0 ]]; then
    for k in "${KEYS[@]}"; do OLD_NEIGH+=("$(sysctl -n "$k")"); done
    for i in "${!KEYS[@]}"; do
        [[ ${OLD_NEIGH[$i]} -ge $NEIGH ]] || sysctl -qw "${KEYS[$i]}=$NEIGH"
    done
    NEIGH_NOTE="raised to $NEIGH for the run"
fi

# Labs of ours an earlier run left (killed hard): we hold the lock, so remove them.
for lab in "${LABS[@]}"; do "$TB" down "$lab" >/dev/null 2>&1 || true; done

STARTED=$(date -u +%FT%TZ)
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
REV=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)
MACHINE="$(nproc) CPUs, Linux $(uname -r)"
printf 'shape\tnodes\tround\tup\tup_s\tcheck_s\tcheck_rc\tdown_s\tcheck_mode\n' >"$OUT/runs.tsv"
sub() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a - b}'; }
failed=0
for shape in $SHAPES; do
    for n in $SIZES; do
        lab=sc${shape:0:1}$n
        topo=$work/$lab.toml
        "$TB" gen "$shape" --nodes "$n" --name "$lab" -o "$topo"
        for ((r = 1; r <= ROUNDS; r++)); do
            sleep "$(awk -v s="$SETTLE" -v p="$SETTLE_PER_100" -v n="$last" 'BEGIN {print s + p * n / 100}')"
            last=$n
            t0=$(now)
            if "$TB" up "$topo" >"$work/up.log" 2>&1; then up=ok; else up=failed; fi
            t1=$(now)
            crc= ; mode=
            if [[ $up == ok ]]; then
                set +e
                "$TB" check "$lab" >"$work/check.log" 2>&1
                crc=$?
                set -e
                mode=$(sed -n 's/^mode: \([a-z]*\).*/\1/p' "$work/check.log" | head -1)
            else
                cat "$work/up.log" >&2
                failed=1
            fi
            t2=$(now)
            "$TB" down "$lab" >/dev/null 2>&1 || { failed=1; echo "$BENCH: down $lab failed" >&2; }
            t3=$(now)
            [[ $crc == 0 || -z $crc ]] || { failed=1; grep -E '^(FAIL|note)' "$work/check.log" | head -5 >&2 || true; }
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$shape" "$n" "$r" "$up" \
                "$(sub "$t1" "$t0")" "$(sub "$t2" "$t1")" "$crc" "$(sub "$t3" "$t2")" "$mode" |
                tee -a "$OUT/runs.tsv" >&2
        done
    done
done
ENDED=$(date -u +%FT%TZ)
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
declare -p STARTED ENDED LOAD_START LOAD_END REV MACHINE ROUNDS NEIGH_NOTE >"$OUT/settings"
render "$OUT"
exit "$failed"
