#!/usr/bin/env bash
# The test suite: unit and golden tests, then end-to-end tests in real network
# namespaces (they need root). Integration test binaries run one after another.
# Release builds: the tests measure rates up to 2 Gbit/s with tunbench's own
# engine, which a debug build cannot send steadily on two shared cores.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
# The API's documentation builds without a warning (broken links, bare URLs).
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --quiet
cargo test --release --workspace --no-fail-fast "$@"
