#!/usr/bin/env bash
# The main job: the seed's study as one command. Builds the seed's home network
# (topologies/nvr500-home.toml) as a lab, measures the raw path from the client PC
# on LAN1 to the server on LAN2 through the router -- IPv4 and IPv6, TCP and UDP,
# upload and download, UDP at the highest rate within 10 % loss -- and, from the
# PC to a server on the internet, native IPv6 against IPv4 over the DS-Lite
# softwire, once with the kernel softwire and once with tunbench's userspace one
# (two scenarios, each its own lab), prints the report and takes the labs down. Short runs, so it finishes in a few minutes; the
# results are saved under results/ (JSON and an SVG chart).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
cargo build --release --quiet
tb=target/release/tunbench
mkdir -p results
$tb validate topologies/nvr500-home.toml
$tb run topologies/nvr500-home.toml --runs 3 --duration 3 --trial-duration 1 --save results/nvr500-home.json
$tb report results/nvr500-home.json --format svg --output results/nvr500-home.svg
echo "results: results/nvr500-home.json, chart: results/nvr500-home.svg"
