#!/bin/sh
# Stage-1 /init of the hvbench guest (busybox ash in a tiny initramfs). Generated image;
# see hvbench.image.
#
# The initramfs holds only busybox and the modules needed to reach the root disk, so the
# kernel has little to unpack. This script finds the read-only root file system image
# (the virtio disk with serial hvb-root), puts an overlay on top whose writable layer
# lives in the initramfs itself (tmpfs), and switch_roots into it to run the stage-2
# /init (init.sh). Any failure
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
# right after; poll (every 5 ms, at most 2 s) rather than assume both already happened.
# A short interval: the node usually appears within a millisecond, and the guest's
# only vCPU is idle while this sleeps.
wait_root_device() {
    tries=400
    while [ "$tries" -gt 0 ]; do
        find_root_device && [ -b "$root" ] && return 0
        tries=$((tries - 1))
        usleep 5000
    done
    return 1
}

mount -t proc proc /proc || fail "cannot mount /proc"
mount -t sysfs sysfs /sys || fail "cannot mount /sys"
mount -t devtmpfs devtmpfs /dev || fail "cannot mount /dev"
msg "loading the root disk drivers"

# The machine's virtio transport: PCI on q35/pc, MMIO on microvm (no PCI device at
# all; ACPI describes its virtio-mmio transports). Only the one in use loads: each
# module costs its load and relocation under TCG. virtio_console carries the guest
# agent: loading it here, in the same process, saves stage 2 a modprobe (a fork and a
# modules.dep parse).
transport=virtio_mmio
for d in /sys/bus/pci/devices/*; do
    [ -e "$d" ] && transport=virtio_pci
    break
done
modprobe -a "$transport" virtio_blk squashfs overlay virtio_console \
    || fail "cannot load the root disk drivers"
wait_root_device || fail "no virtio disk with serial $ROOT_SERIAL (is rootfs.img attached?)"

# /lower, /rw/upper, /rw/work and /newroot ship in the initramfs (no mkdir at boot).
mount -t squashfs -o ro "$root" /lower || fail "cannot mount $root"
# Stage 2 and every shell, mount and modprobe after it run /bin/busybox. The root disk's
# copy is the same file (both come from the image's busybox-static package), but its
# pages would be read from the squashfs on first use, about 60 ms of page faults and
# virtio reads under TCG; this one is in memory already. A hard link in the overlay's
# upper layer makes the root's /bin/busybox this file; made before the overlay mounts,
# as overlayfs requires of changes to its layers.
ln /bin/busybox /rw/upper/bin/busybox || fail "cannot link busybox into the overlay"
# The writable layer is the initramfs's own file system: the kernel unpacks the
# initramfs into a tmpfs (no root= on the command line), which overlayfs accepts as an
# upper layer, and upperdir and workdir share it. A tmpfs of its own would hold the
# same pages in the same way, for one more mount and one mkdir (two processes).
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
