#!/usr/bin/env bash
# The test suite: unit and golden tests, end-to-end tests in real network
# namespaces (they need root), interop with Debian's iperf3, irtt, wireguard-go
# and strongSwan. cargo-nextest runs each test in a process of its own, several
# at once (.config/nextest.toml), with a time per test, the slow ones listed at
# the end, and JUnit reports in target/nextest/{unit,default}/junit.xml. Release
# builds: the datapaths and the engine under test are the ones the main job runs.
# Arguments go to nextest (a filter, say: bash scripts/test.sh latency).
set -euo pipefail
cd "$(dirname "$0")/.."
# What the labs run, what building needs, and what only the tests use; the
# checkers' virtualenv installs while the tests build.
# shellcheck disable=SC2034 # read by setup.sh, sourced next
SETUP_CHECKERS=background
. scripts/setup.sh --build --tests
if ! cargo nextest --version >/dev/null 2>&1; then
  echo "test: installing cargo-nextest, the test runner (once, from crates.io)" >&2
  cargo install --locked cargo-nextest
fi
# Two builds. The end-to-end tests and the binary they run carry traffic, so
# they are the optimised release the main job runs. The libraries' unit tests
# check logic (parsers, codecs, plans, models), never speed: they compile the
# libraries a second time, unoptimised and in 16 codegen units, for a quarter
# of the CPU and on every core.
suite=(--bins --test '*')
unit=(--lib)
for crate in tunbench tunbench-core tunbench-netns; do
  unit+=(--config "profile.release.package.$crate.opt-level=0"
    --config "profile.release.package.$crate.codegen-units=16")
done
status=0
cargo test --release --workspace --no-run "${suite[@]}"
# The stock-kernel tests (tests/stock_kernel) run on Debian's own kernel,
# booted in a VM (scripts/stock-kernel.sh) beside the suite: one boot for all
# of them, nextest inside on the binaries built here, its JUnit report in
# target/nextest/stock-kernel/junit.xml and its console in
# target/stock-kernel/console.log. It starts as soon as the binaries are
# built, at a lower priority than the builds that follow: the guest's CPU
# is emulated, and what it uses is taken from them only when they wait.
stock=target/stock-kernel
mkdir -p "$stock"
stock_kernel_tests() {
  local tests
  tests=$(cargo nextest list --release --workspace --test stock_kernel --profile stock-kernel \
    --message-format oneline "$@" 2>/dev/null | wc -l)
  if [ "$tests" = 0 ]; then
    echo "test: no stock-kernel test matches; the VM is not started" >&2
    return 0
  fi
  cargo nextest list --release --workspace --test stock_kernel \
    --list-type binaries-only --message-format json >"$stock/binaries.json"
  cargo metadata --format-version 1 --no-deps >"$stock/cargo-metadata.json"
  bash scripts/stock-kernel.sh --timeout 900 -- cargo-nextest nextest run \
    --binaries-metadata "$stock/binaries.json" --cargo-metadata "$stock/cargo-metadata.json" \
    --profile stock-kernel --no-tests=warn "$@"
}
(renice -n 5 -p "$BASHPID" >/dev/null; stock_kernel_tests "$@") >"$stock/console.log" 2>&1 &
stock_pid=$!
# The API's documentation builds without a warning (broken links, bare URLs).
# In the release profile's directory, after the build: cargo checks every
# dependency again for it, and there the build scripts and proc-macros are
# the release build's own.
if ! RUSTDOCFLAGS="-D warnings" cargo doc --release --no-deps --workspace --quiet; then
  echo "test: the API documentation has warnings" >&2
  status=1
fi
cargo test --release --workspace --no-run "${unit[@]}"
# shellcheck disable=SC2154 # both set by setup.sh
if ! wait "$setup_checkers_pid"; then
  cat "$setup_checkers_log" >&2
  echo "test: installing the checkers' virtualenv failed" >&2
  exit 1
fi
rm -f "$setup_checkers_log"
# The doctests (nextest runs none), on the release build.
cargo test --release --workspace --doc --quiet || status=1
# A filter may match tests of only one of the runs.
cargo nextest run --release --workspace "${unit[@]}" --profile unit \
  --no-tests=warn "$@" || status=$?
cargo nextest run --release --workspace "${suite[@]}" --no-tests=warn "$@" ||
  status=$?
if wait "$stock_pid"; then
  echo "test: the stock-kernel tests passed in the VM:" >&2
  grep -E "^ +(Summary|PASS|SLOW)|^ +Starting" "$stock/console.log" >&2 || true
else
  echo "test: the stock-kernel tests failed in the VM; its console ($stock/console.log):" >&2
  cat "$stock/console.log" >&2
  status=1
fi
exit "$status"
