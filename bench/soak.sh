#!/usr/bin/env bash
# Soak (not a timed benchmark): does each userspace datapath hold its memory,
# file descriptors and counters steady under minutes of full-rate traffic, and
# does the control plane keep answering meanwhile?
#
#   sudo bench/soak.sh [--minutes M] [--kinds LIST] [--parallel] [--lab-prefix P]
#                      [--warmup S] [--interval S] [--out DIR]
#
# Kinds (default: all five, one lab each, named PREFIX+kind; prefix "fas"):
#   dslite      topologies/dslite.toml, scenario userspace (B4 + AFTR), client -> server 198.18.52.10
#   wireguard   topologies/wireguard.toml, scenario tunbench (a + b), a -> b 198.18.71.2
#   esp         topologies/vpn.toml, scenario esp (a + b), a -> b 198.18.73.2
#   l2tp-ipsec  topologies/vpn.toml, scenario l2tp-ipsec (a + b), a -> b 198.18.73.2
#   router      topologies/router-datapaths.toml, scenario normal (r1's slow path), client -> server 198.18.71.2
# For each: `tunbench up`, then tunbench's own server and client
# (`tunbench exec LAB NODE -- tunbench server|client`, TCP, one stream, -t M
# minutes) through the datapaths. Every --interval seconds (default 10) it samples
# each datapath process: VmRSS (/proc/PID/status), open fds (/proc/PID/fd) and its
# stats file (/run/tunbench/LAB/datapath-*.json: packets, drops by reason, driver
# errors), and times two control-plane calls with a 10 s timeout: `tunbench
# status LAB` and `tunbench impair LAB NODE:IFACE --clear` (a rate change on a
# link end of the path; --clear leaves the link as it was built).
# Verdict per kind, ok when all of:
#   - RSS and fds grew < 5 % from the first sample after --warmup (default 30 s)
#     to the last (an RSS within 256 KiB counts as steady: page granularity);
#   - no datapath process died, and the client ran to the end;
#   - no drops after the warm-up but queue_full, too_big, lost and link_scope
#     (load, path MTU discovery, configured loss, and the router solicitations
#     and MLD reports the kernel itself sends on the lab's TUNs explain those);
#     no driver errors after the warm-up but tun_write and net_send refusals
#     (buffers full under load);
#   - every control-plane call answered (exit 0) within the timeout.
# --parallel runs all kinds at once (shorter in total; the kinds then share the
# CPUs, which the table says).
#
# Output: DIR (default results/soak-UTCTIME/) holds soak.md (the commit,
# machine, settings and the table), samples.tsv (every sample), control.tsv
# (every control-plane call), settings and logs/. soak.md is also printed. Exit 1
# when a kind's verdict is not ok. `--report DIR` renders soak.md again from a
# run's data without running anything (the verdict rules applied anew).
#
# Environment: CARGO_TARGET_DIR, PORT (the server's port in the lab, default 5201).
#
# Figures, method and history: docs/benchmarks/faults-soak.md (index: BENCHMARKS.md).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh --build --tests
BENCH=soak
. bench/common.sh

MINUTES=10
KINDS=dslite,wireguard,esp,l2tp-ipsec,router
PARALLEL=0
PREFIX=fas
WARMUP=30
INTERVAL=10
OUT=
REPORT=
PORT=${PORT:-5201}
while [[ $# -gt 0 ]]; do
    case $1 in
        --minutes) MINUTES=${2-}; shift 2 ;;
        --kinds) KINDS=${2-}; shift 2 ;;
        --parallel) PARALLEL=1; shift ;;
        --lab-prefix) PREFIX=${2-}; shift 2 ;;
        --warmup) WARMUP=${2-}; shift 2 ;;
        --interval) INTERVAL=${2-}; shift 2 ;;
        --out) OUT=${2-}; shift 2 ;;
        --report) REPORT=${2-}; shift 2 ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done
num --minutes "$MINUTES"
num --interval "$INTERVAL"
num PORT "$PORT"
[[ $WARMUP =~ ^[0-9]+$ ]] || die "--warmup must be a whole number of seconds (got '$WARMUP')"
((WARMUP + INTERVAL <= MINUTES * 60)) ||
    die "--warmup $WARMUP s leaves no sample after it in $MINUTES minute(s) at --interval $INTERVAL"
[[ $PREFIX =~ ^[A-Za-z0-9][A-Za-z0-9_]{0,15}$ ]] ||
    die "--lab-prefix must be 1-16 letters, digits or _ starting with a letter or digit (got '$PREFIX')"
for c in ip python3 timeout ss; do command -v "$c" >/dev/null || die "$c is missing"; done

# render DIR: soak.md from DIR's settings, samples.tsv and control.tsv; exits
# with the verdict (1 when a kind is not ok). The body keeps column 0 for the
# Python heredoc.
render() {
local OUT=$1
. "$OUT/settings"
set +e
python3 - "$OUT" "$MINUTES" "$WARMUP" "$MODE" "$KINDS" >"$OUT/table.md" <<'PY'
import csv, json, os, sys
out, minutes, warmup, mode, kinds = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5].split(",")
EXPLAINED_DROPS = {"queue_full", "too_big", "lost", "link_scope"}
EXPLAINED_ERRORS = {"tun_write", "net_send"}
samples = list(csv.DictReader(open(f"{out}/samples.tsv"), delimiter="\t"))
control = list(csv.DictReader(open(f"{out}/control.tsv"), delimiter="\t"))

def mb(kb): return f"{int(kb) / 1024:.1f}"
def nonzero(d): return ", ".join(f"{k} {v}" for k, v in sorted(d.items()) if v) or "none"
def grew(a, b): return {k: b.get(k, 0) - a.get(k, 0) for k in b if b.get(k, 0) - a.get(k, 0) > 0}

print(f"| kind | datapath | minutes | throughput (mean) | RSS MB first/last/max (growth) | fds first/last | "
      f"drops at start -> end (after warm-up) | control plane ok/total, max ms | verdict |")
print("|---|---|---|---|---|---|---|---|---|")
failed = 0
for kind in kinds:
    why = []
    if os.path.exists(f"{out}/error-{kind}.txt"):
        print(f"| {kind} | - | {minutes} | - | - | - | - | - | FAIL: {open(f'{out}/error-{kind}.txt').read().strip()} |")
        failed += 1
        continue
    tput = "failed"
    try:
        c = json.load(open(f"{out}/client-{kind}.json"))
        if "error" in c:
            why.append(f"client: {c['error']}")
        else:
            tput = f"{c['end']['sum_received']['bits_per_second'] / 1e6:.0f} Mbit/s"
    except (OSError, ValueError, KeyError) as e:
        why.append(f"client output unreadable ({type(e).__name__})")
    rc = open(f"{out}/client-{kind}.rc").read().strip() if os.path.exists(f"{out}/client-{kind}.rc") else "?"
    if rc != "0":
        why.append(f"client exit {rc}")
    calls = [r for r in control if r["kind"] == kind]
    ok = [r for r in calls if r["exit"] == "0"]
    maxms = max((int(r["ms"]) for r in calls), default=0)
    bad = sorted({f"{r['call']} exit {r['exit']}" for r in calls if r["exit"] != "0"})
    if len(ok) != len(calls) or not calls:
        why.append("control plane: " + (", ".join(bad) or "no calls"))
    ctl = f"{len(ok)}/{len(calls)}, {maxms}"
    rows = [r for r in samples if r["kind"] == kind]
    pids = list(dict.fromkeys(r["pid"] for r in rows))
    if not pids:
        why.append("no datapath sampled")
    lines = []
    for pid in pids:
        s = [r for r in rows if r["pid"] == pid]
        what = s[0]["what"]
        live = [r for r in s if r["alive"] == "1"]
        if len(live) != len(s):
            dead = next(r for r in s if r["alive"] != "1")
            why.append(f"{what} died (gone at {dead['t_s']} s)")
        after = [r for r in live if int(r["t_s"]) >= warmup]
        if len(after) < 2:
            why.append(f"{what}: fewer than 2 samples after the warm-up")
            lines.append((what, "-", "-", "-"))
            continue
        a, b = after[0], after[-1]
        r0, r1, rmax = int(a["rss_kb"]), int(b["rss_kb"]), max(int(r["rss_kb"]) for r in live)
        f0, f1 = int(a["fds"]), int(b["fds"])
        rg = (r1 - r0) * 100 / r0
        fg = (f1 - f0) * 100 / f0
        if rg >= 5 and r1 - r0 > 256:
            why.append(f"{what}: RSS +{rg:.1f} %")
        if fg >= 5:
            why.append(f"{what}: fds +{fg:.1f} %")
        d0, d1 = json.loads(a["drops"]), json.loads(b["drops"])
        e0, e1 = json.loads(a["errors"]), json.loads(b["errors"])
        ud = {k: v for k, v in grew(d0, d1).items() if k not in EXPLAINED_DROPS}
        ue = {k: v for k, v in grew(e0, e1).items() if k not in EXPLAINED_ERRORS}
        if ud:
            why.append(f"{what}: drops after warm-up: {nonzero(ud)}")
        if ue:
            why.append(f"{what}: driver errors after warm-up: {nonzero(ue)}")
        first = json.loads(s[0]["drops"])
        errs = grew({}, e1)
        drops = f"{nonzero(first)} -> {nonzero(d1)} (+{sum(grew(d0, d1).values())})"
        if errs:
            drops += f"; errors {nonzero(errs)}"
        lines.append((what, f"{mb(r0)}/{mb(r1)}/{mb(rmax)} ({rg:+.1f} %)", f"{f0}/{f1}", drops))
    verdict = "ok" if not why else "FAIL: " + "; ".join(why)
    failed += bool(why)
    for i, (what, rss, fds, drops) in enumerate(lines or [("-", "-", "-", "-")]):
        print(f"| {kind} | {what} | {minutes} | {tput} | {rss} | {fds} | {drops} | {ctl} | {verdict if i == 0 else '〃'} |")
print()
print(f"Mode: {mode}. Growth is from the first sample at or after {warmup} s to the last; drops are the "
      f"datapath's counters at the first sample and the last, (+N) counted after the warm-up; "
      f"queue_full, too_big and lost are explained by load, path MTU discovery and configured loss, "
      f"link_scope by the router solicitations and MLD reports the kernel sends on the lab's TUNs.")
sys.exit(1 if failed else 0)
PY
local status=$?
set -e
{
    echo "# Soak: userspace datapaths under full-rate TCP"
    echo
    echo "- when: $started to $ended; tunbench at $rev ($full)"
    echo "- machine: $MACHINE, load average at the end $LOAD"
    echo "- $MINUTES minute(s) per kind, $MODE; tunbench client -> server, TCP, 1 stream, -t $SECS;"
    echo "  samples every $INTERVAL s, warm-up $WARMUP s; control plane: \`tunbench status LAB\` and"
    echo "  \`tunbench impair LAB END --clear\` per sample, 10 s timeout each"
    echo
    cat "$OUT/table.md"
} >"$OUT/soak.md"
rm -f "$OUT/table.md"
cat "$OUT/soak.md"
exit "$status"
}

# kind -> TOPO SCENARIO FROM TO ADDR END (the link end `impair` changes)
kind_conf() {
    case $1 in
        dslite) TOPO=topologies/dslite.toml SCENARIO=userspace FROM=client TO=server ADDR=198.18.52.10 END=client:eth0 ;;
        wireguard) TOPO=topologies/wireguard.toml SCENARIO=tunbench FROM=a TO=b ADDR=198.18.71.2 END=a:eth0 ;;
        esp) TOPO=topologies/vpn.toml SCENARIO=esp FROM=a TO=b ADDR=198.18.73.2 END=a:eth0 ;;
        l2tp-ipsec) TOPO=topologies/vpn.toml SCENARIO=l2tp-ipsec FROM=a TO=b ADDR=198.18.73.2 END=a:eth0 ;;
        router) TOPO=topologies/router-datapaths.toml SCENARIO=normal FROM=client TO=server ADDR=198.18.71.2 END=client:eth0 ;;
        *) return 1 ;;
    esac
}
IFS=, read -r -a KLIST <<<"$KINDS"
((${#KLIST[@]} > 0)) || die "--kinds is empty"
for k in "${KLIST[@]}"; do
    kind_conf "$k" || die "unknown kind '$k' in --kinds (known: dslite, wireguard, esp, l2tp-ipsec, router)"
done
lab_of() { echo "$PREFIX${1//-/}"; }

if [[ -n $REPORT ]]; then
    [[ -f $REPORT/settings && -f $REPORT/samples.tsv && -f $REPORT/control.tsv ]] ||
        die "--report $REPORT: not the output directory of a soak run (no settings, samples.tsv, control.tsv)"
    render "$REPORT"
fi

build_tunbench

exec 9>"/run/lock/tunbench-bench-soak-$PREFIX.lock"
flock -n 9 || die "another soak with prefix $PREFIX is running (/run/lock/tunbench-bench-soak-$PREFIX.lock)"
for k in "${KLIST[@]}"; do
    lab=$(lab_of "$k")
    if [[ -e /run/tunbench/$lab ]] || ip netns list | awk '{print $1}' | grep -q "^$lab-"; then
        die "lab $lab already exists: take it down with 'tunbench down $lab' or pick another --lab-prefix"
    fi
done

OUT=${OUT:-results/soak-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT/logs"
SECS=$((MINUTES * 60))
HZ=$(getconf CLK_TCK)

cleanup() {
    local rc=$? k
    trap - EXIT INT TERM
    # Our background jobs (kinds, then their servers and clients: `tunbench exec`
    # execs them, so these pids are theirs), then the labs.
    for p in $(jobs -p) $(cat "$OUT"/logs/*.pids 2>/dev/null); do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    for k in "${KLIST[@]}"; do "$TB" down "$(lab_of "$k")" >/dev/null 2>&1 || true; done
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ms_since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.0f", (b - a) * 1000}'; }

# One line per datapath process of LAB: pid, what, alive, rss_kb, fds, packets,
# drops (JSON), errors (JSON), cpu ticks.
sample_datapaths() {
    python3 - "$1" <<'PY'
import glob, json, os, sys
lab = sys.argv[1]
state = json.load(open(f"/run/tunbench/{lab}/state.json"))
stats = {}
for f in glob.glob(f"/run/tunbench/{lab}/datapath-*.json"):
    try:
        d = json.load(open(f))
        stats[d.get("pid")] = d
    except (OSError, ValueError):
        pass  # being rewritten: the next sample has it
for p in state.get("processes", []):
    pid = p["id"]["pid"]
    alive, rss, fds, ticks = 0, -1, -1, -1
    try:
        with open(f"/proc/{pid}/stat") as s:
            f = s.read().rsplit(")", 1)[1].split()
        if int(f[19]) == p["id"]["start_time"] and f[0] != "Z":
            alive = 1
            ticks = int(f[11]) + int(f[12])
            for line in open(f"/proc/{pid}/status"):
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
            fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, ValueError, IndexError):
        pass
    d = stats.get(pid, {})
    pk = sum(d.get(k, {}).get("packets", 0) for k in ("tun_rx", "net_rx"))
    drops = {k: v for k, v in d.get("drops", {}).items()}
    errors = {k: v for k, v in d.get("errors", {}).items()}
    print("\t".join(map(str, [pid, p["what"], alive, rss, fds, pk,
                              json.dumps(drops, separators=(",", ":")),
                              json.dumps(errors, separators=(",", ":")), ticks])))
PY
}

# ctl KIND T NAME CMD...: runs a control-plane call with a 10 s timeout, logs it.
ctl() {
    local kind=$1 t=$2 name=$3 t0 rc=0 ms
    shift 3
    t0=$(now)
    timeout 10 "$@" >>"$OUT/logs/$kind.control.log" 2>&1 || rc=$?
    ms=$(ms_since "$t0")
    printf '%s\t%s\t%s\t%s\t%s\n' "$kind" "$t" "$name" "$rc" "$ms" >>"$OUT/control-$kind.tsv"
}

# soak_kind KIND: one lab, one long TCP stream, samples; writes
# $OUT/samples-KIND.tsv, $OUT/control-KIND.tsv, $OUT/client-KIND.json.
soak_kind() {
    local kind=$1 lab TOPO SCENARIO FROM TO ADDR END spid cpid i t t0 next
    kind_conf "$kind"
    lab=$(lab_of "$kind")
    : >"$OUT/samples-$kind.tsv"
    : >"$OUT/control-$kind.tsv"
    echo "$BENCH: $kind: up $TOPO --scenario $SCENARIO as $lab" >&2
    if ! "$TB" up "$TOPO" --scenario "$SCENARIO" --name "$lab" >"$OUT/logs/$kind.up.log" 2>&1; then
        echo "$BENCH: $kind: up failed:" >&2
        cat "$OUT/logs/$kind.up.log" >&2
        echo "up failed" >"$OUT/error-$kind.txt"
        return 0
    fi
    "$TB" exec "$lab" "$TO" -- "$TB" server -p "$PORT" -1 >"$OUT/logs/$kind.server.log" 2>&1 &
    spid=$!
    echo "$spid" >"$OUT/logs/$kind.pids"
    for ((i = 0; i < 250; i++)); do
        [[ -n $(ip netns exec "$lab-$TO" ss -Hltn "sport = :$PORT" 2>/dev/null) ]] && break
        sleep 0.02
    done
    t0=$(now)
    "$TB" exec "$lab" "$FROM" -- "$TB" client "$ADDR" -p "$PORT" -t "$SECS" -J \
        >"$OUT/client-$kind.json" 2>"$OUT/logs/$kind.client.err" &
    cpid=$!
    echo "$cpid" >>"$OUT/logs/$kind.pids"
    next=0
    while :; do
        t=$(awk -v a="$t0" -v b="$(now)" 'BEGIN {printf "%.0f", b - a}')
        if ((t >= next)); then
            sample_datapaths "$lab" | sed "s/^/$kind\t$t\t/" >>"$OUT/samples-$kind.tsv" || true
            ctl "$kind" "$t" status "$TB" status "$lab"
            ctl "$kind" "$t" impair "$TB" impair "$lab" "$END" --clear
            next=$((next + INTERVAL))
        fi
        kill -0 "$cpid" 2>/dev/null || break
        ((t <= SECS + 60)) || { echo "$BENCH: $kind: the client ran 60 s past -t; stopping it" >&2; kill "$cpid" 2>/dev/null || true; }
        sleep 0.5
    done
    local crc=0
    wait "$cpid" || crc=$?
    echo "$crc" >"$OUT/client-$kind.rc"
    # The last sample, when the client's last second was not one.
    t=$(awk -v a="$t0" -v b="$(now)" 'BEGIN {printf "%.0f", b - a}')
    if ((t > next - INTERVAL + 2)); then
        sample_datapaths "$lab" | sed "s/^/$kind\t$t\t/" >>"$OUT/samples-$kind.tsv" || true
    fi
    kill "$spid" 2>/dev/null || true
    wait "$spid" 2>/dev/null || true
    rm -f "$OUT/logs/$kind.pids"
    "$TB" down "$lab" >"$OUT/logs/$kind.down.log" 2>&1 || echo "$BENCH: $kind: down $lab failed" >&2
    echo "$BENCH: $kind: done (client exit $crc)" >&2
}

rev=$(git describe --always --dirty 2>/dev/null || echo unknown)
full=$(git rev-parse HEAD 2>/dev/null || echo unknown)
started=$(date -u +%FT%TZ)
echo "$BENCH: ${KLIST[*]}, $MINUTES min each$( ((PARALLEL)) && echo ', in parallel'), output in $OUT" >&2
if ((PARALLEL)); then
    pids=()
    for k in "${KLIST[@]}"; do soak_kind "$k" & pids+=($!); done
    for p in "${pids[@]}"; do wait "$p" || true; done
else
    for k in "${KLIST[@]}"; do soak_kind "$k"; done
fi

{
    printf 'kind\tt_s\tpid\twhat\talive\trss_kb\tfds\tpackets\tdrops\terrors\tcpu_ticks\n'
    for k in "${KLIST[@]}"; do cat "$OUT/samples-$k.tsv"; done
} >"$OUT/samples.tsv"
{
    printf 'kind\tt_s\tcall\texit\tms\n'
    for k in "${KLIST[@]}"; do cat "$OUT/control-$k.tsv"; done
} >"$OUT/control.tsv"
for k in "${KLIST[@]}"; do rm -f "$OUT/samples-$k.tsv" "$OUT/control-$k.tsv"; done

MODE=sequential
((PARALLEL)) && MODE="parallel (all kinds at once, sharing $(nproc) CPUs)"
ended=$(date -u +%FT%TZ)
declare -p MINUTES WARMUP INTERVAL SECS MODE KINDS started ended rev full >"$OUT/settings"
echo "LOAD='$(cut -d' ' -f1-3 /proc/loadavg)' MACHINE='$(nproc) CPUs, Linux $(uname -r)'" >>"$OUT/settings"
render "$OUT"
