#!/usr/bin/env bash
# Benchmark (not a test): two builds of tunbench, BEFORE and AFTER, on the userspace
# datapaths in one run, so a change (a refactor, a new TUN backend) can be shown to
# keep or change throughput and CPU with the same script, the same machine and the
# same minutes. Paths, one lab each, built by the variant's own binary:
#   wireguard  topologies/wireguard.toml, scenario tunbench (both peers on tunbench's
#              WireGuard), lab `bawg`, a -> b 198.18.71.2
#   dslite     topologies/dslite.toml, scenario userspace (tunbench's B4 and AFTR),
#              lab `bads`, client -> server 198.18.52.10
# Traffic is Debian's iperf3 (the neutral tool), TCP, 1 stream, -t SECONDS, server in
# the far node, client in the near one: upload (the client sends) and download (-R).
#
#   sudo bench/before-after.sh [--rounds N] [--seconds S] [--out DIR]
#                              [--before-env VAR=VALUE]... [--after-env VAR=VALUE]...
#                              BEFORE AFTER
#   bench/before-after.sh --report DIR        (no root: render DIR's table again)
#
# BEFORE and AFTER are each a git revision of this repository (c53648e, HEAD, a
# branch) or a path to a tunbench binary (anything with a `/` in it; its file name
# must start with `tunbench`, as tunbench starts its datapath processes from its own
# executable). A revision is built (release) in a temporary git worktree,
# target/before-after/src, with CARGO_TARGET_DIR=target/before-after/cargo, under
# `nice -n 19`; the binary is kept as target/before-after/bin/FULLHASH/tunbench, so a
# later run reuses it. HEAD is the committed HEAD: uncommitted changes are not in it
# (build them yourself and pass the binary's path). --before-env / --after-env
# (repeatable) set environment variables for every tunbench command of that variant
# (up, exec, down; the datapath processes inherit them), so one binary can be compared
# with itself under two settings:
#   sudo bench/before-after.sh --after-env TUNBENCH_TUN=tun-rs HEAD HEAD
# Only the stable CLI is used (`tunbench up FILE --scenario S --name LAB`, `tunbench
# exec LAB NODE -- CMD`, `tunbench down LAB`), checked in each binary's --help first, so
# a revision older than this script builds and runs too. The topology files are this
# checkout's, the same for both variants.
#
# Rounds (default 5): for each path, each variant in turn brings the lab up, pings
# through it until it answers, runs upload then download, and takes the lab down. The
# order of the variants alternates from round to round (odd rounds BEFORE first) so
# machine noise hits both alike. Per run it records the received bit/s
# (end.sum_received of the client's -J), the sender's retransmits and the CPU seconds
# of the lab's datapath processes during the client's run (utime+stime from
# /proc/PID/stat of each process in /run/tunbench/LAB/state.json, summed; runs.tsv
# says how many). A failed run is retried twice.
#
# Output: every run on stderr; then the report on stdout, also written to
# DIR/report.md (default DIR: results/before-after-UTCTIME/ in the repository): a
# header with both
# variants (full commit hashes, or the binary's path and sha256; their environment),
# the machine, rounds, seconds and date, and one markdown table row per path and
# direction: median (min-max) Gbit/s per variant, the median (min-max) of the per-round
# ratios AFTER/BEFORE, and the median CPU seconds per Gbit received per variant.
# DIR also holds runs.tsv (every run), settings and logs/ (each lab's datapath logs).
# Exit 1 when a run failed three times (its cell is then missing from the table).
#
# The labs are taken down on exit, also on failure or Ctrl-C; one run of this script
# at a time (a lock in /run/lock). Environment: PORT (iperf3's port in the lab,
# default 5201).
#
# Figures, method and history: docs/benchmarks/before-after.md (index: BENCHMARKS.md).
set -euo pipefail
HERE=$(pwd)
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BENCH=before-after
. bench/common.sh

ROUNDS=5
SECS=5
OUT=
REPORT=
BENV=()
AENV=()
POS=()
PORT=${PORT:-5201}
envarg() { [[ ${2-} =~ ^[A-Za-z_][A-Za-z0-9_]*=.*$ ]] || die "$1 takes VAR=VALUE (got '${2-}')"; }
while [[ $# -gt 0 ]]; do
    case $1 in
        --rounds) ROUNDS=${2-}; shift 2 || die "--rounds needs a value" ;;
        --seconds) SECS=${2-}; shift 2 || die "--seconds needs a value" ;;
        --out) OUT=${2-}; shift 2 || die "--out needs a value" ;;
        --report) REPORT=${2-}; shift 2 || die "--report needs a value" ;;
        --before-env) envarg "$1" "${2-}"; BENV+=("$2"); shift 2 ;;
        --after-env) envarg "$1" "${2-}"; AENV+=("$2"); shift 2 ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        --) shift; POS+=("$@"); break ;;
        -*) die "unknown option '$1' (see --help)" ;;
        *) POS+=("$1"); shift ;;
    esac
done

# Paths given relative to where the script was started from.
from_here() { [[ $1 == /* ]] && echo "$1" || echo "$HERE/$1"; }
[[ -z $OUT ]] || OUT=$(from_here "$OUT")
[[ -z $REPORT ]] || REPORT=$(from_here "$REPORT")

PATHS=(wireguard dslite)
# path -> TOPO SCENARIO LAB FROM TO ADDR
path_conf() {
    case $1 in
        wireguard) TOPO=topologies/wireguard.toml SCENARIO=tunbench LAB=bawg FROM=a TO=b ADDR=198.18.71.2 ;;
        dslite) TOPO=topologies/dslite.toml SCENARIO=userspace LAB=bads FROM=client TO=server ADDR=198.18.52.10 ;;
        *) return 1 ;;
    esac
}

# render DIR: DIR/report.md from DIR/settings and DIR/runs.tsv, printed too. The body
# keeps column 0 for the Python heredoc.
render() {
local dir=$1
[[ -f $dir/settings && -f $dir/runs.tsv ]] ||
    die "$dir: not the output directory of a before-after run (no settings, runs.tsv)"
(
. "$dir/settings"
export ROUNDS SECS BEFORE_DESC AFTER_DESC BEFORE_ENVS AFTER_ENVS MACHINE LOAD IPERF STARTED ENDED
python3 - "$dir/runs.tsv" <<'PY'
import csv, os, statistics as st, sys
E = os.environ
rows = [r for r in csv.DictReader(open(sys.argv[1]), delimiter="\t")]
rounds = int(E["ROUNDS"])
ok = {(r["variant"], r["path"], r["dir"], int(r["round"])): r for r in rows if r["ok"] == "1"}
failed = [r for r in rows if r["ok"] != "1"]
paths = [("wireguard", "WireGuard a -> b (wireguard.toml, scenario tunbench)"),
         ("dslite", "DS-Lite client -> server (dslite.toml, scenario userspace)")]
dirs = [("upload", "upload"), ("download", "download (-R)")]
gbps = lambda r: float(r["bps"]) / 1e9
def spread(v, fmt):
    if not v:
        return "-"
    s = fmt.format(st.median(v))
    if len(v) > 1:
        s += " (" + fmt.format(min(v)) + "-" + fmt.format(max(v)) + ")"
    if len(v) < rounds:
        s += f" n={len(v)}"
    return s
def vals(variant, p, d, f):
    return [f(ok[(variant, p, d, n)]) for n in range(1, rounds + 1) if (variant, p, d, n) in ok]
def ratio(p, d):
    v = [gbps(ok[("after", p, d, n)]) / gbps(ok[("before", p, d, n)]) for n in range(1, rounds + 1)
         if ("after", p, d, n) in ok and ("before", p, d, n) in ok]
    if not v:
        return "-"
    s = spread(v, "{:.2f}")
    head, sep, tail = s.partition(" ")
    return f"**{head}**{sep}{tail}"
def cpg(variant, p, d):
    v = vals(variant, p, d, lambda r: float(r["cpu_s"]) / float(r["gbit"]))
    return f"{st.median(v):.3f}" if v else "-"
def envs(s):
    return f"; environment: `{s}`" if s else ""
print("# Before/after: two tunbench builds on the userspace datapaths")
print()
print(f"- before: {E['BEFORE_DESC']}{envs(E['BEFORE_ENVS'])}")
print(f"- after: {E['AFTER_DESC']}{envs(E['AFTER_ENVS'])}")
print(f"- when: {E['STARTED']} to {E['ENDED']}")
print(f"- machine: {E['MACHINE']}; load average at the start {E['LOAD']}")
print(f"- {rounds} round(s), the order of the variants alternating (odd rounds before first); "
      f"{E['IPERF']}, TCP, 1 stream, -t {E['SECS']} s, upload and download (-R)")
print()
print("| path | direction | before Gbit/s | after Gbit/s | after/before | CPU-s/Gbit before | CPU-s/Gbit after |")
print("|---|---|---|---|---|---|---|")
for p, pname in paths:
    for d, dname in dirs:
        print(f"| {pname} | {dname} | {spread(vals('before', p, d, gbps), '{:.2f}')} | "
              f"{spread(vals('after', p, d, gbps), '{:.2f}')} | {ratio(p, d)} | "
              f"{cpg('before', p, d)} | {cpg('after', p, d)} |")
print()
print(f"Gbit/s received (iperf3's end.sum_received): median over the rounds (min-max). after/before: "
      f"median (min-max) of the per-round ratios. CPU-s/Gbit: utime+stime of the lab's datapath "
      f"processes during the client's run per Gbit received, median over the rounds.")
if failed:
    print()
    print(f"{len(failed)} run(s) failed three times and are missing above: " +
          ", ".join(f"round {r['round']} {r['variant']} {r['path']} {r['dir']}" for r in failed))
PY
) >"$dir/report.md"
cat "$dir/report.md"
}

if [[ -n $REPORT ]]; then
    ((${#POS[@]} == 0)) || die "--report DIR takes no BEFORE AFTER"
    command -v python3 >/dev/null || die "python3 is missing"
    render "$REPORT"
    exit 0
fi

((${#POS[@]} == 2)) || die "give BEFORE and AFTER, each a git revision or a path to a tunbench binary (see --help)"
num --rounds "$ROUNDS"
num --seconds "$SECS"
num PORT "$PORT"
. scripts/setup.sh --build --tests
for c in iperf3 python3 ss ping git sha256sum flock; do command -v "$c" >/dev/null || die "$c is missing"; done
for p in "${PATHS[@]}"; do
    path_conf "$p"
    [[ -f $TOPO ]] || die "$TOPO is missing"
    grep -q "^\[scenarios\.$SCENARIO\]" "$TOPO" || die "$TOPO has no scenario $SCENARIO"
done

mkdir -p target/before-after
exec 9>/run/lock/tunbench-bench-before-after.lock
flock -n 9 || die "another run holds labs bawg and bads (/run/lock/tunbench-bench-before-after.lock)"

OUT=${OUT:-results/before-after-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT/logs"
HZ=$(getconf CLK_TCK)
work=$(mktemp -d /tmp/before-after.XXXXXX)
WT=$ROOT/target/before-after/src
WT_MADE=0
SERVER_PID=
CUR_LAB=
CUR_V=
DP_PIDS=()

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [[ -n $SERVER_PID ]]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
    [[ -n $CUR_LAB ]] && lab_down
    if ((WT_MADE)); then git worktree remove --force "$WT" >/dev/null 2>&1 || true; fi
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- the two variants: V_BIN[v], V_DESC[v] (for the header), V_ENV_before/after
declare -A V_BIN V_DESC
BEFORE_ENVS="${BENV[*]}"
AFTER_ENVS="${AENV[*]}"

# rev -> builds it (or reuses the kept binary); sets BIN and FULL
build_rev() {
    local rev=$1 kept cargo_dir=$ROOT/target/before-after/cargo
    FULL=$(git rev-parse --verify --quiet "$rev^{commit}") || die "'$rev' is neither a path with a / nor a git revision here"
    kept=$ROOT/target/before-after/bin/$FULL/tunbench
    BIN=$kept
    if [[ -x $kept ]]; then
        echo "$BENCH: $rev = $FULL: reusing $kept" >&2
        return 0
    fi
    echo "$BENCH: building $rev = $FULL (release, nice -n 19) in $WT ..." >&2
    git worktree remove --force "$WT" >/dev/null 2>&1 || true
    rm -rf "$WT"
    git worktree prune
    WT_MADE=1
    git worktree add --detach --quiet "$WT" "$FULL" >&2
    (cd "$WT" && CARGO_TARGET_DIR=$cargo_dir nice -n 19 cargo build --release --locked -q --bin tunbench >&2) ||
        die "building $rev ($FULL) failed"
    mkdir -p "${kept%/tunbench}"
    cp "$cargo_dir/release/tunbench" "$kept.tmp"
    mv "$kept.tmp" "$kept"
    git worktree remove --force "$WT" >/dev/null 2>&1 || true
    WT_MADE=0
}

for v in before after; do
    spec=${POS[0]}
    [[ $v == after ]] && spec=${POS[1]}
    if [[ $spec == */* ]]; then
        spec=$(from_here "$spec")
        [[ -f $spec && -x $spec ]] || die "$v: $spec is not an executable file"
        [[ $(basename "$spec") == tunbench* ]] ||
            die "$v: $spec: the binary's name must start with tunbench (it starts its datapath processes from its own executable)"
        BIN=$(realpath "$spec")
        V_DESC[$v]="binary $BIN (sha256 $(sha256sum "$BIN" | cut -d' ' -f1))"
    else
        build_rev "$spec"
        subject=$(git log -1 --format=%s "$FULL")
        ((${#subject} <= 72)) || subject="${subject:0:71}…"
        V_DESC[$v]="$spec = commit $FULL ($(git log -1 --format=%cI "$FULL"), $subject)"
    fi
    V_BIN[$v]=$BIN
done

# tbv VARIANT: TBV=(env VAR=VALUE... BINARY), that variant's tunbench with its
# environment; tb VARIANT ARGS... runs it.
tbv() {
    if [[ $1 == before ]]; then
        TBV=(env ${BENV[@]+"${BENV[@]}"} "${V_BIN[before]}")
    else
        TBV=(env ${AENV[@]+"${AENV[@]}"} "${V_BIN[after]}")
    fi
}
tb() {
    local TBV
    tbv "$1"
    shift
    "${TBV[@]}" "$@"
}

# The CLI this script uses, in both binaries' own words.
for v in before after; do
    h=$(tb "$v" up --help 2>&1) || die "$v: '${V_BIN[$v]} up --help' failed"
    [[ $h == *--scenario* && $h == *--name* ]] || die "$v: 'tunbench up' has no --scenario/--name"
    tb "$v" exec --help 2>&1 | grep -q 'exec.*<LAB> <NODE>' || die "$v: no 'tunbench exec LAB NODE -- CMD'"
    tb "$v" down --help 2>&1 | grep -q 'down.*<LAB>' || die "$v: no 'tunbench down LAB'"
done

# Labs of ours an earlier run left (killed hard): we hold the lock, so remove them.
for p in "${PATHS[@]}"; do
    path_conf "$p"
    if [[ -e /run/tunbench/$LAB ]] || ip netns list | awk '{print $1}' | grep -q "^$LAB-"; then
        echo "$BENCH: removing the leftover lab $LAB" >&2
        tb after down "$LAB" >&2 || true
    fi
done

# --- one lab
# The lab's datapath processes, from its state file: "pid start_time" lines.
dp_procs() {
    python3 - "/run/tunbench/$1/state.json" <<'PY' 2>/dev/null || true
import json, sys
for p in json.load(open(sys.argv[1])).get("processes", []):
    print(p["id"]["pid"], p["id"]["start_time"])
PY
}
# pid start_time: the same process, alive (not a zombie)
same_proc() {
    local f
    f=$(sed 's/.*) //' /proc/"$1"/stat 2>/dev/null) || return 1
    read -r -a f <<<"$f"
    [[ ${f[0]} != Z && ${f[19]} == "$2" ]]
}
lab_up() { # variant path
    local v=$1 i pid st
    path_conf "$2"
    CUR_LAB=$LAB CUR_V=$v
    if ! tb "$v" up "$TOPO" --scenario "$SCENARIO" --name "$LAB" >"$work/up.log" 2>&1; then
        cat "$work/up.log" >&2
        echo "$BENCH: $v: tunbench up $TOPO --scenario $SCENARIO failed" >&2
        return 1
    fi
    DP_PIDS=()
    while read -r pid st; do DP_PIDS+=("$pid:$st"); done < <(dp_procs "$LAB")
    ((${#DP_PIDS[@]})) || { echo "$BENCH: $v: lab $LAB records no datapath process" >&2; return 1; }
    for ((i = 0; i < 20; i++)); do
        tb "$v" exec "$LAB" "$FROM" -- ping -c1 -W1 -q "$ADDR" >/dev/null 2>&1 && return 0
    done
    echo "$BENCH: $v: no answer from $ADDR through lab $LAB for 20 s" >&2
    return 1
}
lab_down() {
    local p n i left
    [[ -n $CUR_LAB ]] || return 0
    for n in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$CUR_LAB-" || true); do
        for p in $(ip netns pids "$n" 2>/dev/null); do
            [[ $(cat /proc/"$p"/comm 2>/dev/null) == iperf3 ]] && kill "$p" 2>/dev/null || true
        done
    done
    tb "$CUR_V" down "$CUR_LAB" >"$work/down.log" 2>&1 || { echo "$BENCH: down $CUR_LAB failed:" >&2; cat "$work/down.log" >&2; }
    # `down` stops the datapaths; give them 5 s, then kill what is left.
    for ((i = 0; i < 50; i++)); do
        left=()
        for p in ${DP_PIDS[@]+"${DP_PIDS[@]}"}; do same_proc "${p%:*}" "${p#*:}" && left+=("${p%:*}"); done
        ((${#left[@]})) || break
        sleep 0.1
    done
    for p in ${left[@]+"${left[@]}"}; do
        echo "$BENCH: killing the leftover datapath $p of $CUR_LAB" >&2
        kill -9 "$p" 2>/dev/null || true
    done
    DP_PIDS=() CUR_LAB= CUR_V=
}
cpu_ticks() { # -> utime+stime of the lab's datapaths, -1 when one is gone
    local p t=0 v
    for p in "${DP_PIDS[@]}"; do
        same_proc "${p%:*}" "${p#*:}" || { echo -1; return; }
        v=$(proc_ticks "${p%:*}")
        [[ -n $v ]] || { echo -1; return; }
        t=$((t + v))
    done
    echo "$t"
}

# --- one test; sets BPS, GBIT (received), CPU (s), RETR
run_once() { # variant [-R]
    local v=$1 i c0 c1 rc=0
    shift
    # Not through the function: $! is then the server itself (env and exec replace
    # themselves), which cleanup can stop.
    tbv "$v"
    "${TBV[@]}" exec "$LAB" "$TO" -- iperf3 -s -1 -p "$PORT" >"$work/server.log" 2>&1 &
    SERVER_PID=$!
    for ((i = 0; i < 250; i++)); do
        [[ -n $(tb "$v" exec "$LAB" "$TO" -- ss -Hltn "sport = :$PORT" 2>/dev/null) ]] && break
        sleep 0.02
    done
    c0=$(cpu_ticks)
    tb "$v" exec "$LAB" "$FROM" -- timeout $((SECS + 30)) iperf3 -c "$ADDR" -p "$PORT" -t "$SECS" -J "$@" \
        >"$work/client.json" 2>"$work/client.err" || rc=$?
    c1=$(cpu_ticks)
    for ((i = 0; i < 250; i++)); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.02; done
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=
    ((rc == 0 && c0 >= 0 && c1 >= 0)) || return 1
    read -r BPS GBIT RETR < <(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
if "error" in d: sys.exit(1)
s = d["end"]["sum_received"]
if s["bits_per_second"] <= 0: sys.exit(1)
print(s["bits_per_second"], s["bytes"] * 8 / 1e9, d["end"].get("sum_sent", {}).get("retransmits", ""))' "$work/client.json") || return 1
    CPU=$(awk -v a="$c0" -v b="$c1" -v hz="$HZ" 'BEGIN {printf "%.2f", (b - a) / hz}')
}
FAILS=0
run() { # variant path dir
    local v=$1 p=$2 d=$3 a flag=()
    [[ $d == download ]] && flag=(-R)
    for a in 1 2 3; do
        if run_once "$v" ${flag[@]+"${flag[@]}"}; then
            printf '%s\t%s\t%s\t%s\t%s\t1\t%s\t%s\t%s\t%s\t%s\n' "$r" "$POSN" "$v" "$p" "$d" "$BPS" "$GBIT" "$CPU" "${#DP_PIDS[@]}" "$RETR" >>"$OUT/runs.tsv"
            printf '%s: round %d %-6s %-9s %-8s %6.2f Gbit/s  cpu %5.2f s  %5.3f s/Gbit  retr %s\n' "$BENCH" "$r" "$v" "$p" "$d" \
                "$(awk -v b="$BPS" 'BEGIN {print b / 1e9}')" "$CPU" "$(awk -v c="$CPU" -v g="$GBIT" 'BEGIN {print c / g}')" "$RETR" >&2
            return 0
        fi
        echo "$BENCH: round $r $v $p $d failed (attempt $a): $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("error",""))' "$work/client.json" 2>/dev/null) $(head -c 300 "$work/client.err")" >&2
        sleep 1
    done
    printf '%s\t%s\t%s\t%s\t%s\t0\t\t\t\t\t\n' "$r" "$POSN" "$v" "$p" "$d" >>"$OUT/runs.tsv"
    FAILS=$((FAILS + 1))
}

# --- rounds
STARTED=$(date -u +%FT%TZ)
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
MACHINE="$(nproc) CPUs ($(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)), Linux $(uname -r)"
IPERF=$(iperf3 --version | head -n1 | awk '{print $1, $2}')
BEFORE_DESC=${V_DESC[before]}
AFTER_DESC=${V_DESC[after]}
printf 'round\tpos\tvariant\tpath\tdir\tok\tbps\tgbit\tcpu_s\tdatapaths\tretransmits\n' >"$OUT/runs.tsv"
echo "$BENCH: before = $BEFORE_DESC${BEFORE_ENVS:+ [$BEFORE_ENVS]}" >&2
echo "$BENCH: after  = $AFTER_DESC${AFTER_ENVS:+ [$AFTER_ENVS]}" >&2
echo "$BENCH: $ROUNDS round(s), -t $SECS s, output in $OUT" >&2
for ((r = 1; r <= ROUNDS; r++)); do
    order=(before after)
    ((r % 2)) || order=(after before)
    for p in "${PATHS[@]}"; do
        POSN=0
        for v in "${order[@]}"; do
            POSN=$((POSN + 1))
            if lab_up "$v" "$p"; then
                for d in upload download; do run "$v" "$p" "$d"; done
            else
                for d in upload download; do
                    printf '%s\t%s\t%s\t%s\t%s\t0\t\t\t\t\t\n' "$r" "$POSN" "$v" "$p" "$d" >>"$OUT/runs.tsv"
                    FAILS=$((FAILS + 1))
                done
            fi
            mkdir -p "$OUT/logs/r$r-$v-$p"
            cp /run/tunbench/"$LAB"/logs/*.log "$OUT/logs/r$r-$v-$p/" 2>/dev/null || true
            lab_down
        done
    done
done
ENDED=$(date -u +%FT%TZ)
declare -p ROUNDS SECS BEFORE_DESC AFTER_DESC BEFORE_ENVS AFTER_ENVS MACHINE LOAD IPERF STARTED ENDED >"$OUT/settings"
echo >&2
render "$OUT"
((FAILS == 0)) || { echo "$BENCH: $FAILS run(s) failed three times" >&2; exit 1; }
