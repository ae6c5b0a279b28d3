#!/usr/bin/env bash
# Installs what tunbench and its tests need on a fresh Debian machine, only where
# missing. Run as root. Sourced by main-job.sh and test.sh (which then build).
set -euo pipefail
if [ "$(id -u)" != 0 ]; then
  echo "setup: tunbench builds network namespaces and needs root; run this as root (sudo)" >&2
  exit 2
fi
# rustup's toolchain, where the machine has one, comes before Debian's older cargo.
for d in "${CARGO_HOME:-$HOME/.cargo}/bin" /root/.cargo/bin; do
  [ -x "$d/cargo" ] && export PATH="$d:$PATH" && break
done

need_pkgs=()
have() { command -v "$1" >/dev/null 2>&1; }
# ip and tc (router slow path, link shaping) both come with iproute2.
{ have ip && have tc; } || need_pkgs+=(iproute2)
have pgrep || need_pkgs+=(procps)
# Tests ping through tunnels and softwires (the fresh image has no ping).
have ping || need_pkgs+=(iputils-ping)
# The engine benchmark turns the lab veths' UDP GSO/GRO off for its split-path
# variant; jq reads iperf3's JSON in the benchmarks.
have ethtool || need_pkgs+=(ethtool)
have jq || need_pkgs+=(jq)
have cc || need_pkgs+=(gcc libc6-dev)
have cargo || need_pkgs+=(cargo rustc)
# The engine's interop tests run against Debian's iperf3 (3.12 on Debian 12).
have iperf3 || need_pkgs+=(iperf3)
# The latency probes' idle round trip is checked against irtt on the same path.
have irtt || need_pkgs+=(irtt)
# A kernel DS-Lite AFTR does NAT44 with nftables; tests dissect softwire packets
# with tshark.
have nft || need_pkgs+=(nftables)
have tshark || need_pkgs+=(tshark)
# WireGuard interop tests run Debian's wireguard-go as the other peer and check
# `tunbench pubkey` against `wg pubkey` (wireguard-tools).
have wireguard-go || need_pkgs+=(wireguard-go)
have wg || need_pkgs+=(wireguard-tools)
# IKEv2 tunnels run Debian's strongSwan: charon with userspace ESP
# (kernel-libipsec, in libcharon-extra-plugins) and swanctl to drive it.
[ -x /usr/lib/ipsec/charon ] || need_pkgs+=(strongswan-charon)
have swanctl || need_pkgs+=(strongswan-swanctl)
[ -e /usr/lib/ipsec/plugins/libstrongswan-kernel-libipsec.so ] || need_pkgs+=(libcharon-extra-plugins)
# AES-GCM and the ECP groups of the default proposals: the openssl plugin.
[ -e /usr/lib/ipsec/plugins/libstrongswan-openssl.so ] || need_pkgs+=(libstrongswan-standard-plugins)
# auth = "cert": pki issues the lab CA's certificates.
have pki || need_pkgs+=(strongswan-pki)
# The HTML report's test opens the page in headless Chromium (charts drawn, no
# console errors, a screenshot that is not blank).
have chromium || need_pkgs+=(chromium)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "setup: installing ${need_pkgs[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # tshark asks whether non-root users may capture; the default (no) is fine.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections 2>/dev/null || true
  apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi
