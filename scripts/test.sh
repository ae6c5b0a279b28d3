#!/usr/bin/env bash
# The test suite: unit and golden tests, then end-to-end tests in real network
# namespaces (they need root). Integration test binaries run one after another.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
cargo test --workspace --no-fail-fast "$@"
