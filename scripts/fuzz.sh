#!/usr/bin/env bash
# Runs every cargo-fuzz target for a number of seconds each (default 30) and copies
# whatever it finds (crash-, leak-, timeout-, oom- inputs) into
# fuzz/regressions/<target>/, which tests/offline/fuzz_regressions.rs replays in a plain
# `cargo test`. Exits 1 if any target found something.
#
#   scripts/fuzz.sh [seconds] [target...]
#
# Only a stable toolchain is installed; cargo-fuzz needs nightly flags
# (-Zsanitizer), which RUSTC_BOOTSTRAP=1 lets stable take.
set -euo pipefail

secs=${1:-30}
shift || true
cd "$(dirname "$0")/.."

if ! command -v cargo-fuzz >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
export RUSTC_BOOTSTRAP=1

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(wire_ipv4 wire_ipv6 dslite_b4 dslite_aftr wire_esp wire_l2tp esp_codec l2tp_codec l2tp_ipsec_codec control_server)
fi

status=0
for t in "${targets[@]}"; do
    mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t" "fuzz/regressions/$t"
    log="fuzz/artifacts/$t/fuzz.log"
    echo "== $t: ${secs}s"
    # The corpus directory comes first: libFuzzer adds new inputs only there. The
    # regressions seed it.
    if ! cargo fuzz run "$t" "fuzz/corpus/$t" "fuzz/regressions/$t" -- \
        -max_total_time="$secs" -max_len=8192 -timeout=10 -print_final_stats=1 \
        >"$log" 2>&1; then
        status=1
        echo "   $t found something; see $log"
    fi
    grep -E '^Done [0-9]+ runs|stat::number_of_executed_units|^SUMMARY' "$log" | sed 's/^/   /' || true
    for f in "fuzz/artifacts/$t"/crash-* "fuzz/artifacts/$t"/leak-* \
        "fuzz/artifacts/$t"/timeout-* "fuzz/artifacts/$t"/oom-*; do
        if [ -f "$f" ]; then
            cp "$f" "fuzz/regressions/$t/"
            echo "   kept $(basename "$f") in fuzz/regressions/$t/"
        fi
    done
done
exit $status
