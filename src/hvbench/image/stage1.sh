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

# /proc, /sys and /dev from the initramfs's /etc/fstab: one process for three mounts
# (every busybox process costs about 5 ms under TCG). Stage 2 mounts its own file
# systems under /dev too: their mount points go in now, while this shell has mkdir.
mount -a || fail "cannot mount /proc, /sys and /dev"
mkdir -p /dev/pts /dev/shm || fail "cannot make /dev/pts and /dev/shm"
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

msg "root $root found, mounting it and switching root"

# Every mount up to the switch is one `mount -a` of a table made here from the root
# disk's line and the initramfs's /etc/fstab.newroot (hvbench.image.builder writes it;
# read and echo are builtins): nine mounts in one process instead of six processes.
# That table, in order: the overlay on /newroot, whose writable layer is the
# initramfs's own file system (the kernel unpacks the initramfs into a tmpfs, with no
# root= on the command line, which overlayfs accepts as an upper layer; a tmpfs of its
# own would hold the same pages for one more mount); stage 2's file systems (the
# image's /etc/fstab); /dev, /proc and /sys moved into the new root with what is
# mounted under them (stage 2 sees them mounted and does not mount them again).
# /lower, /rw/upper, /rw/work and /newroot ship in the initramfs (no mkdir at boot),
# and so does /rw/upper/bin/busybox, a hard link to this in-memory /bin/busybox: the
# root disk's copy (the same file, from the same package) would be read from the
# squashfs on first use, about 60 ms of page faults under TCG, by stage 2 and every
# shell, mount and modprobe after it.
{
    echo "$root /lower squashfs ro 0 0"
    while read -r line; do
        echo "$line"
    done </etc/fstab.newroot
} >/etc/fstab.root || fail "cannot write /etc/fstab.root"
mount -a -T /etc/fstab.root || fail "cannot mount the root ($root) and move /dev, /proc, /sys"
# What busybox switch_root does, minus emptying the initramfs first: that step alone
# costs about 0.2 s under TCG, to free the 3 MB the initramfs occupies.
cd /newroot || fail "cannot enter /newroot"
mount --move . / || fail "cannot move the new root to /"
exec chroot . /init
