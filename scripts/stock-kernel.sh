#!/usr/bin/env bash
# Runs a command on Debian's stock kernel (the linux-image-amd64 package): the
# kernel users run, with the seg6, WireGuard, xfrm, L2TP, vlan, ipvlan, netem
# and cake that a development machine's kernel may lack. The kernel boots under
# qemu with an initramfs made here (busybox and the 9p modules); the guest sees
# this machine's files read-only, the checkout read-write at the same path, and
# a tmpfs wherever programs write (/tmp, /run, /var, $HOME). It makes nothing on
# this machine but target/stock-kernel/, and qemu ends with the command.
#
#   bash scripts/stock-kernel.sh [--timeout SECONDS] -- COMMAND [ARG...]
#
# The command runs as root in the checkout with the host's PATH; its exit status
# is the script's. KVM is used where a guest boots under it, else emulation
# (TCG): right for what works, far slower. TUNBENCH_VM_KERNEL picks a kernel
# (a /boot/vmlinuz-* of a Debian linux-image package), TUNBENCH_VM_KVM=0|1
# skips the probe, TUNBENCH_VM_CPUS and TUNBENCH_VM_MEMORY size the guest.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
usage="usage: bash scripts/stock-kernel.sh [--timeout SECONDS] -- COMMAND [ARG...]"
limit=600
while [ $# -gt 0 ]; do
  case "$1" in
    --timeout) limit=$2; shift 2 ;;
    --) shift; break ;;
    -h | --help) echo "$usage"; exit 0 ;;
    *) echo "stock-kernel: unknown argument '$1'; $usage" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "stock-kernel: no command; $usage" >&2; exit 2; }
fail() { echo "stock-kernel: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root (the command inside runs as root; qemu reads /boot)"
command -v qemu-system-x86_64 >/dev/null || fail "qemu-system-x86_64 is not installed: install Debian's qemu-system-x86 (bash scripts/setup.sh --tests does)"
[ -x /bin/busybox ] || fail "busybox is not installed: install Debian's busybox-static (bash scripts/setup.sh --tests does)"

# The newest stock kernel installed, with its modules.
kernel=${TUNBENCH_VM_KERNEL:-$(find /boot -maxdepth 1 -name 'vmlinuz-*-amd64' | sort -V | tail -1)}
[ -r "$kernel" ] ||
  fail "no stock kernel in /boot: install Debian's linux-image-amd64 (bash scripts/setup.sh --tests does)"
release=${kernel##*/vmlinuz-}
modules=/lib/modules/$release
[ -f "$modules/modules.dep" ] || fail "$kernel has no modules in $modules"

work=$root/target/stock-kernel
mkdir -p "$work"
initramfs=$work/initramfs-$release.cpio.gz
# The guest's first program: mount this machine's files, run the command, power off.
make_initramfs() {
  local tree=$work/initramfs.tree m path dep
  rm -rf "$tree"
  mkdir -p "$tree"/{bin,dev,proc,sys,host,mnt,modules}
  cp /bin/busybox "$tree/bin/busybox"
  ln -s busybox "$tree/bin/sh"
  # 9p over virtio and overlayfs, each after what it needs (modules.dep lists a
  # module's needs last-loaded first).
  for m in virtio_pci 9pnet_virtio 9p overlay; do
    path=$(grep -E "(^|/)$m\.ko:" "$modules/modules.dep" | head -1) ||
      fail "$release has no module $m: the initramfs needs it"
    for dep in $(echo "${path#*:}" | tr ' ' '\n' | tac) "${path%%:*}"; do
      grep -qx "${dep##*/}" "$tree/modules/order" 2>/dev/null && continue
      cp "$modules/$dep" "$tree/modules/"
      echo "${dep##*/}" >>"$tree/modules/order"
    done
  done
  cp scripts/stock-kernel-init.sh "$tree/init"
  chmod 755 "$tree/init"
  (cd "$tree" && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1) >"$initramfs.new"
  mv "$initramfs.new" "$initramfs"
  rm -rf "$tree"
}
if [ ! -s "$initramfs" ] || [ scripts/stock-kernel-init.sh -nt "$initramfs" ] || [ "$0" -nt "$initramfs" ]; then
  make_initramfs
fi

# The command, as the guest's init reads it: one line of shell words.
printf '%q ' "$@" >"$work/command"
case "$root" in *[[:space:]]*) fail "the checkout's path ($root) has white space; the guest takes it on the kernel's command line" ;; esac
printf '%s\n' "$PATH" >"$work/path"
# What of the caller's environment the command sees besides PATH.
for v in CI RUST_BACKTRACE CARGO_HOME RUSTUP_HOME CARGO_TARGET_DIR NEXTEST_PROFILE; do
  [ -n "${!v:-}" ] && printf 'export %s=%q\n' "$v" "${!v}"
done >"$work/environment"
rm -f "$work/status"
cpus=${TUNBENCH_VM_CPUS:-2}
memory=${TUNBENCH_VM_MEMORY:-2G}
qemu_base=(qemu-system-x86_64 -nodefaults -no-reboot -display none -m "$memory" -smp "$cpus"
  -kernel "$kernel" -initrd "$initramfs"
  -virtfs "local,path=/,mount_tag=host,security_model=passthrough,readonly=on,multidevs=remap"
  -virtfs "local,path=$root,mount_tag=checkout,security_model=passthrough,multidevs=remap"
  -device virtio-rng-pci)
append="console=ttyS0 panic=-1 quiet loglevel=1 tsc=reliable"

# KVM only where a guest really boots under it: /dev/kvm can open and still
# hang the guest after the BIOS (nested virtualisation that is not there).
kvm=${TUNBENCH_VM_KVM:-probe}
if [ "$kvm" = probe ]; then
  kvm=0
  if [ -w /dev/kvm ]; then
    probe=$work/kvm-probe.log
    (timeout 15 "${qemu_base[@]}" -enable-kvm -cpu host -serial "file:$probe" \
      -append "$append tunbench.probe=1" || true) >/dev/null 2>&1
    grep -q "tunbench: probe booted" "$probe" 2>/dev/null && kvm=1
    rm -f "$probe"
  fi
fi
if [ "$kvm" = 1 ]; then accel=(-enable-kvm -cpu host); how=KVM; else accel=(-accel "tcg${TUNBENCH_VM_TCG:-}" -cpu "${TUNBENCH_VM_CPU_MODEL:-max}"); how="emulation (no KVM)"; fi
echo "stock-kernel: booting $release under $how, $cpus CPUs, $memory" >&2
status=0
timeout --kill-after=10 "$limit" "${qemu_base[@]}" "${accel[@]}" -serial stdio \
  -append "$append tunbench.checkout=$root" </dev/null || status=$?
if [ "$status" = 124 ] || [ "$status" = 137 ]; then
  fail "the VM did not finish within $limit s (--timeout)"
fi
[ "$status" = 0 ] || fail "qemu failed with status $status"
[ -f "$work/status" ] || fail "the guest powered off without running the command (no exit status written): see its console above"
exit "$(cat "$work/status")"
