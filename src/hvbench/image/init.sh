#!/bin/sh
# Stage-2 /init of the hvbench guest (busybox ash, PID 1), run by stage1.sh through
# switch_root on the overlaid root disk. Generated image; see hvbench.image.
#
# Brings the guest to the point where the host can drive it through qemu-ga:
# file systems, drivers (those named by hvbench.drivers=a,b on the kernel command line,
# else those matching the devices present), networking from the kernel command line
# (hvbench.net=MAC,IP/PREFIX[,GATEWAY], repeatable), then the guest agent. Then it stays
# PID 1 forever, reaping orphans: if PID 1 exits, the kernel panics.

export PATH=/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root
umask 022

# Progress lines carry the guest uptime so slow boot steps are visible on the console.
msg() {
    read -r up _ </proc/uptime 2>/dev/null
    echo "hvbench-init: [${up:-?}] $*"
}

# Stage 1 mounted everything already (/proc, /sys and /dev moved here, and the image's
# /etc/fstab under them: devpts, /tmp, /run, /dev/shm), in one process for all of
# them; devpts's ptmx shows it. Only a stage 2 run as the first /init mounts them
# here. The tests are shell builtins: no fork for a mount check.
mount_fs() {
    [ -e /dev/pts/ptmx ] && return 0
    [ -e /proc/self ] || mount -t proc proc /proc
    [ -d /sys/kernel ] || mount -t sysfs sysfs /sys
    [ -e /dev/null ] || mount -t devtmpfs devtmpfs /dev
    mkdir -p /dev/pts /dev/shm
    mount -a || msg "error: cannot mount every file system of /etc/fstab"
}

# modprobe every alias found in the given sysfs modalias files. busybox modprobe
# resolves them through modules.alias (written by depmod at build time); aliases of
# devices we have no driver for are ignored (-q).
load_for() {
    aliases=$(cat "$@" 2>/dev/null)
    [ -n "$aliases" ] && modprobe -qa $aliases
}

# Set $hint to the value of the hvbench.drivers= word with commas as spaces, and fail
# if the kernel command line has no such word. An empty value is valid: no disks, no
# NICs. A variable rather than $(...): a command substitution forks.
driver_hint() {
    read -r cmdline </proc/cmdline
    for word in $cmdline; do
        case "$word" in
        hvbench.drivers=*)
            list=${word#hvbench.drivers=}
            old_ifs=$IFS
            IFS=,
            set -- $list
            IFS=$old_ifs
            hint="$*"
            return 0
            ;;
        esac
    done
    return 1
}

# The host names the modules for the disks and NICs it declared, so only those load:
# scanning modaliases would also bind devices nobody uses, such as q35's built-in AHCI
# controller (a third of a second of probing under TCG). modprobe pulls dependencies.
# virtio_console carries the guest agent: stage 1 loaded it already, so a guest without
# disks or NICs starts no modprobe here (one fork less under TCG). With benchmark disks,
# ext4 loads too, before the agent answers: the host formats and then mounts them
# without -t, which only works once the kernel knows the file system type.
load_named_drivers() {
    fs=
    for m in $1; do
        case "$m" in
        virtio_blk | virtio_scsi | sd_mod | ahci | ata_piix | sym53c8xx | nvme) fs=ext4 ;;
        esac
    done
    [ -d /sys/module/virtio_console ] || set -- "virtio_console $1"
    [ -n "$1$fs" ] || return 0
    modprobe -a $1 $fs || msg "error: cannot load some of: $1 $fs"
}

scan_drivers() {
    # Pass 1: PCI devices, and platform devices (microvm's virtio-mmio, from ACPI).
    load_for /sys/bus/pci/devices/*/modalias /sys/bus/platform/devices/*/modalias
    # Pass 2: virtio devices exist only once a transport driver bound.
    load_for /sys/bus/virtio/devices/*/modalias
    # Pass 3: SCSI/ATA disks exist only once host adapters were scanned. Module init
    # waits for the kernel's async host scans, so everything is visible by now.
    load_for /sys/bus/scsi/devices/*/modalias
}

load_drivers() {
    if driver_hint; then
        load_named_drivers "$hint"
    else
        scan_drivers
        # Without a hint we cannot tell whether disks will be mounted: load ext4 (and
        # its crc32c) in the background, off the path to the agent.
        modprobe -q ext4 &
    fi
}

# Wait (at most ~2 s, polling every 5 ms) until every SCSI/ATA disk has its block
# device (sd_mod may probe asynchronously) and devtmpfs shows a node for every block
# device the kernel has. Builtins only: the loop runs on every boot and forks are slow
# under TCG.
settle_block() {
    tries=400
    while [ "$tries" -gt 0 ]; do
        missing=0
        for s in /sys/bus/scsi/devices/*:*:*:*; do
            [ -e "$s/type" ] || continue
            read -r type <"$s/type"
            [ "$type" = 0 ] && [ ! -d "$s/block" ] && missing=1
        done
        for b in /sys/class/block/*; do
            [ -e "$b" ] && [ ! -e "/dev/${b##*/}" ] && missing=1
        done
        [ "$missing" = 0 ] && return 0
        tries=$((tries - 1))
        usleep 5000
    done
    msg "warning: block devices still missing after 2 s"
}

iface_by_mac() {
    for n in /sys/class/net/*; do
        address=
        read -r address <"$n/address" 2>/dev/null
        [ "$address" = "$1" ] && { echo "${n##*/}"; return 0; }
    done
    return 1
}

# $1 = MAC,IP/PREFIX[,GATEWAY]
configure_net() {
    old_ifs=$IFS
    IFS=,
    set -- $1
    IFS=$old_ifs
    mac=$(echo "$1" | tr 'A-F' 'a-f')
    addr=$2
    gw=$3
    if [ -z "$mac" ] || [ -z "$addr" ]; then
        msg "error: bad hvbench.net=$*"
        return 1
    fi
    # NIC drivers register their netdev during probe, but allow a short grace period
    # (1 s, polling every 5 ms).
    tries=200
    while ! dev=$(iface_by_mac "$mac"); do
        tries=$((tries - 1))
        if [ "$tries" -le 0 ]; then
            msg "error: no network interface with MAC $mac"
            return 1
        fi
        usleep 5000
    done
    ip link set dev "$dev" up || msg "error: cannot bring $dev up"
    ip addr add "$addr" dev "$dev" || msg "error: cannot set $addr on $dev"
    if [ -n "$gw" ]; then
        ip route add default via "$gw" dev "$dev" || msg "error: no default route via $gw"
    fi
    msg "$dev ($mac) = $addr${gw:+ via $gw}"
}

setup_net() {
    ip link set dev lo up
    read -r cmdline </proc/cmdline
    for word in $cmdline; do
        case "$word" in
        hvbench.net=*) configure_net "${word#hvbench.net=}" ;;
        esac
    done
}

# Set $port to the agent's port device. The port name arrives from the host in a virtio
# control message, slightly after the port device appears, hence the retry loop (every
# 5 ms, at most ~5 s).
agent_port() {
    tries=1000
    while [ "$tries" -gt 0 ]; do
        for p in /sys/class/virtio-ports/*; do
            name=
            read -r name <"$p/name" 2>/dev/null
            if [ "$name" = org.qemu.guest_agent.0 ] && [ -e "/dev/${p##*/}" ]; then
                port=/dev/${p##*/}
                return 0
            fi
        done
        tries=$((tries - 1))
        usleep 5000
    done
    return 1
}

# Restart the agent if it ever dies, so the host never loses its control channel.
# Its state directory is qemu-ga's default, /var/run (= /run, a fresh tmpfs): no mkdir.
run_agent() {
    while :; do
        qemu-ga -m virtio-serial -p "$1" -f /run/qemu-ga.pid
        msg "error: qemu-ga exited with $?, restarting"
        sleep 1
    done
}

msg "stage 2 started"
mount_fs
# What hostname(1) does, without a fork.
echo hvbench-guest >/proc/sys/kernel/hostname
msg "loading drivers"
load_drivers
settle_block
setup_net
if agent_port; then
    run_agent "$port" &
    msg "guest agent on $port"
else
    msg "error: no virtio-serial port named org.qemu.guest_agent.0"
fi
msg "ready"

# Stay PID 1 forever. `wait` reaps any child, including orphans re-parented to us.
trap '' INT TERM HUP
while :; do
    wait
    sleep 60 &
done
