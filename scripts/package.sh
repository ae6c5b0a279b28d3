#!/usr/bin/env bash
# The Debian package, target/debian/tunbench_VERSION-1_ARCH.deb, built by
# dpkg-deb from a staging tree: the release binary (stripped), the man pages
# and the bash, zsh and fish completions the binary generates from its own
# arguments (`tunbench manpages`, `tunbench completions`), the example
# topologies, the README, changelog, licenses and docs, and the control and
# copyright files of packaging/deb/. Prints the .deb's path last.
#   bash scripts/package.sh             builds the release binary first
#   bash scripts/package.sh --no-build  packages the release binary as built
# Install it with: apt-get install ./target/debian/tunbench_*.deb
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: scripts/package.sh [--no-build]" >&2
  exit 2
}

# Cargo.toml's version of the tunbench package, the one source of it: cargo
# pkgid prints path+file:///...#tunbench@VERSION.
cargo_version() {
  local id
  id=$(cargo pkgid --locked --package tunbench)
  echo "${id##*[#@]}"
}

# Where Cargo writes (CARGO_TARGET_DIR or build.target-dir may move it).
target_dir() {
  cargo metadata --format-version 1 --no-deps --locked |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p'
}

# The binary as installed: stripped as dh_strip and cargo-deb strip it.
stage_binary() {
  install -D -m 755 "$bin" "$root/usr/bin/tunbench"
  strip --strip-unneeded --remove-section=.comment --remove-section=.note \
    "$root/usr/bin/tunbench"
}

# Man pages and completions from the binary's own clap definitions, so they
# say what --help says; man pages gzipped without a name or time in them.
stage_generated() {
  local man="$root/usr/share/man/man1"
  "$bin" manpages "$man" >/dev/null
  gzip -9n "$man"/*.1
  "$bin" completions bash >"$root/usr/share/bash-completion/completions/tunbench"
  "$bin" completions zsh >"$root/usr/share/zsh/vendor-completions/_tunbench"
  "$bin" completions fish >"$root/usr/share/fish/vendor_completions.d/tunbench.fish"
}

# Files of the checkout, each into a directory of the staging tree.
stage_files() {
  local doc="$root/usr/share/doc/tunbench"
  install -m 644 topologies/*.toml "$root/usr/share/tunbench/topologies/"
  install -m 644 README.md CHANGELOG.md LICENSE-MIT LICENSE-APACHE \
    packaging/deb/copyright "$doc/"
  install -m 644 docs/*.md "$doc/docs/"
}

stage() {
  rm -rf "$root"
  mkdir -p "$root"/usr/share/{man/man1,tunbench/topologies,doc/tunbench/docs} \
    "$root"/usr/share/{bash-completion/completions,zsh/vendor-completions} \
    "$root"/usr/share/fish/vendor_completions.d
  stage_binary
  stage_generated
  stage_files
  # Whatever the umask: directories 755, files 644, the binary 755.
  find "$root" -type d -exec chmod 755 {} +
  find "$root" -type f ! -path "$root/usr/bin/*" -exec chmod 644 {} +
}

# Installed-Size in KiB as dpkg-gencontrol counts it: each file rounded up to
# a KiB, each directory 1. Run before DEBIAN/ exists.
installed_size() {
  find "$root" -printf '%y %s\n' |
    awk '$1 == "f" { kib += int(($2 + 1023) / 1024); next } { kib += 1 } END { print kib }'
}

# DEBIAN/control from the template (its comments dropped), DEBIAN/md5sums.
control() {
  local size
  size=$(installed_size)
  mkdir -m 755 "$root/DEBIAN"
  sed -e '/^#/d' -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" \
    -e "s/@INSTALLED_SIZE@/$size/" packaging/deb/control >"$root/DEBIAN/control"
  (cd "$root" && find usr -type f -print0 | sort -z | xargs -0 md5sum) \
    >"$root/DEBIAN/md5sums"
  chmod 644 "$root/DEBIAN/control" "$root/DEBIAN/md5sums"
}

# Every file's time the last commit's (or SOURCE_DATE_EPOCH's), so the same
# commit gives the same .deb; dpkg-deb uses it for the archive's own times.
set_times() {
  local epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || true)}
  [ -n "$epoch" ] || return 0
  export SOURCE_DATE_EPOCH=$epoch
  find "$root" -exec touch -h -d "@$epoch" {} +
}

build=1
[ $# -le 1 ] || usage
case "${1:-}" in
  "") ;;
  --no-build) build=0 ;;
  *) usage ;;
esac
upstream=$(cargo_version)
version=$upstream-1
arch=$(dpkg --print-architecture)
target=$(target_dir)
if [ "$build" = 1 ]; then
  cargo build --release --locked
fi
bin="$target/release/tunbench"
if [ ! -x "$bin" ]; then
  echo "package: no release binary at $bin; run scripts/package.sh without --no-build" >&2
  exit 1
fi
# A binary built from another version would be packaged under the wrong one.
if [ "$("$bin" --version)" != "tunbench $upstream" ]; then
  echo "package: $bin is $("$bin" --version), Cargo.toml says $upstream; run scripts/package.sh without --no-build" >&2
  exit 1
fi
root="$target/debian/staging"
deb="$target/debian/tunbench_${version}_$arch.deb"
stage
control
set_times
# xz, which every dpkg reads (Ubuntu's dpkg-deb would default to zstd).
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
