#!/usr/bin/env bash
# The test suite: unit and golden tests, end-to-end tests in real network
# namespaces (they need root), interop with Debian's iperf3, wireguard-go and
# strongSwan. cargo-nextest runs each test in a process of its own, several at
# once (.config/nextest.toml), with a time per test, the slowest listed at the
# end, and a JUnit report in target/nextest/default/junit.xml. Release builds:
# the datapaths and the engine under test are the ones the main job runs.
# Arguments go to nextest (a filter, say: bash scripts/test.sh latency).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
if ! cargo nextest --version >/dev/null 2>&1; then
  echo "test: installing cargo-nextest, the test runner (once, from crates.io)" >&2
  cargo install --locked cargo-nextest
fi
# The API's documentation builds without a warning (broken links, bare URLs).
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --quiet
cargo nextest run --release --workspace "$@"
# nextest runs no doctests.
cargo test --release --workspace --doc --quiet
