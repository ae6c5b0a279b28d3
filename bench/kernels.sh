#!/usr/bin/env bash
# Benchmark (not a test): the kernel's own tunnels, softwire and shaper beside
# tunbench's, on the same emulated wire, in one run, as ratios:
#   wireguard  tunbench's WireGuard, the kernel's, wireguard-go
#   esp        AES-GCM-128 ESP in tunnel mode: tunbench's, the kernel's xfrm
#              (keyed by strongSwan's IKEv2, `datapath = "kernel"`), and
#              strongSwan's userspace libipsec
#   dslite     the kernel softwire (seg6 + nftables NAT44), tunbench's userspace one
#   shaper     a link's rate by the TBF pair, by cake
# Tunnels: bench/kernels.toml (two hosts on one link, a scenario per
# implementation), unshaped and over a 1 Gbit/s Ethernet wire (the link's
# `rate`); DS-Lite: topologies/dslite.toml's two scenarios; the shaper: the
# same two hosts with a 1 Gbit/s link, no tunnel. Each variant is one lab, up,
# measured with `tunbench measure` (TCP and UDP, upload, 1 and 4 streams; UDP
# at the highest rate whose loss stays within 10 %, datagrams that fit the
# narrowest tunnel), then one TCP stream
# alone for CPU: the whole machine's busy CPU seconds (/proc/stat: user,
# system, softirq; kernel datapaths work in softirq, not in a process) per
# Gbit received. Ratios are to the first variant of each group.
#
#   sudo bench/kernels.sh [--groups "wireguard esp dslite shaper"]
#                         [--runs 3] [--duration 5] [--bin PATH]
#
# A variant this kernel cannot run (no WireGuard module, no xfrm, no seg6, no
# cake) is listed as failed with tunbench's reason; the rest still run.
# Inside scripts/stock-kernel.sh's VM every variant runs, under emulation:
# those figures show that the comparison works end to end, not how fast
# anything is (docs/benchmarks/kernels.md).
#
# Lab names: bk + group. Output: the table on stdout (markdown), progress on
# stderr. Labs are taken down on exit, also on failure or Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH=kernels
. bench/common.sh

GROUPS_RUN="wireguard esp dslite shaper"
RUNS=3
SECS=5
BIN=
while [[ $# -gt 0 ]]; do
    case $1 in
        --groups) GROUPS_RUN=${2-}; shift 2 || die "--groups needs a value" ;;
        --runs) RUNS=${2-}; shift 2 || die "--runs needs a value" ;;
        --duration) SECS=${2-}; shift 2 || die "--duration needs a value" ;;
        --bin) BIN=${2-}; shift 2 || die "--bin needs a value" ;;
        *) die "unknown argument $1 (see the header of bench/kernels.sh)" ;;
    esac
done
num --runs "$RUNS"
num --duration "$SECS"
for g in $GROUPS_RUN; do
    case $g in wireguard | esp | ikev2 | dslite | shaper) ;; *) die "unknown group $g" ;; esac
done
[[ $(id -u) == 0 ]] || die "needs root (namespaces)"
if [[ -n $BIN ]]; then TB=$BIN; else build_tunbench; fi

DIR=$(mktemp -d)
LAB=
cleanup() {
    [[ -n $LAB ]] && "$TB" down "$LAB" >/dev/null 2>&1
    rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The machine's busy CPU, in clock ticks: user, nice, system, irq, softirq.
busy_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
HZ=$(getconf CLK_TCK)

# file with_wire -> a copy whose links carry 1 Gbit/s Ethernet (or the file).
wired() {
    local f=$1 out
    [[ $2 == 1g ]] || { echo "$f"; return; }
    out=$DIR/$(basename "$f" .toml)-1g.toml
    sed 's/^b = { port = "b:eth0"\(.*\)$/b = { port = "b:eth0"\1\nimpairments = { rate = "1G" }/' "$f" >"$out"
    grep -q 'rate = "1G"' "$out" || die "$f: no link to put a 1G wire on"
    echo "$out"
}

# A wired file -> a copy whose 1 Gbit/s wire is the kernel's CAKE's, not the
# TBF pair's (`shaper = "cake"`): a scenario of the file itself would make
# every scenario invalid on a kernel without cake.
caked() {
    local f=$1 out
    out=${f%.toml}-cake.toml
    sed 's/^impairments = { rate = "1G" }$/impairments = { rate = "1G", shaper = "cake" }/' "$f" >"$out"
    grep -q 'shaper = "cake"' "$out" || die "$f: no 1G wire to give to cake"
    echo "$out"
}

# file tunnel -> a copy where the tunnel runs in the kernel: WireGuard's
# `implementation = "kernel"`, IKEv2's `datapath = "kernel"` (xfrm). As
# scenarios of the file itself, they would make every scenario invalid on a
# kernel without them.
kernel_file() {
    local f=$1 t=$2 out
    out=${f%.toml}-$t-kernel.toml
    case $t in
        wg) sed 's/^implementation = "tunbench"$/implementation = "kernel"/' "$f" >"$out" ;;
        ikev2) sed 's/^kind = "ikev2"$/kind = "ikev2"\ndatapath = "kernel"/' "$f" >"$out" ;;
    esac
    cmp -s "$f" "$out" && die "$f: no $t tunnel to put in the kernel"
    echo "$out"
}

# One variant: up, measure, one TCP stream for CPU, down. Prints one TSV line
# per cell: group variant wire cell bps note; and one for CPU per Gbit.
variant() { # group variant wire file scenario from to addr udp_len
    local group=$1 name=$2 wire=$3 file=$4 scenario=$5 from=$6 to=$7 addr=$8 len=$9 out t0 t1 c0 c1
    LAB=bk$group
    echo "$BENCH: $group $name ($wire) ..." >&2
    if ! out=$("$TB" up "$file" --scenario "$scenario" --name "$LAB" 2>&1); then
        printf '%s\t%s\t%s\tall\t-\tfailed: %s\n' "$group" "$name" "$wire" \
            "$(echo "$out" | grep -v '^ *$' | tail -1 | tr '\t' ' ' | cut -c1-200)"
        "$TB" down "$LAB" >/dev/null 2>&1 || true
        LAB=
        return 0
    fi
    "$TB" measure "$LAB" --from "$from" --to "$to" --to-addr "$addr" --families ipv4 \
        --protocols tcp,udp --directions sender --streams 1,4 --runs "$RUNS" \
        --duration "$SECS" --trial-duration 1 --udp-len "$len" --no-latency --format json \
        >"$DIR/m.json" 2>"$DIR/m.err" ||
        echo "$BENCH: $group $name: measure failed: $(tail -1 "$DIR/m.err")" >&2
    python3 - "$DIR/m.json" "$group" "$name" "$wire" <<'PY' || true
import json, sys
path, group, name, wire = sys.argv[1:5]
d = json.load(open(path))
for p in d["paths"]:
    for c in p["cells"]:
        k = c["cell"]
        cell = f'{k["protocol"]}{k["streams"]}'
        if c.get("error"):
            print(f"{group}\t{name}\t{wire}\t{cell}\t-\tfailed: {c['error'][:120]}")
        else:
            print(f"{group}\t{name}\t{wire}\t{cell}\t{c['median_bps']:.0f}\t")
PY
    c0=$(busy_ticks); t0=$(now)
    "$TB" measure "$LAB" --from "$from" --to "$to" --to-addr "$addr" --families ipv4 \
        --protocols tcp --directions sender --streams 1 --runs 1 --duration "$SECS" \
        --no-latency --format json >"$DIR/c.json" 2>/dev/null || true
    c1=$(busy_ticks); t1=$(now)
    python3 - "$DIR/c.json" "$group" "$name" "$wire" "$((c1 - c0))" "$HZ" "$t0" "$t1" <<'PY' || true
import json, sys
path, group, name, wire, ticks, hz, t0, t1 = sys.argv[1:9]
d = json.load(open(path))
c = d["paths"][0]["cells"][0]
gbit = c["median_bps"] * c["seconds"] / 1e9 if not c.get("error") else 0
cpu = int(ticks) / int(hz)
if gbit > 0:
    print(f"{group}\t{name}\t{wire}\tcpu_s_per_gbit\t{cpu / gbit:.3f}\t{cpu:.1f} CPU-s in {float(t1) - float(t0):.1f} s")
PY
    "$TB" down "$LAB" >/dev/null 2>&1 || true
    LAB=
}

# UDP datagrams that fit every tunnel's inner MTU (libipsec's 1400, less
# IPv4 and UDP headers), so no variant's UDP figure is lost to fragments;
# DS-Lite's softwire carries 1432 (1460 - 28), the plain link 1472.
TUNNEL_UDP=1372
RESULTS=$DIR/results.tsv
: >"$RESULTS"
K=bench/kernels.toml
for g in $GROUPS_RUN; do
    case $g in
        wireguard | esp)
            for wire in unshaped 1g; do
                f=$(wired "$K" "$wire")
                if [[ $g == wireguard ]]; then
                    variant wireguard tunbench "$wire" "$f" wg a b 198.18.71.2 "$TUNNEL_UDP"
                    variant wireguard kernel "$wire" "$(kernel_file "$f" wg)" wg a b 198.18.71.2 "$TUNNEL_UDP"
                    variant wireguard wireguard-go "$wire" "$f" wg-wireguard-go a b 198.18.71.2 "$TUNNEL_UDP"
                else
                    variant esp tunbench "$wire" "$f" esp a b 198.18.72.2 "$TUNNEL_UDP"
                    variant esp xfrm "$wire" "$(kernel_file "$f" ikev2)" ikev2 a b 198.18.73.2 "$TUNNEL_UDP"
                    variant esp libipsec "$wire" "$f" ikev2 a b 198.18.73.2 "$TUNNEL_UDP"
                fi
            done
            ;;
        dslite)
            for v in kernel userspace; do
                variant dslite "$v" unshaped topologies/dslite.toml "$v" client server 198.18.52.10 1432
            done
            ;;
        shaper)
            f=$(wired "$K" 1g)
            variant shaper tbf 1g "$f" shaper-tbf a b 198.18.70.2 1472
            variant shaper cake 1g "$(caked "$f")" shaper-cake a b 198.18.70.2 1472
            ;;
    esac
done >>"$RESULTS"

echo "# bench/kernels.sh on $(uname -r), $(nproc) CPUs: $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)"
echo "# runs per cell $RUNS, $SECS s each; ratios to the first variant of each group and wire"
python3 - "$RESULTS" <<'PY'
import sys, collections
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
first = {}
print("| group | wire | variant | cell | figure | ratio | note |")
print("|---|---|---|---|---|---|---|")
for g, v, w, cell, fig, note in rows:
    key = (g, w, cell)
    ratio = ""
    if fig not in ("-", ""):
        x = float(fig)
        if key not in first:
            first[key] = x
        elif first[key] > 0:
            ratio = f"{x / first[key]:.2f}"
        shown = f"{x / 1e6:.1f} Mbit/s" if cell != "cpu_s_per_gbit" else f"{x:.3f} CPU-s/Gbit"
    else:
        shown = "-"
    print(f"| {g} | {w} | {v} | {cell} | {shown} | {ratio} | {note} |")
PY
