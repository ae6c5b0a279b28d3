#!/bin/sh
# The first program of scripts/stock-kernel.sh's guest (busybox sh, in its
# initramfs): mount the host's files read-only at /host with tmpfs where
# programs write and the checkout read-write, run the command there, write its
# exit status into the checkout's target/stock-kernel/status, power off.
export PATH=/bin
busybox mount -t proc proc /proc
busybox mount -t sysfs sys /sys
busybox mount -t devtmpfs dev /dev
off() { busybox sync; busybox poweroff -f; }
if busybox grep -q tunbench.probe=1 /proc/cmdline; then
  echo "tunbench: probe booted" >/dev/ttyS0
  off
fi
# shellcheck disable=SC2013 # one module file a line, names without spaces
for m in $(busybox cat /modules/order); do
  busybox insmod "/modules/$m" || echo "stock-kernel init: insmod $m failed"
done
options=trans=virtio,version=9p2000.L,msize=512000,cache=loose
if ! busybox mount -t 9p -o "ro,$options" host /host; then
  echo "stock-kernel init: the host's files did not mount"
  off
fi
h=/host
busybox mount -t proc proc $h/proc
busybox mount -t sysfs sys $h/sys
busybox mount -t devtmpfs dev $h/dev
busybox mkdir -p $h/dev/pts $h/dev/shm
busybox mount -t devpts devpts $h/dev/pts
busybox mount -t tmpfs shm $h/dev/shm
busybox mount -t cgroup2 cgroup2 $h/sys/fs/cgroup 2>/dev/null
busybox mount -t debugfs debugfs $h/sys/kernel/debug 2>/dev/null
for d in /tmp /run /var/tmp /var/lib /var/log /var/cache; do
  busybox mount -t tmpfs tmpfs "$h$d"
done
# /root and /etc keep the host's files, written to a tmpfs layer.
busybox mount -t tmpfs layers /mnt
for d in /root /etc; do
  busybox mkdir -p "/mnt$d/upper" "/mnt$d/work"
  busybox mount -t overlay overlay -o "lowerdir=$h$d,upperdir=/mnt$d/upper,workdir=/mnt$d/work" "$h$d"
done
# The checkout's path comes on the kernel's command line; it is mounted there
# read-write, and holds the command, the PATH and, at the end, the status.
checkout=
# shellcheck disable=SC2013 # the command line is words
for word in $(busybox cat /proc/cmdline); do
  case "$word" in tunbench.checkout=*) checkout=${word#tunbench.checkout=} ;; esac
done
if [ -z "$checkout" ] || ! busybox mount -t 9p -o "rw,$options" checkout "$h$checkout"; then
  echo "stock-kernel init: the checkout ($checkout) did not mount"
  off
fi
work=$checkout/target/stock-kernel
busybox hostname stock-kernel
# The host's files become the root, so that the kernel's own helpers (modprobe
# for a module on demand) find the host's programs; the host's /bin/sh runs the
# command with the host's PATH, as root, then the host's busybox powers off.
exec busybox switch_root $h /bin/busybox sh -c "
  /bin/busybox ip link set lo up
  stty -onlcr 2>/dev/null
  # Through a pipe: the console is a terminal, and programs would draw on it.
  { /usr/bin/env -i HOME=/root TERM=dumb USER=root LOGNAME=root PATH=\"\$(cat '$work/path')\" \
      /bin/sh -c \"cd '$checkout' && . '$work/environment' && eval \\\"\\\$(cat '$work/command')\\\"\" </dev/null
    echo \$? >'$work/status'
  } 2>&1 | cat
  /bin/busybox sync
  /bin/busybox poweroff -f"
