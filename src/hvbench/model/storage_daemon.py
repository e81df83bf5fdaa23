"""Pure translation of a vhost-user disk into its ``qemu-storage-daemon`` argv.

A disk with ``backend = "vhost-user"`` is served by a daemon of its own: one iothread
(``poll-max-ns`` as declared), the image opened with the declared ``aio`` and ``cache``,
exported as ``vhost-user-blk`` on a unix socket that QEMU's ``vhost-user-blk-pci``
connects to. No process is started here.
"""

from __future__ import annotations

from dataclasses import dataclass

from hvbench.model.spec import DiskSpec, source_kind

STORAGE_DAEMON = "qemu-storage-daemon"
#: First PCI slot of the vhost-user-blk devices: the daemon answers the guest's serial
#: request itself (not with hvbench's ``hvb-dN``), so the guest finds such a disk by its
#: PCI address instead. High enough that QEMU's automatically placed devices (a handful
#: here) never reach it.
VHOST_USER_FIRST_SLOT = 0x18

#: How each cache mode opens the image in the daemon: (O_DIRECT, flushes ignored, every
#: write flushed). QEMU's -drive cache= is the same three switches.
_CACHE_SWITCHES: dict[str, tuple[bool, bool, bool]] = {
    "none": (True, False, False),
    "writeback": (False, False, False),
    "writethrough": (False, False, True),
    "directsync": (True, False, True),
    "unsafe": (False, True, False),
}


@dataclass(frozen=True)
class DaemonPlan:
    """What a storage daemon's argv depends on besides the disk: its paths."""

    disk: DiskSpec
    index: int
    image: str
    socket: str
    #: The export's queue count: the disk's ``queues``, else the guest's vCPU count
    #: (what QEMU's own virtio-blk and vhost-user-blk-pci default to); QEMU's device
    #: must ask for no more than the export has (see :func:`vhost_user_queues`).
    queues: int = 1
    binary: str = STORAGE_DAEMON


def vhost_user_queues(disk: DiskSpec, vcpus: int) -> int:
    """The request queues of a vhost-user disk, on both sides of the socket."""
    return disk.queues if disk.queues is not None else vcpus


def vhost_user_slot(index: int) -> int:
    """The PCI slot of benchmark disk ``index``'s vhost-user-blk device."""
    return VHOST_USER_FIRST_SLOT + index


def guest_pci_address(index: int) -> str:
    """The guest's name of that PCI function (root bus 0), e.g. ``0000:00:18.0``."""
    return f"0000:00:{vhost_user_slot(index):02x}.0"


def _on(flag: bool) -> str:
    return "on" if flag else "off"


def _blockdev_args(plan: DaemonPlan) -> list[str]:
    disk = plan.disk
    direct, no_flush, _ = _CACHE_SWITCHES[disk.cache]
    protocol = "host_device" if source_kind(disk.source) == "device" else "file"
    discard = ",discard=unmap" if disk.discard else ""
    image = plan.image.replace(",", ",,")
    file_node = (f"driver={protocol},node-name=file{plan.index},filename={image},"
                 f"aio={disk.aio},cache.direct={_on(direct)},cache.no-flush={_on(no_flush)}"
                 f"{discard}")
    zeroes = f",detect-zeroes={disk.detect_zeroes}" if disk.detect_zeroes != "off" else ""
    fmt = "raw" if source_kind(disk.source) == "device" else disk.format
    format_node = f"driver={fmt},node-name=disk{plan.index},file=file{plan.index}{discard}{zeroes}"
    return ["--blockdev", file_node, "--blockdev", format_node]


def storage_daemon_argv(plan: DaemonPlan) -> list[str]:
    """The daemon's complete argv (pure)."""
    disk = plan.disk
    poll = f",poll-max-ns={disk.poll_max_ns}" if disk.poll_max_ns is not None else ""
    writethrough = _CACHE_SWITCHES[disk.cache][2]
    queues = f",num-queues={plan.queues}"
    export = (f"type=vhost-user-blk,id=export{plan.index},node-name=disk{plan.index},"
              f"addr.type=unix,addr.path={plan.socket.replace(',', ',,')},writable=on,"
              f"iothread=iothread{plan.index},writethrough={_on(writethrough)}{queues}")
    # The iothread comes before the export: once the export's socket exists, the
    # daemon's threads are its main thread, call_rcu (started before main()) and the
    # iothread (see hvbench.platforms.storage_daemon.iothread_of).
    return [
        plan.binary,
        "--object", f"iothread,id=iothread{plan.index}{poll}",
        *_blockdev_args(plan),
        "--export", export,
    ]
