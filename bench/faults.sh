#!/usr/bin/env bash
# Fault trials (not a timed benchmark): does a lab leave nothing behind when
# tunbench is killed at a bad moment?
#
#   sudo bench/faults.sh [--trials N] [--datapath-trials M] [--lab NAME]
#                        [--topology dslite|wireguard] [--calibrate K] [--seed S] [--out DIR]
#
# 1. Calibration: K normal `tunbench up` (default 3) of a topology with userspace
#    datapaths (default topologies/dslite.toml, scenario userspace: B4 and AFTR
#    processes; `--topology wireguard`: topologies/wireguard.toml, scenario
#    tunbench), each followed by `tunbench clean LAB`, watched: the longest up
#    is T, and B is 1.5 x the latest moment its last datapath process started.
#    (Most of up is the wait for the datapaths' first stats files.)
# 2. N trials (default 20) that SIGKILL `tunbench up` after a random delay:
#    3/4 of them in [0, B] (building), 1/4 in [B, T] (waiting), stratified (one
#    uniform draw in each equal part of a stretch, the parts in a shuffled
#    order), so they cover the whole of `up` however small N is.
# 3. M trials (default 4) that bring the lab up, start `tunbench measure` (IPv4
#    TCP, one 8 s run, through the datapaths) and SIGKILL one datapath process
#    (each in turn, upload and download alternating) 3 s into it; what measure
#    reported (exit code, time, its last lines, whether it names the dead
#    datapath) is kept.
# After every trial: `tunbench clean LAB` (never an unqualified clean: other labs
# may be up), then a check that nothing of the lab is left:
#   namespaces  `ip netns list` entries LAB-*
#   processes   any process whose command line names the lab (--lab LAB, LAB-NODE),
#               and any tunbench/iperf3/charon/wireguard-go/nft/ip process in one
#               of the lab's namespaces (by the namespaces' inodes, taken before
#               the clean; processes alive before the trial are not counted)
#   mounts      /proc/mounts entries under /run/netns/LAB-* or /run/tunbench/LAB
#   state       /run/tunbench/LAB
# Trial 1 checks the check: it plants two processes (see planted_trial) and
# stops the script unless both are found (the table shows them).
# A trial with leftovers is FAIL and names them; the script then removes them
# itself (only this lab's: its pids, its LAB-* namespaces, its state directory)
# so the next trial starts clean, and exits 1 at the end. Exit 0: no leftovers.
#
# Output: DIR (default results/faults-UTCTIME/) holds faults.md (the commit,
# machine, settings and one table row per trial), trials.tsv and logs/ (each
# command's output, each leftover found). faults.md is also printed.
#
# Environment: CARGO_TARGET_DIR.
#
# Figures, method and history: docs/benchmarks/faults-soak.md (index: BENCHMARKS.md).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh --build --tests
BENCH=faults
. bench/common.sh

TRIALS=20
DP_TRIALS=4
CALIBRATE=3
LAB=faults
KIND=dslite
SEED=
OUT=
while [[ $# -gt 0 ]]; do
    case $1 in
        --trials) TRIALS=${2-}; shift 2 ;;
        --datapath-trials) DP_TRIALS=${2-}; shift 2 ;;
        --calibrate) CALIBRATE=${2-}; shift 2 ;;
        --lab) LAB=${2-}; shift 2 ;;
        --topology) KIND=${2-}; shift 2 ;;
        --seed) SEED=${2-}; shift 2 ;;
        --out) OUT=${2-}; shift 2 ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done
num --trials "$TRIALS"
num --calibrate "$CALIBRATE"
[[ $DP_TRIALS =~ ^[0-9]+$ ]] || die "--datapath-trials must be a whole number (got '$DP_TRIALS')"
[[ $LAB =~ ^[A-Za-z0-9][A-Za-z0-9_]{0,19}$ ]] ||
    die "--lab must be 1-20 letters, digits or _ starting with a letter or digit (got '$LAB')"
[[ -z $SEED ]] && SEED=$((RANDOM * 32768 + RANDOM))
[[ $SEED =~ ^[0-9]+$ ]] || die "--seed must be a whole number (got '$SEED')"
case $KIND in
    dslite)
        TOPO=topologies/dslite.toml SCENARIO=userspace
        FROM=client TO=server ADDR=198.18.52.10 ;;
    wireguard)
        TOPO=topologies/wireguard.toml SCENARIO=tunbench
        FROM=a TO=b ADDR=198.18.71.2 ;;
    *) die "--topology must be dslite or wireguard (got '$KIND')" ;;
esac
for c in ip jq awk stat timeout; do command -v "$c" >/dev/null || die "$c is missing"; done

build_tunbench

exec 9>"/run/lock/tunbench-bench-$LAB.lock"
flock -n 9 || die "another run holds lab $LAB (/run/lock/tunbench-bench-$LAB.lock)"
lab_namespaces() { ip netns list | awk '{print $1}' | grep -E "^$LAB-" || true; }
if [[ -n $(lab_namespaces) || -e /run/tunbench/$LAB ]]; then
    die "lab $LAB already exists (namespaces or /run/tunbench/$LAB): take it down with 'tunbench down $LAB' or pick another --lab"
fi

OUT=${OUT:-results/faults-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT/logs"
TSV=$OUT/trials.tsv
MD=$OUT/faults.md
printf 'trial\tkind\tdelay_s\tcommand\tcommand_rc\tcommand_s\treport\tbefore_clean\tclean_rc\tclean_s\tleftovers\tverdict\n' >"$TSV"

# Whatever this script started and the lab itself go away on exit, also on failure.
BG=
PLANTED=
cleanup() {
    local rc=$? p
    trap - EXIT INT TERM
    for p in $BG $PLANTED; do kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    "$TB" clean "$LAB" >/dev/null 2>&1 || true
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.2f", b - a}'; }

# --- what a lab leaves behind

# Inodes of the lab's namespaces that exist now (to find processes in them once
# the clean has unmounted them).
lab_inodes() {
    local ns
    for ns in $(lab_namespaces); do stat -L -c %i "/run/netns/$ns" 2>/dev/null || true; done | tr '\n' ' '
}

# What the fault left for `clean` to remove: namespaces, the record, datapaths alive.
lab_found() {
    local n p alive=0 total=0 rec=no
    n=$(lab_namespaces | grep -c . || true)
    if [[ -e /run/tunbench/$LAB/state.json ]]; then
        rec=yes
        for p in $(jq -r '.processes[].id.pid' "/run/tunbench/$LAB/state.json" 2>/dev/null); do
            total=$((total + 1))
            kill -0 "$p" 2>/dev/null && alive=$((alive + 1))
        done
    elif [[ -e /run/tunbench/$LAB ]]; then
        rec="dir, no state.json"
    fi
    echo "$n ns, record $rec, $alive/$total datapaths alive"
}

# Pids alive now (a process alive before a trial is never counted as its leftover).
pids_now() { ls /proc | grep -E '^[0-9]+$' | tr '\n' ' '; }

# pid<TAB>why<TAB>command line of every process of the lab. $1: namespace inodes,
# $2: pids alive before the trial.
NAME_RE=
lab_processes() {
    local inodes=" $1 " before=" $2 " d pid ino cmd comm why
    for d in /proc/[0-9]*; do
        pid=${d#/proc/}
        [[ $before == *" $pid "* || $pid == "$$" || $pid == "$BASHPID" ]] && continue
        cmd=$(tr '\0' ' ' 2>/dev/null <"$d/cmdline") || continue
        [[ -z $cmd ]] && continue # a kernel thread, or already a zombie
        comm=$(cat 2>/dev/null <"$d/comm") || continue
        why=
        if [[ $cmd =~ $NAME_RE ]]; then
            why="names the lab"
        else
            ino=$(stat -L -c %i "$d/ns/net" 2>/dev/null) || continue
            if [[ $inodes == *" $ino "* ]] &&
                [[ $comm =~ ^(tunbench|iperf3|charon|wireguard-go|boringtun.*|nft|ip|swanctl)$ ]]; then
                why="in a namespace of the lab"
            fi
        fi
        [[ -n $why ]] && printf '%s\t%s\t%s\n' "$pid" "$why" "$cmd"
    done
    return 0
}
re_escape() { sed 's/[][\.*^$+?(){}|/]/\\&/g' <<<"$1"; }
LAB_RE=$(re_escape "$LAB")
NAME_RE="(^| )--lab[ =]$LAB_RE( |\$)|(^|[ /=])$LAB_RE-[A-Za-z0-9]|tunbench/$LAB_RE(/| |\$)"

lab_mounts() { grep -E " /run/netns/$LAB_RE-| /run/tunbench/$LAB_RE(/| )" /proc/mounts || true; }

# Checks for leftovers; sets LEFT (one line, empty when clean) and writes the detail
# to $1. $2: namespace inodes, $3: pids before.
LEFT=
check_left() {
    local detail=$1 ns procs mounts parts=()
    ns=$(lab_namespaces)
    procs=$(lab_processes "$2" "$3")
    mounts=$(lab_mounts)
    : >"$detail"
    if [[ -n $ns ]]; then
        parts+=("namespaces: $(echo $ns)")
        { echo "## namespaces"; echo "$ns"; } >>"$detail"
    fi
    if [[ -n $procs ]]; then
        parts+=("processes: $(awk -F'\t' '{printf "%s%s (%s, %s)", (NR > 1 ? "; " : ""), $1, substr($3, 1, 60), $2}' <<<"$procs")")
        { echo "## processes"; echo "$procs"; } >>"$detail"
    fi
    if [[ -n $mounts ]]; then
        parts+=("mounts: $(awk '{printf "%s%s", (NR > 1 ? " " : ""), $2}' <<<"$mounts")")
        { echo "## mounts"; echo "$mounts"; } >>"$detail"
    fi
    if [[ -e /run/tunbench/$LAB ]]; then
        parts+=("state: /run/tunbench/$LAB ($(ls -A "/run/tunbench/$LAB" | tr '\n' ' ' | sed 's/ $//'))")
        { echo "## state"; ls -la "/run/tunbench/$LAB"; } >>"$detail"
    fi
    LEFT=$(printf '%s; ' "${parts[@]}")
    LEFT=${LEFT%; }
    [[ ${#parts[@]} -eq 0 ]] && LEFT=
    return 0
}

# Removes what the lab left (its own objects only) so the next trial starts clean.
force_remove() {
    local detail=$1 pid ns m
    for pid in $(awk -F'\t' '/^## processes/ {p = 1; next} /^## / {p = 0} p {print $1}' "$detail"); do
        kill -9 "$pid" 2>/dev/null || true
    done
    for m in $(lab_mounts | awk '{print $2}' | sort -r); do umount -l "$m" 2>/dev/null || true; done
    for ns in $(lab_namespaces); do ip netns del "$ns" 2>/dev/null || rm -f "/run/netns/$ns"; done
    rm -rf "/run/tunbench/$LAB"
    local again
    sleep 0.5
    check_left "$detail.after-removal" "$2" "$3"
    again=$LEFT
    [[ -z $again ]] || die "could not remove what lab $LAB left ($again); stopping"
}

# --- one trial's bookkeeping
FAILED=0
TRIAL=0
ROWS=()
# clean_and_check KIND DELAY COMMAND RC SECS REPORT BEFORE_PIDS
clean_and_check() {
    local kind=$1 delay=$2 what=$3 rc=$4 secs=$5 report=$6 before=$7 inodes t0 crc=0 csecs verdict found
    inodes=$(lab_inodes)
    found=$(lab_found)
    t0=$(now)
    timeout 120 "$TB" clean "$LAB" >"$OUT/logs/trial-$TRIAL.clean.log" 2>&1 || crc=$?
    csecs=$(since "$t0")
    sleep 0.3 # let killed processes be reaped
    check_left "$OUT/logs/trial-$TRIAL.leftovers.txt" "$inodes" "$before"
    if [[ -n $LEFT ]]; then
        verdict=FAIL
        FAILED=$((FAILED + 1))
        echo "$BENCH: trial $TRIAL ($kind): left behind: $LEFT" >&2
        local left=$LEFT
        force_remove "$OUT/logs/trial-$TRIAL.leftovers.txt" "$inodes" "$before"
        LEFT=$left
    else
        verdict=ok
        rm -f "$OUT/logs/trial-$TRIAL.leftovers.txt"
    fi
    ((crc == 0)) || { [[ $verdict == ok ]] && verdict="ok (clean exit $crc)"; }
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$TRIAL" "$kind" "$delay" "$what" "$rc" "$secs" \
        "$report" "$found" "$crc" "$csecs" "${LEFT:-none}" "$verdict" >>"$TSV"
    ROWS+=("| $TRIAL | $kind | $delay | $what | $report | $found | $crc, $csecs s | ${LEFT:-none} | $verdict |")
    echo "$BENCH: trial $TRIAL: $kind $delay: $report; clean $crc in $csecs s; leftovers: ${LEFT:-none}: $verdict" >&2
}

# One line from a command's output: its last non-empty line, without table bars.
last_line() { { grep -v '^[[:space:]]*$' "$1" || true; } | tail -n 1 | tr '|\t' '  ' | cut -c1-160; }

UP_TIMES=()
BUILD_TIMES=()
# A normal up, watched: besides its wall time, when the last datapath's log file
# appeared (the datapaths are started last, once the namespaces are built; up
# then waits for each datapath's first stats file).
calibration_trial() {
    TRIAL=$((TRIAL + 1))
    local before t0 rc=0 secs logs n=0 built=
    before=$(pids_now)
    t0=$(now)
    "$TB" up "$TOPO" --scenario "$SCENARIO" --name "$LAB" >"$OUT/logs/trial-$TRIAL.up.log" 2>&1 &
    BG=$!
    while kill -0 "$BG" 2>/dev/null; do
        logs=("/run/tunbench/$LAB/logs/"*.log)
        [[ -e ${logs[0]} ]] && ((${#logs[@]} > n)) && { n=${#logs[@]}; built=$(since "$t0"); }
        sleep 0.002
    done
    wait "$BG" || rc=$?
    BG=
    secs=$(since "$t0")
    ((rc == 0)) || { cat "$OUT/logs/trial-$TRIAL.up.log" >&2; die "a normal up of $TOPO failed (exit $rc)"; }
    [[ -n $built ]] || die "a normal up of $TOPO started no datapath (no log under /run/tunbench/$LAB/logs)"
    UP_TIMES+=("$secs")
    BUILD_TIMES+=("$built")
    clean_and_check "normal up" "-" "up ran to the end" "$rc" "$secs" \
        "up exit 0 in $secs s, last datapath started at $built s" "$before"
}

# The check's own check: with the lab up, two planted processes (one naming the
# lab outside its namespaces, an iperf3 server inside one of them) must both be
# found, or the script stops: a check that finds nothing proves nothing. Then
# `clean LAB` must stop the one inside the namespace (clean stops every process
# in a lab's namespaces, recorded or not), while the other, which clean cannot
# know about, is still found.
planted_trial() {
    TRIAL=$((TRIAL + 1))
    local before p1 p2 t0 crc=0 csecs inodes
    before=$(pids_now)
    "$TB" up "$TOPO" --scenario "$SCENARIO" --name "$LAB" >"$OUT/logs/trial-$TRIAL.up.log" 2>&1 ||
        { cat "$OUT/logs/trial-$TRIAL.up.log" >&2; die "up of $TOPO failed"; }
    (exec -a "planted-by-faults.sh --lab $LAB" sleep 600) >/dev/null 2>&1 9>&- &
    p1=$!
    ip netns exec "$LAB-$TO" iperf3 -s -p 5999 >/dev/null 2>&1 9>&- &
    p2=$!
    PLANTED="$p1 $p2"
    sleep 0.3
    inodes=$(lab_inodes)
    check_left "$OUT/logs/trial-$TRIAL.planted.txt" "$inodes" "$before"
    local found=$LEFT
    [[ $found == *"$p1 (planted-by-faults.sh"* && $found == *"$p2 (iperf3 -s -p 5999"* ]] ||
        die "the leftover check missed planted processes $p1 and $p2 (it found: ${found:-nothing})"
    t0=$(now)
    "$TB" clean "$LAB" >"$OUT/logs/trial-$TRIAL.clean.log" 2>&1 || crc=$?
    csecs=$(since "$t0")
    check_left "$OUT/logs/trial-$TRIAL.leftovers.txt" "$inodes" "$before"
    local after=$LEFT
    kill -9 "$p1" "$p2" 2>/dev/null || true
    wait "$p1" "$p2" 2>/dev/null || true
    PLANTED=
    [[ $after == *"$p1 (planted-by-faults.sh"* ]] ||
        die "after clean, the check no longer finds planted process $p1 outside the lab (it found: ${after:-nothing})"
    [[ $after != *"$p2 (iperf3"* ]] ||
        die "clean $LAB left the unrecorded iperf3 server $p2 running inside the lab's namespace"
    check_left "$OUT/logs/trial-$TRIAL.after.txt" "$inodes" "$before"
    [[ -z $LEFT ]] || die "after removing the planted processes, lab $LAB still left: $LEFT"
    rm -f "$OUT/logs/trial-$TRIAL.after.txt"
    printf '%s\t%s\t-\t%s\t0\t-\t%s\t-\t%s\t%s\t%s\t%s\n' "$TRIAL" "self-check" "plant 2 processes" \
        "found both; clean stopped the one in the namespace" "$crc" "$csecs" "$after" "ok" >>"$TSV"
    ROWS+=("| $TRIAL | self-check | - | plant 2 processes (one naming the lab, one unrecorded in its namespace) | the check found both; clean stopped the one in the namespace | - | $crc, $csecs s | $after | ok |")
    echo "$BENCH: trial $TRIAL: self-check: both planted processes found; clean stopped the one in the namespace" >&2
}

up_kill_trial() { # delay
    TRIAL=$((TRIAL + 1))
    local delay=$1 before t0 rc=0 secs state report
    before=$(pids_now)
    t0=$(now)
    "$TB" up "$TOPO" --scenario "$SCENARIO" --name "$LAB" >"$OUT/logs/trial-$TRIAL.up.log" 2>&1 &
    BG=$!
    sleep "$delay"
    if kill -9 "$BG" 2>/dev/null; then state="killed at $(since "$t0") s"; else state="up had ended"; fi
    wait "$BG" 2>/dev/null || rc=$?
    BG=
    secs=$(since "$t0")
    if [[ $state == killed* ]] && ((rc == 137)); then
        report="SIGKILL $state (phase: $(last_line "$OUT/logs/trial-$TRIAL.up.log" | cut -c1-60))"
        [[ -s $OUT/logs/trial-$TRIAL.up.log ]] || report="SIGKILL $state"
    else
        report="up exit $rc after $secs s, before the kill"
    fi
    clean_and_check "kill up" "$delay" "SIGKILL tunbench up" "$rc" "$secs" "$report" "$before"
}

# The lab's datapath processes: pid<TAB>what, from its record.
datapaths() { jq -r '.processes[] | "\(.id.pid)\t\(.what)"' "/run/tunbench/$LAB/state.json"; }

datapath_kill_trial() { # index
    TRIAL=$((TRIAL + 1))
    local i=$1 before rc=0 t0 secs dir victim vpid vwhat report named log n
    before=$(pids_now)
    "$TB" up "$TOPO" --scenario "$SCENARIO" --name "$LAB" >"$OUT/logs/trial-$TRIAL.up.log" 2>&1 ||
        { cat "$OUT/logs/trial-$TRIAL.up.log" >&2; die "up of $TOPO failed"; }
    mapfile -t dps < <(datapaths)
    n=${#dps[@]}
    ((n > 0)) || die "lab $LAB has no datapath process in its record"
    victim=${dps[$((i % n))]}
    vpid=${victim%%$'\t'*}
    vwhat=${victim#*$'\t'}
    dir=sender
    ((i / n % 2)) && dir=receiver
    log=$OUT/logs/trial-$TRIAL.measure.log
    t0=$(now)
    "$TB" measure "$LAB" --from "$FROM" --to "$TO" --to-addr "$ADDR" --families ipv4 --protocols tcp \
        --directions "$dir" --runs 1 --duration 8 >"$log" 2>&1 &
    BG=$!
    sleep 3
    kill -9 "$vpid" 2>/dev/null || echo "$BENCH: trial $TRIAL: $vwhat (pid $vpid) was already gone" >&2
    # A measure that never returns is a finding too; it is stopped after 90 s.
    local waited=0
    while kill -0 "$BG" 2>/dev/null && ((waited < 900)); do sleep 0.1; waited=$((waited + 1)); done
    if kill -0 "$BG" 2>/dev/null; then
        kill -9 "$BG" 2>/dev/null || true
        wait "$BG" 2>/dev/null || true
        rc=hung
    else
        wait "$BG" 2>/dev/null || rc=$?
    fi
    BG=
    secs=$(since "$t0")
    # Does measure's output name the process that died (its node or "datapath")?
    local node=${vwhat##* on }
    node=${node##*router }
    named=no
    grep -Eiq "datapath|slow path" "$log" && grep -qi -- "$node" "$log" && named=yes
    # What it said about the cell: its footnote or error, else its last line.
    local says
    says=$({ grep -m1 -E '^\[[0-9]+\] |[Ee]rror' "$log" || true; } | tr '|\t' '  ' | cut -c1-160)
    [[ -n $says ]] || says=$(last_line "$log")
    report="$dir: measure exit $rc after $secs s; names the dead datapath: $named; says: $says"
    clean_and_check "kill datapath" "3.0" "SIGKILL $vwhat (pid $vpid)" "$rc" "$secs" "$report" "$before"
}

# --- the trials
rev=$(git describe --always --dirty 2>/dev/null || echo unknown)
full=$(git rev-parse HEAD 2>/dev/null || echo unknown)
started=$(date -u +%FT%TZ)
echo "$BENCH: lab $LAB, $TOPO (scenario $SCENARIO), seed $SEED, output in $OUT" >&2

planted_trial
for ((k = 0; k < CALIBRATE; k++)); do calibration_trial; done
T=$(printf '%s\n' "${UP_TIMES[@]}" | sort -g | tail -n 1)

# Stratified delays over two stretches of a normal up: 3/4 of the kills while it
# builds (from its start to 1.5 x the latest moment the last datapath started, B)
# and 1/4 while it waits for the datapaths' first stats (B to the longest up, T):
# one uniform draw in each stratum, the strata visited in a shuffled order.
B=$(printf '%s\n' "${BUILD_TIMES[@]}" | sort -g | tail -n 1)
B=$(awk -v b="$B" -v t="$T" 'BEGIN {b *= 1.5; printf "%.3f", b < t ? b : t}')
N1=$(((3 * TRIALS + 3) / 4))
N2=$((TRIALS - N1))
RANDOM=$SEED
order=()
for ((i = 0; i < TRIALS; i++)); do order+=("$i"); done
for ((i = TRIALS - 1; i > 0; i--)); do
    j=$((RANDOM % (i + 1)))
    tmp=${order[i]}; order[i]=${order[j]}; order[j]=$tmp
done
for i in "${order[@]}"; do
    delay=$(awk -v b="$B" -v t="$T" -v i="$i" -v n1="$N1" -v n2="$N2" -v u="$RANDOM" 'BEGIN {
        if (i < n1) d = b * (i + u / 32768) / n1; else d = b + (t - b) * (i - n1 + u / 32768) / n2
        printf "%.3f", d }')
    up_kill_trial "$delay"
done
for ((i = 0; i < DP_TRIALS; i++)); do datapath_kill_trial "$i"; done

# --- the report
{
    echo "# Fault trials: tunbench killed at bad moments"
    echo
    echo "- when: $started to $(date -u +%FT%TZ); tunbench at $rev ($full)"
    echo "- machine: $(nproc) CPUs, Linux $(uname -r), load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- lab $LAB from $TOPO, scenario $SCENARIO; seed $SEED"
    echo "- a normal up took $(printf '%s ' "${UP_TIMES[@]}")s (T = $T s); its last datapath started at"
    echo "  $(printf '%s ' "${BUILD_TIMES[@]}")s (B = 1.5 x the latest = $B s); $TRIALS kills of up: $N1 spread over [0, B]"
    echo "  (building), $N2 over [B, T] (waiting for the datapaths), stratified"
    echo "- $DP_TRIALS datapath kills: measure $FROM -> $TO ($ADDR, IPv4 TCP, 8 s), SIGKILL 3 s in"
    echo "- after each trial: \`tunbench clean $LAB\`, then no namespace $LAB-*, no process naming the lab or in its"
    echo "  namespaces, no mount under /run/netns/$LAB-* or /run/tunbench/$LAB, no /run/tunbench/$LAB may be left"
    echo
    echo "| trial | kind | delay (s) | fault | what the killed command (or measure) reported | there before clean | clean: exit, time | left behind | verdict |"
    echo "|---|---|---|---|---|---|---|---|---|"
    printf '%s\n' "${ROWS[@]}"
    echo
    if ((FAILED)); then
        echo "**FAIL: $FAILED of $((TRIAL - 1)) trials left something behind** (details in logs/trial-N.leftovers.txt)."
    else
        echo "**ok: none of $((TRIAL - 1)) trials (after the self-check) left anything behind.**"
    fi
    if ((DP_TRIALS)); then
        named=$(awk -F'\t' '$2 == "kill datapath" && $7 ~ /names the dead datapath: yes/' "$TSV" | wc -l)
        echo "Datapath kills whose measure named the dead datapath: $named of $DP_TRIALS."
    fi
} >"$MD"
cat "$MD"
((FAILED == 0)) || exit 1
