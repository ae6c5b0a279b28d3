#!/usr/bin/env bash
# The main job: build the seed's home network (topologies/nvr500-home.toml) as a
# lab, print its reachability matrix, and take it down again.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
cargo build --release --quiet
tb=target/release/tunbench
lab=${LAB:-home}
trap '$tb down "$lab" >/dev/null 2>&1 || true' EXIT INT TERM
$tb validate topologies/nvr500-home.toml
$tb up topologies/nvr500-home.toml --name "$lab"
$tb status "$lab"
$tb check "$lab"
$tb down "$lab"
