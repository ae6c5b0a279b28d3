#!/usr/bin/env bash
# The Debian package, target/debian/tunbench_VERSION-1_ARCH.deb, made by
# cargo-deb from [package.metadata.deb] in Cargo.toml: the release binary, the
# man pages and the bash, zsh and fish completions the binary generates from
# its own arguments (`tunbench manpages`, `tunbench completions`), the example
# topologies, the README and docs. Prints the .deb's path last.
#   bash scripts/package.sh             builds the release binary first
#   bash scripts/package.sh --no-build  packages the release binary as built
# Install it with: apt-get install ./target/debian/tunbench_*.deb
set -euo pipefail
cd "$(dirname "$0")/.."
build=1
case "${1:-}" in
  "") ;;
  --no-build) build=0 ;;
  *)
    echo "usage: scripts/package.sh [--no-build]" >&2
    exit 2
    ;;
esac
if ! cargo deb --version >/dev/null 2>&1; then
  echo "package: installing cargo-deb, the package builder (once, from crates.io)" >&2
  cargo install --locked cargo-deb
fi
# Where Cargo writes (CARGO_TARGET_DIR or build.target-dir may move it).
target=$(cargo metadata --format-version 1 --no-deps |
  sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
if [ "$build" = 1 ]; then
  cargo build --release --locked
fi
bin="$target/release/tunbench"
if [ ! -x "$bin" ]; then
  echo "package: no release binary at $bin; run scripts/package.sh without --no-build" >&2
  exit 1
fi
# The files [package.metadata.deb] names as target/release/package/...
generated="$target/release/package"
rm -rf "$generated"
mkdir -p "$generated/completions"
"$bin" manpages "$generated/man" >/dev/null
gzip -9n "$generated"/man/*.1
"$bin" completions bash >"$generated/completions/tunbench.bash"
"$bin" completions zsh >"$generated/completions/_tunbench"
"$bin" completions fish >"$generated/completions/tunbench.fish"
cargo deb --no-build --locked --quiet
