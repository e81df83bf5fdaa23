#!/bin/sh
# Stage-1 /init of the hvbench guest (busybox ash in a tiny initramfs). Generated image;
# see hvbench.image.
#
# The initramfs holds only busybox and the modules needed to reach the root disk, so the
# kernel has little to unpack. This script finds the read-only root file system image
# (the virtio disk with serial hvb-root), puts a tmpfs overlay on top so the root is
# writable, and switch_roots into it to run the stage-2 /init (init.sh). Any failure
# exits, and PID 1 exiting panics the kernel: with panic=-1 and QEMU's -no-reboot the
# host sees QEMU exit at once, with the reason on the console, instead of a timeout.

export PATH=/sbin:/bin:/usr/sbin:/usr/bin
ROOT_SERIAL=hvb-root

msg() {
    read -r up _ </proc/uptime 2>/dev/null
    echo "hvbench-stage1: [${up:-?}] $*"
}

fail() {
    msg "error: $*"
    exit 1
}

# Set $root to /dev/vdX of the virtio disk whose serial is $ROOT_SERIAL. Only shell
# builtins (read, test) and a variable rather than $(...): every fork costs
# milliseconds under TCG. The benchmark disks (hvb-d0, ...) may be virtio disks too,
# which is why the serial, not the name, decides.
find_root_device() {
    for s in /sys/block/vd*/serial; do
        serial=
        read -r serial <"$s" 2>/dev/null
        if [ "$serial" = "$ROOT_SERIAL" ]; then
            dev=${s%/serial}
            root=/dev/${dev##*/}
            return 0
        fi
    done
    return 1
}

# virtio_blk registers its disks while modprobe runs, and devtmpfs creates the node
# right after; poll briefly (at most 2 s) rather than assume both already happened.
wait_root_device() {
    tries=40
    while [ "$tries" -gt 0 ]; do
        find_root_device && [ -b "$root" ] && return 0
        tries=$((tries - 1))
        usleep 50000
    done
    return 1
}

mount -t proc proc /proc || fail "cannot mount /proc"
mount -t sysfs sysfs /sys || fail "cannot mount /sys"
mount -t devtmpfs devtmpfs /dev || fail "cannot mount /dev"
msg "loading the root disk drivers"

# Both virtio transports: PCI for q35/pc, MMIO for microvm. The one without devices
# costs only its registration. virtio_console carries the guest agent: loading it here,
# in the same process, saves stage 2 a modprobe (a fork and a modules.dep parse).
modprobe -a virtio_pci virtio_mmio virtio_blk squashfs overlay virtio_console \
    || fail "cannot load the root disk drivers"
wait_root_device || fail "no virtio disk with serial $ROOT_SERIAL (is rootfs.img attached?)"

# /lower, /rw and /newroot ship in the initramfs (no mkdir process at boot).
mount -t squashfs -o ro "$root" /lower || fail "cannot mount $root"
# upperdir and workdir must be on the same file system: one tmpfs holds both.
mount -t tmpfs -o mode=755 tmpfs /rw || fail "cannot mount the overlay tmpfs"
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay /newroot \
    || fail "cannot mount the root overlay"
msg "root $root mounted, switching root"
# Keep the kernel file systems: stage 2 sees them mounted and does not mount them again.
for fs in dev proc sys; do
    mount --move "/$fs" "/newroot/$fs" || fail "cannot move /$fs"
done
# What busybox switch_root does, minus emptying the initramfs first: that step alone
# costs about 0.2 s under TCG, to free the 3 MB the initramfs occupies.
cd /newroot || fail "cannot enter /newroot"
mount --move . / || fail "cannot move the new root to /"
exec chroot . /init
