#!/usr/bin/env bash
# The main job: the NVR500 study's study as one command. Builds the NVR500 study's home network
# (topologies/nvr500-home.toml) once per scenario -- no router (the PC on the
# LAN2 switch), the NVR500 model's fast path, its normal path -- and measures the
# raw path from the client PC to the server on LAN2: IPv4 and IPv6, TCP and UDP,
# upload and download, UDP at the highest rate within 10 % loss (lowered where
# reordering persists, the NVR500 study's rule; each search starts from the lab's
# prediction); then the NVR500 study's speed tests (one and 6
# IPv6 download streams), the VPNs from the PC through the NVR500's fast path
# (WireGuard, L2TP/IPsec and IKEv2 with real strongSwan to the server, and the
# NVR500's own L2TP/IPsec server), and IPv4 over the DS-Lite softwire through
# the OpenWrt B4 to the NGN and to the internet against native IPv6. It prints
# the report with the NVR500 study's figures beside the measured ones (ratio per cell,
# each marked calibrated -- the models were set from it -- or predicted), the
# model's predictions for paths nobody published, and takes the labs down.
# Short runs (3 x 3 s, best of 3), so it finishes in about 10 minutes;
# the results are saved under results/: JSON, an SVG chart of the matrix, and
# an HTML page with every view's table and charts (open it in any browser; it
# fetches nothing).
set -euo pipefail
cd "$(dirname "$0")/.."
# What the labs run and what building needs; none of the test suite's tools.
. scripts/setup.sh --build
cargo build --release --quiet
tb=target/release/tunbench
mkdir -p results
$tb validate topologies/nvr500-home.toml
$tb run topologies/nvr500-home.toml --runs 3 --duration 3 --trial-duration 1 --save results/nvr500-home.json
$tb report results/nvr500-home.json --format svg --output results/nvr500-home.svg
$tb report results/nvr500-home.json --format html --output results/nvr500-home.html
echo "results: results/nvr500-home.json, chart: results/nvr500-home.svg, report page: $PWD/results/nvr500-home.html"
