#!/usr/bin/env bash
# Benchmark (not a test): what the routers' userspace slow path costs against the
# kernel's forwarding, as ratios, with the slow path's CPU per Gbit; for one tunbench
# binary, or two (BEFORE and AFTER, one after the other in one session).
#
#   sudo bench/router-datapaths.sh [--out DIR] BIN [BIN2]
#   bench/router-datapaths.sh --report DIR   (no root: render DIR's table again)
#
# Each binary runs `tunbench run topologies/router-datapaths.toml` (lab `rdba`:
# client - r1 - server, scenario `fast` forwards in the kernel, `normal` in the slow
# path; 3 runs of 5 s per cell, UDP at the highest rate within 10 % loss) while the
# slow path's stats file is read every 0.25 s. A cell's CPU is the growth of the slow
# path's `cpu_seconds` (all its threads) between the end of the cell before and the
# end of this one, over the Gbit its TUN read meanwhile. Binaries' file names must
# start with `tunbench`.
#
# Output, also in DIR/report.md (default DIR: results/router-datapaths-UTCTIME/):
# per binary and cell, fast and normal Mbit/s (medians of the runs), normal/fast,
# and CPU seconds per Gbit. DIR keeps each run's results (NAME.json), progress
# and samples.
#
# Figures and method: docs/benchmarks/router-datapaths.md (index: BENCHMARKS.md).
set -euo pipefail
HERE=$(pwd)
cd "$(dirname "$0")/.."
BENCH=router-datapaths
. bench/common.sh

OUT=
REPORT=
POS=()
while [[ $# -gt 0 ]]; do
    case $1 in
        --out) OUT=${2-}; shift 2 || die "--out needs a value" ;;
        --report) REPORT=${2-}; shift 2 || die "--report needs a value" ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) die "unknown option '$1' (see --help)" ;;
        *) POS+=("$1"); shift ;;
    esac
done
from_here() { [[ $1 == /* ]] && echo "$1" || echo "$HERE/$1"; }

# render DIR: one table row per binary and cell, printed and kept as report.md.
render() {
    local dir=$1
    ls "$dir"/*.samples >/dev/null 2>&1 || die "$dir: no runs (*.samples)"
    python3 - "$dir" <<'PY' | tee "$dir/report.md"
import glob, json, os, sys
d = sys.argv[1]
print("| binary | cell | fast Mbit/s | normal Mbit/s | **normal / fast** | slow path CPU s/Gbit |")
print("|---|---|---:|---:|---:|---:|")
for base in sorted(f[:-8] for f in glob.glob(os.path.join(d, "*.samples"))):
    name = os.path.basename(base)
    r = json.load(open(base + ".json"))
    figs = {}
    for p in r["paths"]:
        for c in p["cells"]:
            k = c["cell"]
            key = f"{k['family'].replace('ipv', 'IPv')} {k['protocol'].upper()} {'upload' if k['direction'] == 'sender' else 'download'}"
            figs.setdefault(key, {})[p["scenario"]] = None if c.get("error") else c["median_bps"] / 1e6
    samples = [json.loads(l) for l in open(base + ".samples")]
    ends = [json.loads(l) for l in open(base + ".ends")]
    cpu = {}
    prev = None
    for e in ends:
        if e["scenario"] == "normal":
            win = [s for s in samples if (prev or 0) <= s["t"] <= e["t"]]
            if len(win) >= 2 and win[-1]["bytes"] > win[0]["bytes"]:
                gbit = (win[-1]["bytes"] - win[0]["bytes"]) * 8 / 1e9
                cpu[e["cell"]] = (win[-1]["cpu"] - win[0]["cpu"]) / gbit
        prev = e["t"]
    for key, v in figs.items():
        fast, normal = v.get("fast"), v.get("normal")
        ratio = f"**{normal / fast:.2f}**" if fast and normal else "-"
        c = cpu.get(key)
        f = lambda x: "-" if x is None else f"{x:.0f}"
        print(f"| {name} | {key} | {f(fast)} | {f(normal)} | {ratio} | {'-' if c is None else f'{c:.2f}'} |")
PY
}

# measure NAME BIN: one run, the slow path's stats sampled beside it.
measure() {
    local name=$1 bin=$2
    echo "$BENCH: $name ($bin), load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    python3 - "$bin" "$OUT/$name" <<'PY'
import json, subprocess, sys, threading, time
binary, base = sys.argv[1], sys.argv[2]
stats = "/run/tunbench/rdba/datapath-router.r1.json"
done = False
def sample(out):
    while not done:
        try:
            s = json.load(open(stats))
            out.write(json.dumps({"t": time.time(), "cpu": s["cpu_seconds"], "bytes": s["tun_rx"]["bytes"]}) + "\n")
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.25)
with open(base + ".samples", "w") as samples, open(base + ".ends", "w") as ends, open(base + ".progress", "w") as log:
    t = threading.Thread(target=sample, args=(samples,))
    t.start()
    p = subprocess.Popen([binary, "run", "topologies/router-datapaths.toml", "--name", "rdba",
                          "--save", base + ".json"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        log.write(line)
        # "[normal/through-r1] IPv4 TCP Sender (1/8): ...": a cell ended.
        if line.startswith("[") and "): " in line:
            scenario = line[1:].split("/")[0]
            title = line.split("] ")[1].split(" (")[0]
            fam, proto, way = title.split(" ")[:3]
            cell = f"{fam} {proto} {'upload' if way == 'Sender' else 'download'}"
            ends.write(json.dumps({"t": time.time(), "scenario": scenario, "cell": cell}) + "\n")
    p.wait()
    done = True
    t.join()
sys.exit(p.returncode)
PY
}

if [[ -n $REPORT ]]; then
    render "$(from_here "$REPORT")"
    exit 0
fi
[[ ${#POS[@]} -ge 1 && ${#POS[@]} -le 2 ]] || die "give one or two tunbench binaries (see --help)"
[[ $EUID -eq 0 ]] || die "needs root (it builds labs)"
for b in "${POS[@]}"; do
    b=$(from_here "$b")
    [[ -x $b && $(basename "$b") == tunbench* ]] || die "$b: not a tunbench binary"
done
OUT=$(from_here "${OUT:-results/router-datapaths-$(date -u +%Y%m%dT%H%M%S)}")
mkdir -p "$OUT"
trap '"$(from_here "${POS[0]}")" down rdba >/dev/null 2>&1 || true' EXIT
n=0
for b in "${POS[@]}"; do
    n=$((n + 1))
    measure "$n-$(basename "$(dirname "$(from_here "$b")")")" "$(from_here "$b")" ||
        die "run $n ($b) failed: $(tail -3 "$OUT/$n-"*.progress)"
done
render "$OUT"
