#!/usr/bin/env bash
# Benchmark (not a test): the main job (scripts/main-job.sh's measurement:
# topologies/nvr500-home.toml, 3 runs of 3 s per cell, UDP trials of 1 s) with two
# tunbench binaries, BEFORE and AFTER, in one session, so a change to how `run`
# measures can be shown to give the same answers in less time. Rounds alternate the
# variants (BEFORE, AFTER, BEFORE, AFTER, ...: round 1 is BEFORE then AFTER), so the
# BEFORE runs measure the machine's own run-to-run noise beside the AFTER ones.
#
#   sudo bench/main-job-before-after.sh [--rounds N | --order LIST] [--out DIR] BEFORE AFTER
#   bench/main-job-before-after.sh --report DIR   (no root: render DIR's table again)
#
# BEFORE and AFTER are paths to tunbench binaries (their file names must start with
# `tunbench`: tunbench starts its datapaths from its own executable). The topology is
# this checkout's, the same for both. Rounds default to 1 (one run each; 2 rounds
# give the two BEFORE runs that measure the noise). --order gives the runs
# instead, comma-separated (`before,after,before`: two BEFORE runs around one
# AFTER, for the noise in less time). Lab name `mjba`.
#
# Output, also in DIR/report.md (default DIR: results/main-job-UTCTIME/): the wall
# time of each run and its breakdown (each results file's time note), then one row
# per cell: the median Mbit/s of every run, UDP search trials per run, and whether
# each AFTER figure lies within the BEFORE runs' range widened by their own spread,
# at least 0.5 % (`same`), or not (`outside`, with how far). DIR keeps every results
# file.
#
# Figures and method: docs/benchmarks/nvr500-model.md (index: BENCHMARKS.md).
set -euo pipefail
HERE=$(pwd)
cd "$(dirname "$0")/.."
BENCH=main-job-before-after
. bench/common.sh

ROUNDS=1
ORDER=
OUT=
REPORT=
POS=()
while [[ $# -gt 0 ]]; do
    case $1 in
        --rounds) ROUNDS=${2-}; shift 2 || die "--rounds needs a value" ;;
        --order) ORDER=${2-}; shift 2 || die "--order needs a value" ;;
        --out) OUT=${2-}; shift 2 || die "--out needs a value" ;;
        --report) REPORT=${2-}; shift 2 || die "--report needs a value" ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) die "unknown option '$1' (see --help)" ;;
        *) POS+=("$1"); shift ;;
    esac
done
from_here() { [[ $1 == /* ]] && echo "$1" || echo "$HERE/$1"; }

# render DIR: the table from DIR's results files, printed and kept as report.md.
render() {
    local dir=$1
    ls "$dir"/*.json >/dev/null 2>&1 || die "$dir: no results files (*.json)"
    python3 - "$dir" <<'PY' | tee "$dir/report.md"
import json, os, sys, glob
d = sys.argv[1]
runs = []
def order(f):
    variant, _, n = os.path.basename(f)[:-5].partition("-")
    return (int(n) if n.isdigit() else 0, variant != "before")
for f in sorted(glob.glob(os.path.join(d, "*.json")), key=order):
    variant = os.path.basename(f).split("-")[0]
    wall = open(f[:-5] + ".wall").read().strip() if os.path.exists(f[:-5] + ".wall") else "?"
    runs.append((variant, os.path.basename(f)[:-5], json.load(open(f)), wall))
def cells(r):
    out = {}
    for p in r["paths"]:
        for c in p["cells"]:
            k = c["cell"]
            key = f"{p.get('scenario') or '-'}/{p['path']} {k['family']} {k['protocol']} {k['direction']}" + ("" if k["streams"] == 1 else f" x{k['streams']}")
            fig = None if c.get("error") else c["median_bps"] / 1e6
            trials = len(c["search"]["trials"]) if c.get("search") else None
            out[key] = (fig, trials, c.get("measured_with") or p.get("same_lab_as"))
    return out
print("# Main job before/after\n")
for v, name, r, wall in runs:
    note = next((n for n in r.get("notes", []) if n.startswith("time:")), "no time note")
    print(f"- {name}: {wall} s wall. {note}")
print()
cs = [(v, name, cells(r)) for v, name, r, _ in runs]
keys = []
for _, _, c in cs:
    keys += [k for k in c if k not in keys]
print("| cell | " + " | ".join(n for _, n, _ in cs) + " | AFTER vs BEFORE |")
print("|---|" + "---:|" * len(cs) + "---|")
for k in keys:
    before = [c[k][0] for v, _, c in cs if v == "before" and k in c and c[k][0] is not None]
    row = []
    for v, _, c in cs:
        fig, trials, shared = c.get(k, (None, None, None))
        s = "-" if fig is None else f"{fig:.1f}"
        if trials is not None:
            s += f" ({trials} tr)"
        if shared:
            s += " ="
        row.append(s)
    verdict = ""
    if before:
        lo, hi = min(before), max(before)
        # At least 0.5 % of the figure: what three significant digits show.
        spread = max(hi - lo, 0.005 * hi)
        out = []
        for v, _, c in cs:
            fig = c.get(k, (None,))[0]
            if v != "after" or fig is None:
                continue
            if lo - spread <= fig <= hi + spread:
                out.append("same")
            else:
                edge = hi if fig > hi else lo
                out.append(f"outside ({(fig - edge) / edge * 100:+.0f} % past the BEFORE range)")
        verdict = ", ".join(out)
    print(f"| {k} | " + " | ".join(row) + f" | {verdict} |")
print("\n`(N tr)`: UDP search trials; `=`: shown from another path's or scenario's measurement; "
      "`same`: within the BEFORE runs' range widened by its own width on each side "
      "(at least 0.5 % of the figure, what three significant digits show).")
PY
}

if [[ -n $REPORT ]]; then
    render "$(from_here "$REPORT")"
    exit 0
fi
[[ ${#POS[@]} -eq 2 ]] || die "give two tunbench binaries, BEFORE and AFTER (see --help)"
num --rounds "$ROUNDS"
if [[ -z $ORDER ]]; then
    ORDER=$(for _ in $(seq 1 "$ROUNDS"); do printf 'before,after,'; done)
fi
IFS=, read -ra runs <<<"$ORDER"
for variant in "${runs[@]}"; do
    [[ $variant == before || $variant == after ]] ||
        die "--order lists before and after only (got '$variant')"
done
[[ $EUID -eq 0 ]] || die "needs root (it builds labs)"
BEFORE=$(from_here "${POS[0]}")
AFTER=$(from_here "${POS[1]}")
for b in "$BEFORE" "$AFTER"; do
    [[ -x $b && $(basename "$b") == tunbench* ]] || die "$b: not a tunbench binary"
done
OUT=$(from_here "${OUT:-results/main-job-$(date -u +%Y%m%dT%H%M%S)}")
mkdir -p "$OUT"
trap '"$AFTER" down mjba >/dev/null 2>&1 || true' EXIT

# run VARIANT BIN ROUND: one main job, its results and wall seconds kept in OUT.
run() {
    local name=$1-$3 start
    echo "$BENCH: round $3, $1 ($2), load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    start=$EPOCHREALTIME
    "$2" run topologies/nvr500-home.toml --name mjba --runs 3 --duration 3 \
        --trial-duration 1 --save "$OUT/$name.json" >"$OUT/$name.txt" 2>"$OUT/$name.progress" ||
        die "$name failed: $(tail -3 "$OUT/$name.progress")"
    awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f\n", b - a }' >"$OUT/$name.wall"
}
declare -A nth=([before]=0 [after]=0)
for variant in "${runs[@]}"; do
    case $variant in
        before) bin=$BEFORE ;;
        *) bin=$AFTER ;;
    esac
    nth[$variant]=$((nth[$variant] + 1))
    run "$variant" "$bin" "${nth[$variant]}"
done
render "$OUT"
