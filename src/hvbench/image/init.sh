#!/bin/sh
# /init of the hvbench guest (busybox ash, PID 1). Generated image; see hvbench.image.
#
# Brings the guest to the point where the host can drive it through qemu-ga:
# file systems, drivers for the devices present, networking from the kernel command
# line (hvbench.net=MAC,IP/PREFIX[,GATEWAY], repeatable), then the guest agent. Then it
# stays PID 1 forever, reaping orphans: if PID 1 exits, the kernel panics.

export PATH=/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root
umask 022

# Progress lines carry the guest uptime so slow boot steps are visible on the console.
msg() {
    read -r up _ </proc/uptime 2>/dev/null
    echo "hvbench-init: [${up:-?}] $*"
}

mount_fs() {
    mount -t proc proc /proc
    mount -t sysfs sysfs /sys
    mount -t devtmpfs devtmpfs /dev
    mkdir -p /dev/pts /dev/shm
    mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
    mount -t tmpfs -o mode=1777 tmpfs /tmp
    mount -t tmpfs -o mode=755 tmpfs /run
    mount -t tmpfs -o mode=1777 tmpfs /dev/shm
}

# modprobe every alias found in the given sysfs modalias files. busybox modprobe
# resolves them through modules.alias (written by depmod at build time); aliases of
# devices we have no driver for are ignored (-q).
load_for() {
    aliases=$(cat "$@" 2>/dev/null)
    [ -n "$aliases" ] && modprobe -qa $aliases
}

load_drivers() {
    # Pass 1: PCI devices, and platform devices (microvm's virtio-mmio, from ACPI).
    load_for /sys/bus/pci/devices/*/modalias /sys/bus/platform/devices/*/modalias
    # Pass 2: virtio devices exist only once a transport driver bound.
    load_for /sys/bus/virtio/devices/*/modalias
    # Pass 3: SCSI/ATA disks exist only once host adapters were scanned. Module init
    # waits for the kernel's async host scans, so everything is visible by now.
    load_for /sys/bus/scsi/devices/*/modalias
}

# Wait (at most ~1 s) until devtmpfs shows a node for every block device the kernel has.
settle_block() {
    tries=20
    while [ "$tries" -gt 0 ]; do
        missing=0
        for b in /sys/class/block/*; do
            [ -e "$b" ] && [ ! -e "/dev/${b##*/}" ] && missing=1
        done
        [ "$missing" = 0 ] && return 0
        tries=$((tries - 1))
        usleep 50000
    done
    msg "warning: block device nodes still missing after 1 s"
}

iface_by_mac() {
    for n in /sys/class/net/*; do
        [ "$(cat "$n/address" 2>/dev/null)" = "$1" ] && { echo "${n##*/}"; return 0; }
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
    # NIC drivers register their netdev during probe, but allow a short grace period.
    tries=20
    while ! dev=$(iface_by_mac "$mac"); do
        tries=$((tries - 1))
        if [ "$tries" -le 0 ]; then
            msg "error: no network interface with MAC $mac"
            return 1
        fi
        usleep 50000
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
    for word in $(cat /proc/cmdline); do
        case "$word" in
        hvbench.net=*) configure_net "${word#hvbench.net=}" ;;
        esac
    done
}

# The port name arrives from the host in a virtio control message, slightly after the
# port device appears, hence the retry loop (at most ~5 s).
agent_port() {
    tries=100
    while [ "$tries" -gt 0 ]; do
        for p in /sys/class/virtio-ports/*; do
            if [ "$(cat "$p/name" 2>/dev/null)" = org.qemu.guest_agent.0 ] \
                && [ -e "/dev/${p##*/}" ]; then
                echo "/dev/${p##*/}"
                return 0
            fi
        done
        tries=$((tries - 1))
        usleep 50000
    done
    return 1
}

# Restart the agent if it ever dies, so the host never loses its control channel.
run_agent() {
    mkdir -p /run/qemu-ga
    while :; do
        qemu-ga -m virtio-serial -p "$1" -t /run/qemu-ga -f /run/qemu-ga.pid
        msg "error: qemu-ga exited with $?, restarting"
        sleep 1
    done
}

mount_fs
hostname hvbench-guest
msg "loading drivers"
load_drivers
settle_block
setup_net
if port=$(agent_port); then
    run_agent "$port" &
    msg "guest agent on $port"
else
    msg "error: no virtio-serial port named org.qemu.guest_agent.0"
fi
# ext4 is not needed to answer the agent; load it (and its crc32c) off the boot path.
modprobe -q ext4 &
msg "ready"

# Stay PID 1 forever. `wait` reaps any child, including orphans re-parented to us.
trap '' INT TERM HUP
while :; do
    wait
    sleep 60 &
done
