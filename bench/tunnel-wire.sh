#!/usr/bin/env bash
# Benchmark (not a test): every tunnel kind over a 1G Ethernet underlay against
# the wire limit tunbench predicts for it, in one run. The topologies are
# tests/fixtures/wire/{tunnels,wireguard}.toml with the link at 1G instead of
# 20M, and a [[measure]] of the raw link and one of the tunnel appended;
# `tunbench run` measures TCP and UDP, both families, upload, 1 stream, and
# its report puts each cell beside its wire limit (rate x payload / wire bytes
# of the outer frame). At 1G on 2 cores a userspace datapath may be what holds
# a figure lower; the 20M test (tests/datapath/wire_tunnels.rs) is where no
# CPU limits.
#
#   sudo bench/tunnel-wire.sh [RUNS [SECONDS]]     (defaults: 1 run, 3 s)
#
# Prints the markdown matrix of each; the labs (btw<pid>i, btw<pid>w) are
# taken down by `tunbench run` itself, also on failure or Ctrl-C.
#
# Figures, method and history: docs/benchmarks/shaped-wire.md (index: BENCHMARKS.md).
set -euo pipefail
BENCH=tunnel-wire
RUNS=${1:-1}
SECS=${2:-3}
cd "$(dirname "$0")/.."
. bench/common.sh
num RUNS "$RUNS"
num SECONDS "$SECS"
build_tunbench
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT

measures='
[[measure]]
name = "raw"
from = "a"
to = "b"
ipv4 = "198.18.86.2"
ipv6 = "2001:2:0:86::2"
directions = ["sender"]
latency = false

[[measure]]
name = "tunnel"
from = "a"
to = "b"
ipv4 = "198.18.87.2"
ipv6 = "2001:2:0:87::2"
directions = ["sender"]
# Datagrams that fit every tunnel here: the smallest inner MTU (IKEv2 1400)
# less IPv6 and UDP.
udp_len = 1352
latency = false
'

for kind in tunnels wireguard; do
  sed 's/rate = "20M"/rate = "1G"/' "tests/fixtures/wire/$kind.toml" > "$DIR/$kind.toml"
  echo "$measures" >> "$DIR/$kind.toml"
  echo "== $kind.toml at 1G, $RUNS run(s) of $SECS s" >&2
  "$TB" run "$DIR/$kind.toml" --name "btw$$${kind:0:1}" --runs "$RUNS" --duration "$SECS" \
    --format md
done
