#!/usr/bin/env bash
# The main job: the seed's study as one command. Builds the seed's home network
# (topologies/nvr500-home.toml) once per scenario -- no router (the PC on the
# LAN2 switch), the NVR500 model's fast path, its normal path -- and measures the
# raw path from the client PC to the server on LAN2: IPv4 and IPv6, TCP and UDP,
# upload and download, UDP at the highest rate within 10 % loss; then the 6-stream
# IPv6 download of the seed's speed test, the VPNs from the PC to the server
# through the NVR500's fast path (WireGuard, L2TP/IPsec, and IKEv2 with real
# strongSwan), and native IPv6 against IPv4 over the DS-Lite softwire (kernel
# and userspace). It prints the report with the seed's
# table beside the measured one (ratio per cell; the NVR500 is a model calibrated
# from those figures, and the report says so) and takes the labs down. Short runs
# (3 x 3 s, best of 3), so it finishes in about a quarter of an hour; the results
# are saved under results/: JSON, an SVG chart of the matrix, and an HTML page
# with every view's table and charts (open it in any browser; it fetches nothing).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
cargo build --release --quiet
tb=target/release/tunbench
mkdir -p results
$tb validate topologies/nvr500-home.toml
$tb run topologies/nvr500-home.toml --runs 3 --duration 3 --trial-duration 1 --save results/nvr500-home.json
$tb report results/nvr500-home.json --format svg --output results/nvr500-home.svg
$tb report results/nvr500-home.json --format html --output results/nvr500-home.html
echo "results: results/nvr500-home.json, chart: results/nvr500-home.svg, report page: $PWD/results/nvr500-home.html"
